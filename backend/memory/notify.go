package memory

// subscriber is one Subscribe call: the queues it watches and its coalesced
// channel.
type subscriber struct {
	queues map[string]bool
	ch     chan struct{}
}

// Subscribe implements backend.Notifier: ch receives a value soon after a
// job in one of queues is inserted or becomes claimable again (retry with no
// delay, release, rescue by the sweep, replay). Wake-ups coalesce in a
// buffer of one and never block the backend. cancel is idempotent; after
// Close the channel is simply never woken.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	s := &subscriber{queues: make(map[string]bool, len(queues)), ch: make(chan struct{}, 1)}
	for _, q := range queues {
		s.queues[q] = true
	}
	b.mu.Lock()
	b.lastSub++
	id := b.lastSub
	b.subs[id] = s
	b.mu.Unlock()
	cancel := func() {
		b.mu.Lock()
		delete(b.subs, id)
		b.mu.Unlock()
	}
	return s.ch, cancel
}

// wake signals every subscriber of any of queues. Called with b.mu held;
// the sends never block.
func (b *Backend) wake(queues map[string]bool) {
	if len(queues) == 0 {
		return
	}
	for _, s := range b.subs {
		for q := range queues {
			if s.queues[q] {
				select {
				case s.ch <- struct{}{}:
				default:
				}
				break
			}
		}
	}
}

// wakeOne signals the subscribers of one queue. Called with b.mu held.
func (b *Backend) wakeOne(queue string) {
	b.wake(map[string]bool{queue: true})
}
