// Package limitwake wakes a backend's own idle workers when a queue limit
// that held jobs back may let them go: a job of a concurrency-limited queue
// claimed through this backend ended, or a rate window ran out. Without it
// a worker that found its queue at the limit would wait for its next poll
// (a second by default) although a slot freed a millisecond later. Workers
// of other processes still find the freed slot by polling; a process that
// holds the queue's slots keeps them busy.
package limitwake

import (
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
)

// maxHeld bounds the refs remembered: refs whose end this backend never
// sees (a job completed in the caller's transaction, a lease lost) would
// otherwise pile up. Forgetting them costs only a wake-up.
const maxHeld = 100_000

// Tracker remembers which attempts this backend claimed from limited
// queues and wakes the queue when one ends. Create it with New; the zero
// value is not usable. Safe for concurrent use.
type Tracker struct {
	wake func(queue string)

	n      atomic.Int64 // len(held): the fast path of Ended reads only this
	mu     sync.Mutex
	held   map[backend.JobRef]string
	timers map[string]*time.Timer
	closed bool
}

// New returns a tracker that calls wake(queue) to wake the queue's local
// subscribers. wake must not block.
func New(wake func(queue string)) *Tracker {
	return &Tracker{wake: wake, held: map[backend.JobRef]string{}, timers: map[string]*time.Timer{}}
}

// Claimed records rows claimed from the limited queue.
func (t *Tracker) Claimed(queue string, rows []*backend.JobRow) {
	if len(rows) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held)+len(rows) > maxHeld {
		clear(t.held)
	}
	for _, r := range rows {
		t.held[r.Ref()] = queue
	}
	t.n.Store(int64(len(t.held)))
}

// Ended wakes the queues of the refs that were claimed from limited
// queues: their attempts ended (completed, retried, failed or released).
// It costs one atomic load when no such ref is held.
func (t *Tracker) Ended(refs []backend.JobRef) {
	if t.n.Load() == 0 {
		return
	}
	t.ended(func(yield func(backend.JobRef) bool) {
		for _, r := range refs {
			if !yield(r) {
				return
			}
		}
	})
}

// EndedOutcomes is Ended for a batch of outcomes.
func (t *Tracker) EndedOutcomes(outcomes []backend.Outcome) {
	if t.n.Load() == 0 {
		return
	}
	t.ended(func(yield func(backend.JobRef) bool) {
		for _, o := range outcomes {
			if !yield(o.Ref) {
				return
			}
		}
	})
}

// ended forgets the held refs among refs and wakes each of their queues
// once. Nothing is allocated unless one of them was held: it runs for
// every completed batch while any limited job is held.
func (t *Tracker) ended(refs iter.Seq[backend.JobRef]) {
	var queues []string
	t.mu.Lock()
	for ref := range refs {
		if q, ok := t.held[ref]; ok {
			delete(t.held, ref)
			if !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
	}
	t.n.Store(int64(len(t.held)))
	t.mu.Unlock()
	for _, q := range queues {
		t.wake(q)
	}
}

// WakeAt wakes queue at when (the start of its next rate window). One
// timer per queue: a later call moves it.
func (t *Tracker) WakeAt(queue string, when time.Time) {
	d := max(time.Until(when), 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if tm, ok := t.timers[queue]; ok {
		tm.Reset(d)
		return
	}
	t.timers[queue] = time.AfterFunc(d, func() {
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if !closed {
			t.wake(queue)
		}
	})
}

// Close stops the timers; later calls of WakeAt do nothing.
func (t *Tracker) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for q, tm := range t.timers {
		tm.Stop()
		delete(t.timers, q)
	}
	clear(t.held)
	t.n.Store(0)
}
