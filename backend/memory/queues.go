package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// control is one paused or limited queue's settings and its rate count.
type control struct {
	paused bool
	limits backend.QueueLimits
	keys   backend.KeyRules
	window int64 // the rate window counted in
	count  int64 // claims counted in it
}

// allowance is what one claim may still take from a limited queue.
type allowance struct {
	name   string
	c      *control
	left   int   // jobs the claim may still take
	window int64 // the rate window of the claim
	next   time.Time
	taken  int64
}

func (a *allowance) take() { a.left--; a.taken++ }

// allowance returns what a claim of want may take from queue q now: nil
// when the queue is not limited; skip when it is paused. Called with b.mu
// held, which serializes claims, so no two see the same free slot.
func (b *Backend) allowance(name string, q *queue, want int, now time.Time) (a *allowance, skip bool) {
	c, ok := b.control[name]
	if !ok {
		return nil, false
	}
	if c.paused {
		return nil, true
	}
	if c.limits.IsZero() {
		return nil, false
	}
	a = &allowance{name: name, c: c}
	var used int64
	if c.limits.Rate > 0 {
		a.window, a.next = backend.RateWindow(now, c.limits.RatePeriod)
		if c.window == a.window {
			used = c.count
		}
	}
	a.left = c.limits.Allowance(want, int64(q.reserved), used)
	return a, false
}

// limitsClaimed records a claim's takings from limited queues. Called with
// b.mu held.
func (b *Backend) limitsClaimed(allow []*allowance) {
	for _, a := range allow {
		if a == nil || a.c.limits.Rate == 0 {
			continue
		}
		if a.c.window != a.window {
			a.c.window, a.c.count = a.window, 0
		}
		a.c.count += a.taken
		if a.c.count >= int64(a.c.limits.Rate) {
			b.limits.WakeAt(a.name, a.next)
		}
	}
}

// slotFreed wakes the subscribers of a concurrency-limited queue whose
// reserved job ended, since a waiting job may now go. Called with b.mu
// held.
func (b *Backend) slotFreed(queue string) {
	if c, ok := b.control[queue]; ok && c.limits.Concurrency > 0 {
		b.wakeOne(queue)
	}
}

// QueuePause implements backend.QueueController; resuming wakes the
// queue's subscribers.
func (b *Backend) QueuePause(ctx context.Context, queue string, paused bool) error {
	op := "pause queue " + queue
	if !paused {
		op = "resume queue " + queue
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return err
	}
	defer b.mu.Unlock()
	b.controlOf(queue).paused = paused
	b.pruneControl(queue)
	if !paused {
		b.wakeOne(queue)
	}
	return nil
}

// QueueSetLimits implements backend.QueueController.
func (b *Backend) QueueSetLimits(ctx context.Context, queue string, limits backend.QueueLimits) error {
	op := "set limits of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateQueueLimits(limits); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return err
	}
	defer b.mu.Unlock()
	c := b.controlOf(queue)
	c.limits, c.window, c.count = limits, 0, 0
	b.pruneControl(queue)
	b.wakeOne(queue)
	return nil
}

// QueueSettingsList implements backend.QueueController.
func (b *Backend) QueueSettingsList(ctx context.Context) ([]backend.QueueSettings, error) {
	if err := b.lock(ctx, "list queue settings"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []backend.QueueSettings
	for name, c := range b.control {
		out = append(out, backend.QueueSettings{Queue: name, Paused: c.paused, QueueLimits: c.limits, Keys: c.keys})
	}
	slices.SortFunc(out, func(x, y backend.QueueSettings) int { return strings.Compare(x.Queue, y.Queue) })
	return out, nil
}

func (b *Backend) controlOf(queue string) *control {
	c, ok := b.control[queue]
	if !ok {
		c = &control{}
		b.control[queue] = c
	}
	return c
}

// pruneControl forgets a queue that neither pauses, limits nor has key
// rules.
func (b *Backend) pruneControl(queue string) {
	if c := b.control[queue]; c != nil && !c.paused && c.limits.IsZero() && c.keys.IsZero() {
		delete(b.control, queue)
	}
}
