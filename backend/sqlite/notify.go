package sqlite

import "sync"

// hub wakes in-process subscribers after commits that make jobs claimable.
// Other processes sharing the file are not told; their workers poll.
type hub struct {
	mu   sync.Mutex
	subs map[*subscription]struct{}
}

type subscription struct {
	queues map[string]struct{} // nil: every queue
	ch     chan struct{}
}

// Subscribe implements backend.Notifier. An empty queues list subscribes to
// every queue. The channel has a buffer of one, so wake-ups coalesce and the
// committing caller never blocks.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	return b.hub.subscribe(queues)
}

func (h *hub) subscribe(queues []string) (<-chan struct{}, func()) {
	s := &subscription{ch: make(chan struct{}, 1)}
	if len(queues) > 0 {
		s.queues = make(map[string]struct{}, len(queues))
		for _, q := range queues {
			s.queues[q] = struct{}{}
		}
	}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[*subscription]struct{})
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
		})
	}
}

// notify wakes every subscriber of any of queues. It never blocks.
func (h *hub) notify(queues map[string]struct{}) {
	if len(queues) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.wants(queues) {
			continue
		}
		select {
		case s.ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (s *subscription) wants(queues map[string]struct{}) bool {
	if s.queues == nil {
		return true
	}
	for q := range queues {
		if _, ok := s.queues[q]; ok {
			return true
		}
	}
	return false
}
