package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq/backend"
)

// Item is one write for the Completer: the outcome of an attempt, or (when
// Release is set) giving the job back untouched.
type Item struct {
	Outcome backend.Outcome
	Release bool
}

// Completer writes outcomes back in batches: under load each write carries
// everything that queued up while the previous one ran, so the backend sees
// few large transactions instead of one per job. Its buffer is bounded, so a
// slow or unreachable backend makes Submit block (and, through the worker's
// slots, stops claiming) instead of growing memory.
type Completer struct {
	b        backend.Backend
	maxBatch int
	log      *slog.Logger
	onStale  func(refs []backend.JobRef)
	in       chan Item
}

// NewCompleter returns a completer with room for buffer pending items,
// writing at most maxBatch per call. onStale (may be nil) hears of outcomes
// the lease fence refused.
func NewCompleter(b backend.Backend, buffer, maxBatch int, log *slog.Logger, onStale func([]backend.JobRef)) *Completer {
	return &Completer{b: b, maxBatch: maxBatch, log: log, onStale: onStale, in: make(chan Item, buffer)}
}

// Submit queues an item, blocking while the buffer is full.
func (c *Completer) Submit(it Item) { c.in <- it }

// Close says no more items will be submitted; Run then flushes what is
// queued and returns. Call it once, after the last Submit.
func (c *Completer) Close() { close(c.in) }

// Run writes batches until Close and the buffer is empty. ctx bounds the
// writes: cancelling it abandons what is unwritten (those jobs stay reserved
// and the lease sweep returns them), so the worker cancels it only past its
// shutdown deadline.
func (c *Completer) Run(ctx context.Context) {
	batch := make([]Item, 0, c.maxBatch)
	for it := range c.in {
		batch = append(batch[:0], it)
	fill:
		for len(batch) < c.maxBatch {
			select {
			case more, ok := <-c.in:
				if !ok {
					break fill
				}
				batch = append(batch, more)
			default:
				break fill
			}
		}
		c.write(ctx, batch)
	}
}

// write applies one batch, retrying with backoff while the backend fails,
// until it succeeds or ctx ends.
func (c *Completer) write(ctx context.Context, batch []Item) {
	var outcomes []backend.Outcome
	var releases []backend.JobRef
	for _, it := range batch {
		if it.Release {
			releases = append(releases, it.Outcome.Ref)
		} else {
			outcomes = append(outcomes, it.Outcome)
		}
	}
	backoff := 50 * time.Millisecond
	for {
		err := c.writeOnce(ctx, outcomes, releases)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			c.log.Error("abandon job outcomes: jobs stay reserved until their lease expires",
				"jobs", len(batch), "err", err)
			return
		}
		c.log.Warn("write job outcomes, will retry", "jobs", len(batch), "in", backoff, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (c *Completer) writeOnce(ctx context.Context, outcomes []backend.Outcome, releases []backend.JobRef) error {
	if len(outcomes) > 0 {
		res, err := c.b.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
		if err != nil {
			return err
		}
		outcomes = outcomes[:0]
		if len(res.Stale) > 0 && c.onStale != nil {
			c.onStale(res.Stale)
		}
	}
	if len(releases) > 0 {
		if _, err := c.b.JobRelease(ctx, releases); err != nil {
			return err
		}
	}
	return nil
}
