package redis

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
)

// SubscribeFinished implements backend.FinishNotifier on the notifier's
// subscriber connection: backend.FinishedTopic is filed as a queue, so
// its channel is "prefix:{!finished}:w", a name no queue's can take. The
// calls that finished jobs wake this Backend's subscribers at once and
// PUBLISH "n <origin>" there through a finishSender, at most one every
// finishedPublishInterval.
func (b *Backend) SubscribeFinished() (<-chan struct{}, func()) {
	return b.notifier.subscribe([]string{backend.FinishedTopic})
}

// finishedPublishInterval spaces the PUBLISHes of finished-jobs hints: a
// draining worker finishes jobs in every completion call, and one round
// trip each would cost the drain; a waiter in another process hears of
// its job at most this much later (as on Postgres).
const finishedPublishInterval = 10 * time.Millisecond

// finishSender publishes the finished-jobs hints of this Backend's calls,
// coalesced: a hint asked for while one is spaced out goes out when the
// interval ends, so the last call of a burst is always told. Its loop runs
// in the Backend's lifecycle group from the first hint until Close. A
// hint that fails to go out is dropped: waiters poll.
type finishSender struct {
	b *Backend

	mu      sync.Mutex
	running bool
	stopped bool
	kick    chan struct{}
}

func newFinishSender(b *Backend) *finishSender {
	return &finishSender{b: b, kick: make(chan struct{}, 1)}
}

// finished tells this process's waiters at once and the others through
// the sender. It never blocks.
func (b *Backend) finished() {
	b.notifier.wake(backend.FinishedTopic)
	s := b.finish
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if !s.running {
		// The sender lives as long as the Backend, not any caller.
		s.running = b.background.Start(context.Background(), lifecycle.Component{Name: "redis finished sender", Run: s.run})
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stop keeps the loop from starting; Close calls it before stopping the
// lifecycle group, which ends a running loop. Idempotent.
func (s *finishSender) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
}

func (s *finishSender) run(ctx context.Context) {
	channel := s.b.keys.queue(backend.FinishedTopic).channel
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		cmd := s.b.c.rdb.B().Publish().Channel(channel).Message("n " + s.b.origin).Build()
		if err := s.b.c.do(ctx, cmd).Error(); err != nil && ctx.Err() == nil {
			s.b.opts.Logger.Debug("jobq redis: finished-jobs hint not sent; waiters will poll",
				"key_prefix", s.b.opts.KeyPrefix, "err", s.b.fail("publish", err))
		}
		timer := time.NewTimer(finishedPublishInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
