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

// subscription is one Subscribe call.
type subscription struct {
	queues map[string]bool
	ch     chan struct{}
}

// wake sends without blocking: the buffer of one coalesces wake-ups.
func (s *subscription) wake() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// notifier owns the subscriber connection, the subscriptions and the
// timers of delayed jobs.
type notifier struct {
	b *Backend

	mu      sync.Mutex
	subs    map[*subscription]struct{}
	refs    map[string]int       // subscribed queue -> subscriptions naming it
	due     map[string]time.Time // subscribed queue -> when to wake it
	ps      *pubsub
	running bool
	stopped bool
	kick    chan struct{} // the due times changed
}

func newNotifier(b *Backend) *notifier {
	return &notifier{
		b: b, subs: map[*subscription]struct{}{}, refs: map[string]int{},
		due: map[string]time.Time{}, kick: make(chan struct{}, 1),
	}
}

func (n *notifier) subscribe(queues []string) (<-chan struct{}, func()) {
	s := &subscription{queues: make(map[string]bool, len(queues)), ch: make(chan struct{}, 1)}
	for _, q := range queues {
		s.queues[q] = true
	}
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return s.ch, func() {}
	}
	n.subs[s] = struct{}{}
	var added []string
	for q := range s.queues {
		if n.refs[q]++; n.refs[q] == 1 {
			added = append(added, n.b.keys.queue(q).channel)
		}
	}
	if !n.running {
		n.ps = n.b.c.newPubSub()
		// The loop lives as long as the Backend, not any caller.
		n.running = n.b.background.Start(context.Background(), lifecycle.Component{Name: "redis notifier", Run: n.run})
		if !n.running {
			_ = n.ps.close()
		}
	}
	ps := n.ps
	n.mu.Unlock()
	if len(added) > 0 {
		n.listen(ps, added)
	}
	var once sync.Once
	return s.ch, func() { once.Do(func() { n.unsubscribe(s) }) }
}

// listen subscribes the connection to channels. On failure the pubsub
// still subscribes them when it reconnects; until then workers poll.
func (n *notifier) listen(ps *pubsub, channels []string) {
	if err := ps.subscribe(context.Background(), channels...); err != nil && !errors.Is(err, backend.ErrClosed) {
		n.b.opts.Logger.Warn("jobq redis notifier: subscribe failed, workers poll until the connection is back",
			"key_prefix", n.b.opts.KeyPrefix, "err", n.b.fail("subscribe", err))
	}
}

func (n *notifier) unsubscribe(s *subscription) {
	n.mu.Lock()
	if _, ok := n.subs[s]; !ok {
		n.mu.Unlock()
		return
	}
	delete(n.subs, s)
	var dropped []string
	for q := range s.queues {
		if n.refs[q]--; n.refs[q] == 0 {
			delete(n.refs, q)
			delete(n.due, q)
			dropped = append(dropped, n.b.keys.queue(q).channel)
		}
	}
	ps := n.ps
	n.mu.Unlock()
	if len(dropped) > 0 && ps != nil {
		_ = ps.unsubscribe(context.Background(), dropped...) // an extra message is harmless
	}
}

// stop drops every subscriber and keeps the loop from starting; Close
// calls it before stopping the lifecycle group, which ends a running loop.
func (n *notifier) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	n.subs = map[*subscription]struct{}{}
	n.refs = map[string]int{}
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
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs {
		if s.queues[queue] {
			s.wake()
		}
	}
}

// setDue arms a wake-up of queue at t (local clock), unless an earlier
// one is armed; for queues nobody here subscribes to it does nothing.
func (n *notifier) setDue(queue string, t time.Time) {
	n.mu.Lock()
	if n.refs[queue] == 0 {
		n.mu.Unlock()
		return
	}
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
			for s := range n.subs {
				if s.queues[q] {
					s.wake()
				}
			}
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
