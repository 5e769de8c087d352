package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/wakeup"
)

// dueMargin is added to a delayed job's due time before its wake-up: a
// worker woken a little early claims nothing and waits again.
const dueMargin = 300 * time.Microsecond

// Subscribe implements backend.Notifier. The scripts publish on each
// queue's channel ("prefix:{queue}:w") when its ready set goes from empty
// to non-empty ("n") and when a delayed job is due before every other one
// ("d" and the µs until it is due); claims report the queue's next due
// time too. One subscriber connection per Backend (started on the first
// Subscribe, stopped by Close) wakes the subscribers of a queue at once for
// "n", and arms a timer for "d", so a delayed or backing-off job is
// claimed within about a millisecond of its due time with no polling. A
// Backend wakes its own subscribers without waiting for the round trip.
// Each time a channel is (re)subscribed, after a dropped connection say,
// its subscribers are woken once, since messages sent meanwhile are lost.
// Workers still poll at their PollInterval, so a lost message only delays
// a pickup. After Close the channel never fires.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	return b.notifier.subscribe(queues)
}

// notifier owns the subscriber connection, this Backend's subscriptions
// and the timers of delayed jobs. The connection listens on the channels
// of the queues that have a subscription (subs.Watch).
type notifier struct {
	b    *Backend
	subs wakeup.Set

	mu      sync.Mutex
	due     map[string]time.Time // watched queue -> when to wake it
	ps      *pubsub
	running bool
	stopped bool
	kick    chan struct{} // the due times changed
}

func newNotifier(b *Backend) *notifier {
	n := &notifier{b: b, due: map[string]time.Time{}, kick: make(chan struct{}, 1)}
	n.subs.Watch = n.watch
	return n
}

func (n *notifier) subscribe(queues []string) (<-chan struct{}, func()) {
	n.mu.Lock()
	if !n.stopped && !n.running {
		n.ps = n.b.c.newPubSub()
		// The loop lives as long as the Backend, not any caller.
		n.running = n.b.background.Start(context.Background(), lifecycle.Component{Name: "redis notifier", Run: n.run})
		if !n.running {
			_ = n.ps.close()
		}
	}
	n.mu.Unlock()
	return n.subs.Subscribe(queues)
}

// watch (un)subscribes the connection to the channels of queues that got
// their first subscription or lost their last. A failed SUBSCRIBE is
// still made when the pubsub reconnects; until then workers poll.
func (n *notifier) watch(queues []string, watched bool) {
	channels := make([]string, len(queues))
	for i, q := range queues {
		channels[i] = n.b.keys.queue(q).channel
	}
	n.mu.Lock()
	if !watched {
		for _, q := range queues {
			delete(n.due, q)
		}
	}
	ps := n.ps
	n.mu.Unlock()
	if ps == nil {
		return
	}
	if !watched {
		_ = ps.unsubscribe(context.Background(), channels...) // an extra message is harmless
		return
	}
	if err := ps.subscribe(context.Background(), channels...); err != nil && !errors.Is(err, backend.ErrClosed) {
		n.b.opts.Logger.Warn("jobq redis notifier: subscribe failed, workers poll until the connection is back",
			"key_prefix", n.b.opts.KeyPrefix, "err", n.b.fail("subscribe", err))
	}
}

// stop drops every subscriber and keeps the loop from starting; Close
// calls it before stopping the lifecycle group, which ends a running loop.
func (n *notifier) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	n.subs.Close()
	n.due = map[string]time.Time{}
}

// local applies what one of this Backend's scripts reported for queue:
// woke, the ready set went from empty to non-empty; due >= 0, the queue
// has a delayed job due in that many µs.
func (n *notifier) local(queue string, woke bool, due int64) {
	if woke {
		n.wake(queue)
	}
	if due >= 0 {
		n.setDue(queue, time.Now().Add(time.Duration(due)*time.Microsecond+dueMargin))
	}
}

// wake wakes the subscribers of queue.
func (n *notifier) wake(queue string) {
	n.subs.Wake(queue)
}

// setDue arms a wake-up of queue at t (local clock), unless an earlier
// one is armed; for queues nobody here subscribes to it does nothing.
func (n *notifier) setDue(queue string, t time.Time) {
	if !n.subs.Watched(queue) {
		return
	}
	n.mu.Lock()
	if cur, ok := n.due[queue]; ok && !t.Before(cur) {
		n.mu.Unlock()
		return
	}
	n.due[queue] = t
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// fire wakes the queues whose time has come and returns the next time to
// fire, zero when none is armed.
func (n *notifier) fire(now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var next time.Time
	for q, t := range n.due {
		if !t.After(now) {
			delete(n.due, q)
			n.subs.Wake(q)
			continue
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// run delivers the subscriber connection's messages and fires the timers
// until ctx ends; then it closes the connection.
func (n *notifier) run(ctx context.Context) {
	n.mu.Lock()
	ps := n.ps
	n.mu.Unlock()
	events := ps.events()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	rearm := func() {
		timer.Stop()
		if next := n.fire(time.Now()); !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
	for {
		select {
		case <-ctx.Done():
			_ = ps.close()
			for range events {
				// The pubsub closes the channel once its connection is
				// closed; whatever is left in it is dropped.
			}
			return
		case v, ok := <-events:
			if !ok {
				return
			}
			n.handle(ps, v)
		case <-n.kick:
			rearm()
		case <-timer.C:
			rearm()
		}
	}
}

// handle acts on one event of the subscriber connection.
func (n *notifier) handle(ps *pubsub, v any) {
	ev, ok := ps.event(v)
	if !ok {
		return
	}
	queue, ok := n.b.keys.queueOfChannel(ev.channel)
	if !ok {
		return
	}
	if ev.subscribed {
		n.wake(queue)
		return
	}
	kind, rest, _ := strings.Cut(ev.payload, " ")
	switch kind {
	case "n":
		if rest != n.b.origin {
			n.wake(queue)
		}
	case "d":
		us, origin, _ := strings.Cut(rest, " ")
		if origin == n.b.origin {
			return // local() has it already
		}
		if d, err := strconv.ParseInt(us, 10, 64); err == nil {
			n.setDue(queue, time.Now().Add(time.Duration(d)*time.Microsecond+dueMargin))
		}
	}
}
