package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/redis/rueidis"
)

// pubsub is one subscriber connection: a connection of the client's pool
// of dedicated connections (of a node picked at random, on a cluster,
// where every node delivers every channel), on which rueidis opens a
// second one for the subscriptions, RESP2 keeping them apart from
// commands. rueidis does not re-establish a dedicated connection, so the
// pubsub does: after a failure it connects again, with backoff, and
// subscribes every channel again; each confirmation is an event.
type pubsub struct {
	c      *client
	ch     chan any
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	done   chan struct{} // the connection loop has ended

	mu       sync.Mutex
	channels map[string]struct{}     // subscribed, to subscribe again after a failure
	dc       rueidis.DedicatedClient // the connection; nil while there is none
	sent     map[string]struct{}     // the channels subscribed on dc: one confirmation each
}

// pubsubEvent is what a pubsub delivers: a message on a channel, or the
// confirmation that a channel is (again) subscribed.
type pubsubEvent struct {
	subscribed bool // a (re)subscription: messages sent before it are lost
	channel    string
	payload    string
}

// Backoff of the subscriber's reconnections.
const (
	pubsubMinBackoff = 100 * time.Millisecond
	pubsubMaxBackoff = 5 * time.Second
)

// newPubSub opens a subscriber; its connection is made in the background.
func (c *client) newPubSub() *pubsub {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pubsub{
		c: c, ch: make(chan any, 1024), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		channels: map[string]struct{}{},
	}
	go p.run()
	return p
}

// run keeps a connection subscribed to the channels until close.
func (p *pubsub) run() {
	defer close(p.done)
	defer close(p.ch)
	hooks := rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			p.deliver(pubsubEvent{channel: m.Channel, payload: m.Message})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" {
				p.deliver(pubsubEvent{subscribed: true, channel: s.Channel})
			}
		},
	}
	backoff := pubsubMinBackoff
	for p.ctx.Err() == nil {
		dc, release := p.c.subscriberConn()
		lost := dc.SetPubSubHooks(hooks)
		p.mu.Lock()
		p.dc = dc
		p.sent = make(map[string]struct{}, len(p.channels))
		channels := make([]string, 0, len(p.channels))
		for ch := range p.channels {
			channels = append(channels, ch)
			p.sent[ch] = struct{}{}
		}
		p.mu.Unlock()
		if len(channels) == 0 || dc.Do(p.ctx, dc.B().Subscribe().Channel(channels...).Build()).Error() == nil {
			backoff = pubsubMinBackoff
		}
		select {
		case <-lost:
		case <-p.ctx.Done():
		}
		p.mu.Lock()
		p.dc = nil
		p.mu.Unlock()
		dc.Close()
		release()
		for range lost {
			// The hooks are not called once it is closed.
		}
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, pubsubMaxBackoff)
		case <-p.ctx.Done():
		}
	}
}

// subscriberConn takes a dedicated connection (a dead one, failing every
// call, when none can be made).
func (c *client) subscriberConn() (rueidis.DedicatedClient, func()) {
	nodes := c.rdb.Nodes()
	if len(nodes) == 0 {
		return c.rdb.Dedicate()
	}
	i := rand.IntN(len(nodes))
	for _, n := range nodes {
		if i == 0 {
			return n.Dedicate()
		}
		i--
	}
	return c.rdb.Dedicate()
}

// deliver passes one event on, unless the pubsub is closed; like any
// subscriber, it stops reading the connection while events is full.
func (p *pubsub) deliver(ev pubsubEvent) {
	select {
	case p.ch <- ev:
	case <-p.ctx.Done():
	}
}

// subscribe adds channels; after a failure they are still resubscribed
// when the connection comes back.
func (p *pubsub) subscribe(ctx context.Context, channels ...string) error {
	p.mu.Lock()
	var send []string // not sent on dc by the connection loop already
	for _, ch := range channels {
		p.channels[ch] = struct{}{}
		if _, ok := p.sent[ch]; !ok && p.dc != nil {
			p.sent[ch] = struct{}{}
			send = append(send, ch)
		}
	}
	dc := p.dc
	p.mu.Unlock()
	if len(send) == 0 {
		return nil // the connection loop subscribes them
	}
	return p.send(ctx, dc, dc.B().Subscribe().Channel(send...).Build())
}

// unsubscribe drops channels.
func (p *pubsub) unsubscribe(ctx context.Context, channels ...string) error {
	p.mu.Lock()
	for _, ch := range channels {
		delete(p.channels, ch)
		delete(p.sent, ch)
	}
	dc := p.dc
	p.mu.Unlock()
	if dc == nil {
		return nil
	}
	return p.send(ctx, dc, dc.B().Unsubscribe().Channel(channels...).Build())
}

// send sends a (un)subscription on the connection dc.
func (p *pubsub) send(ctx context.Context, dc rueidis.DedicatedClient, cmd rueidis.Completed) error {
	err := dc.Do(ctx, cmd).Error()
	if errors.Is(err, rueidis.ErrDedicatedClientRecycled) {
		return nil // lost meanwhile: the connection loop subscribes again
	}
	if p.ctx.Err() != nil && err != nil {
		return fmt.Errorf("%w: subscriber closed: %w", backend.ErrClosed, err)
	}
	return p.c.classify(ctx, err)
}

// events delivers what the subscriber receives as raw values for event;
// it is closed once close has taken effect. It must be read until then.
func (p *pubsub) events() <-chan any { return p.ch }

// event reads one value of events.
func (p *pubsub) event(v any) (pubsubEvent, bool) {
	ev, ok := v.(pubsubEvent)
	return ev, ok
}

// close ends the subscriber and waits for its connection loop, so no
// goroutine of it is left.
func (p *pubsub) close() error {
	p.cancel()
	p.mu.Lock()
	dc := p.dc
	p.mu.Unlock()
	if dc != nil {
		dc.Close() // unblocks a subscription in flight
	}
	<-p.done
	return nil
}
