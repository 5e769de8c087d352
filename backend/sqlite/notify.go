package sqlite

import "github.com/jobq/jobq/internal/wakeup"

// hub wakes in-process subscribers after commits that make jobs claimable.
// Other processes sharing the file are not told; their workers poll.
type hub struct {
	subs wakeup.Set
}

// Subscribe implements backend.Notifier. An empty queues list watches no
// queue. The channel has a buffer of one, so wake-ups coalesce and the
// committing caller never blocks.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	return b.hub.subs.Subscribe(queues)
}

// notify wakes every subscriber of any of queues. It never blocks.
func (h *hub) notify(queues map[string]struct{}) {
	for q := range queues {
		h.subs.Wake(q)
	}
}
