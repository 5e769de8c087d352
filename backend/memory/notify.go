package memory

import "github.com/jobq/jobq/backend"

// Subscribe implements backend.Notifier: ch receives a value soon after a
// job in one of queues is inserted or becomes claimable again (retry with no
// delay, release, rescue by the sweep, replay). Wake-ups coalesce in a
// buffer of one and never block the backend. cancel is idempotent; after
// Close the channel is simply never woken.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	return b.subs.Subscribe(queues)
}

// wake signals every subscriber of any of queues. Called with b.mu held:
// the set takes its own lock after b.mu and never calls back.
func (b *Backend) wake(queues map[string]bool) {
	for q := range queues {
		b.subs.Wake(q)
	}
}

// wakeOne signals the subscribers of one queue. Called with b.mu held.
func (b *Backend) wakeOne(queue string) {
	b.subs.Wake(queue)
}

// SubscribeFinished implements backend.FinishNotifier: ch receives a
// value after a call that finished jobs (completed, failed, cancelled).
func (b *Backend) SubscribeFinished() (<-chan struct{}, func()) {
	return b.subs.Subscribe([]string{backend.FinishedTopic})
}

// wakeFinished signals the subscribers of finished jobs. Called with b.mu
// held, like wake.
func (b *Backend) wakeFinished() {
	b.subs.Wake(backend.FinishedTopic)
}
