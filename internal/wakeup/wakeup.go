// Package wakeup fans a backend's "jobs may be claimable in these queues"
// hints out to the idle workers of this process that watch them
// (backend.Notifier). A hint is only worth a look, so each subscription
// keeps at most one pending: a burst of inserts wakes a worker once, and
// the backend that sends never waits for a worker that is busy.
package wakeup

import "sync"

// Set holds the subscriptions of one backend. The zero value is an empty
// set, ready to use; it must not be copied after first use. Safe for
// concurrent use. Its methods never call out with its lock held, so a
// backend may wake under a lock of its own (Watch aside, which runs after
// the set's lock is released).
type Set struct {
	// Watch, when set, hears of the queues that got their first
	// subscription (watched true) or lost their last (false), so a
	// backend can listen only for the hints of queues someone watches.
	// It runs in the Subscribe or cancel call that changed them, outside
	// the set's lock; it must not call Subscribe or cancel. Close does not
	// call it. Set it before the first Subscribe.
	Watch func(queues []string, watched bool)

	mu      sync.Mutex
	byQueue map[string]map[*sub]struct{} // a queue with no subscription has no entry
	closed  bool
}

// sub is one Subscribe call.
type sub struct {
	queues    []string // distinct
	ch        chan struct{}
	cancelled bool
}

// Subscribe returns a channel that receives a value after Wake of any of
// queues, or WakeAll. The buffer of one coalesces wake-ups, so the waker
// never blocks. An empty queues list watches nothing, as
// backend.Notifier's contract reads ("in any of queues"). cancel stops
// the subscription and is idempotent; after Close, Subscribe returns a
// channel that is never woken.
func (s *Set) Subscribe(queues []string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	if len(queues) == 0 {
		return ch, func() {}
	}
	x := &sub{ch: ch, queues: make([]string, 0, len(queues))}
	var added []string
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ch, func() {}
	}
	if s.byQueue == nil {
		s.byQueue = map[string]map[*sub]struct{}{}
	}
	for _, q := range queues {
		subs, ok := s.byQueue[q]
		if !ok {
			subs = map[*sub]struct{}{}
			s.byQueue[q] = subs
			added = append(added, q)
		} else if _, dup := subs[x]; dup {
			continue
		}
		subs[x] = struct{}{}
		x.queues = append(x.queues, q)
	}
	watch := s.Watch
	s.mu.Unlock()
	if watch != nil && len(added) > 0 {
		watch(added, true)
	}
	return ch, func() { s.cancel(x) }
}

// cancel drops x, once; after Close there is nothing left to drop.
func (s *Set) cancel(x *sub) {
	var dropped []string
	s.mu.Lock()
	if s.closed || x.cancelled {
		s.mu.Unlock()
		return
	}
	x.cancelled = true
	for _, q := range x.queues {
		subs := s.byQueue[q]
		delete(subs, x)
		if len(subs) == 0 {
			delete(s.byQueue, q)
			dropped = append(dropped, q)
		}
	}
	watch := s.Watch
	s.mu.Unlock()
	if watch != nil && len(dropped) > 0 {
		watch(dropped, false)
	}
}

// Wake wakes the subscriptions watching any of queues. It never blocks.
func (s *Set) Wake(queues ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range queues {
		for x := range s.byQueue[q] {
			x.wake()
		}
	}
}

// WakeAll wakes every subscription: for when hints may have been lost,
// after a listening connection was re-established, say.
func (s *Set) WakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, subs := range s.byQueue {
		for x := range subs {
			x.wake()
		}
	}
}

// Watched reports whether any subscription watches queue, so a backend
// need not prepare a wake-up (a timer, say) that would wake no one.
func (s *Set) Watched(queue string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byQueue[queue]) > 0
}

// Close drops every subscription: their channels are never woken again
// and cancelling them does nothing. Later Subscribe calls get a channel
// that is never woken. Idempotent.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.byQueue = nil
}

// wake sends without blocking: a wake-up already pending stands for this
// one too.
func (x *sub) wake() {
	select {
	case x.ch <- struct{}{}:
	default:
	}
}
