package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
)

// Item is one write for the Completer: the outcome of an attempt, or (when
// Release is set) giving the job back untouched. Queue and Type name the
// job for the stale callback.
type Item struct {
	Outcome backend.Outcome
	Release bool
	Queue   string
	Type    string
	// The attempt as its worker reports it once written (see
	// Completer.OnWritten): the worker's job (a *jobq.Job, which this
	// package cannot name), the handler's error and how long it ran.
	Job  any
	Err  error
	Took time.Duration
	// Resent is set once the item went out again after a failed send:
	// that send's reply may have been lost after the backend applied it,
	// so if the fence now refuses the item, it was refused or applied by
	// the earlier send, which nobody can tell any more.
	Resent bool
}

// Completer writes outcomes back in batches: under load each write carries
// everything that queued up while the previous one ran, so the backend sees
// few large transactions instead of one per job. Its buffer is bounded, so a
// slow or unreachable backend makes Submit block (and, through the worker's
// slots, stops claiming) instead of growing memory.
//
// When several outcomes are already waiting (the worker is busy) but not a
// full batch, it lingers briefly for more before writing. Each write costs
// the database a transaction whatever its size, so fewer, larger writes
// leave more of the server to enqueuers and claims: on the Postgres steady
// benchmark, lingering 5 ms made writes far larger (docs/performance.md,
// "Why the code is shaped this way"). A lone outcome (an idle worker) is
// written at once. The jobs' slots are freed before their outcomes are
// written, so lingering never holds up work.
//
// No outcome can hold back the others: a batch the backend refuses (as
// invalid input at once, or with any error but unavailability a few times
// running) is split in halves until the outcome it refuses is alone; that
// one is written again with a plain error text, and if that is refused too
// it is dropped and logged (its job stays reserved until the lease sweep
// returns it). Only an unavailable backend is waited out, for as long as
// Run's context lasts.
type Completer struct {
	b        backend.Backend
	maxBatch int
	linger   time.Duration
	log      *slog.Logger
	onStale  func([]Item)
	onCancel func([]Item)
	onWrite  func([]Item)
	in       chan Item

	// Submit holds mu shared while it sends; Close takes it exclusively to
	// mark the completer closed, so no send can race the channel's close.
	// quit is closed first, to free Submits blocked on a full buffer.
	mu        sync.RWMutex
	closed    bool
	quit      chan struct{}
	closeOnce sync.Once

	// Run's own, reused from batch to batch: every job's outcome passes
	// through them, and making them afresh for each batch was a large share
	// of what a no-op job allocated on SQLite, garbage the collector paid
	// for (docs/performance.md).
	outcomes, releases []Item
	sent               []backend.Outcome
}

// Tries of a write refused with an error other than unavailability before
// the batch is split.
const refusedTries = 3

// NewCompleter returns a completer with room for buffer pending items,
// writing at most maxBatch per call and lingering up to linger (0: never)
// to fill a batch. onStale (may be nil) hears of outcomes the lease fence
// refused.
func NewCompleter(b backend.Backend, buffer, maxBatch int, linger time.Duration, log *slog.Logger, onStale func([]Item)) *Completer {
	return &Completer{
		b: b, maxBatch: maxBatch, linger: linger, log: log, onStale: onStale,
		in: make(chan Item, buffer), quit: make(chan struct{}),
	}
}

// OnWritten sets the callback (before Run) that hears of the outcomes
// and releases the backend applied: not those the fence refused (the
// stale callback hears of them), nor those that ended their job cancelled
// instead (the cancelled callback), nor any never written.
func (c *Completer) OnWritten(fn func([]Item)) { c.onWrite = fn }

// OnCancelled sets the callback (before Run) that hears of outcomes that
// ended their jobs cancelled (backend.CompleteResult.Cancelled).
func (c *Completer) OnCancelled(fn func([]Item)) { c.onCancel = fn }

// Submit queues an item, blocking while the buffer is full. It reports
// false, queueing nothing, once Close was called: a handler that outlived
// the worker's shutdown must not write (or panic on a closed channel); its
// caller logs the dropped result.
func (c *Completer) Submit(it Item) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	select {
	case c.in <- it:
		return true
	case <-c.quit:
		return false
	}
}

// Close says no more items will be accepted; Run then flushes what is
// queued and returns. Submits blocked on a full buffer return false. It is
// safe to call more than once and concurrently with Submit.
func (c *Completer) Close() {
	c.closeOnce.Do(func() {
		close(c.quit)
		c.mu.Lock()
		c.closed = true
		close(c.in)
		c.mu.Unlock()
	})
}

// Run writes batches until Close and the buffer is empty. ctx bounds the
// writes: cancelling it abandons what is unwritten (those jobs stay reserved
// and the lease sweep returns them), so the worker cancels it only past its
// shutdown deadline.
func (c *Completer) Run(ctx context.Context) {
	batch := make([]Item, 0, c.maxBatch)
	for {
		var it Item
		select {
		case <-ctx.Done():
			if n := len(c.in); n > 0 {
				c.log.Error("abandon job outcomes: the jobs stay reserved until their lease expires", "jobs", n)
			}
			return
		case next, ok := <-c.in:
			if !ok {
				return
			}
			it = next
		}
		batch = append(batch[:0], it)
		open := c.fill(&batch, nil)
		if open && c.linger > 0 && len(batch) >= 2 && len(batch) < c.maxBatch {
			timer := time.NewTimer(c.linger)
			c.fill(&batch, timer.C)
			timer.Stop()
		}
		c.write(ctx, batch)
	}
}

// fill appends waiting items to batch until it is full, until no item is
// waiting (until == nil) or until fires, or until Close. It reports whether
// more items may still come.
func (c *Completer) fill(batch *[]Item, until <-chan time.Time) bool {
	for len(*batch) < c.maxBatch {
		var more Item
		var ok bool
		if until == nil {
			select {
			case more, ok = <-c.in:
			default:
				return true
			}
		} else {
			select {
			case more, ok = <-c.in:
			case <-until:
				return true
			}
		}
		if !ok {
			return false
		}
		*batch = append(*batch, more)
	}
	return true
}

// write applies one batch: the outcomes, then the releases, each retried
// on its own so that a failed release never sends the written outcomes
// again.
func (c *Completer) write(ctx context.Context, batch []Item) {
	outcomes, releases := c.outcomes[:0], c.releases[:0]
	for _, it := range batch {
		if it.Release {
			releases = append(releases, it)
		} else {
			outcomes = append(outcomes, it)
		}
	}
	c.outcomes, c.releases = outcomes, releases
	if len(outcomes) > 0 {
		c.writeSplitting(ctx, "write job outcomes", outcomes, c.completeOnce)
	}
	if len(releases) > 0 {
		c.writeSplitting(ctx, "release jobs", releases, c.releaseOnce)
	}
}

// writeSplitting runs once over items until it succeeds: it waits out an
// unavailable backend (with backoff, until ctx ends) and splits a batch
// the backend refuses, so one bad item is isolated and the rest written.
func (c *Completer) writeSplitting(ctx context.Context, op string, items []Item, once func(context.Context, []Item) error) {
	backoff := 50 * time.Millisecond
	for tries := 1; ; tries++ {
		err := once(ctx, items)
		if err == nil {
			return
		}
		// Whatever failed, the backend may have applied the write and
		// lost only its reply; what the next send finds stale may be
		// that write's own work.
		for i := range items {
			items[i].Resent = true
		}
		if ctx.Err() != nil || errors.Is(err, backend.ErrClosed) {
			c.log.Error(op+": abandoned; the jobs stay reserved until their lease expires",
				"jobs", len(items), "err", err)
			return
		}
		refused := errors.Is(err, backend.ErrInvalidInput) ||
			(!errors.Is(err, backend.ErrUnavailable) && tries >= refusedTries)
		if refused {
			if len(items) > 1 {
				mid := len(items) / 2
				c.writeSplitting(ctx, op, items[:mid], once)
				c.writeSplitting(ctx, op, items[mid:], once)
				return
			}
			c.writeAlone(ctx, op, items[0], err, once)
			return
		}
		c.log.Warn(op+", will retry", "jobs", len(items), "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, 5*time.Second)
	}
}

// writeAlone records an item the backend refused on its own as well as it
// can: an outcome once more with a plain error text and no delay, and
// failing that, nothing. Either way it is logged; an unwritten job stays
// reserved until the lease sweep returns it.
func (c *Completer) writeAlone(ctx context.Context, op string, it Item, refusal error, once func(context.Context, []Item) error) {
	ref := it.Outcome.Ref
	if !it.Release && it.Outcome.Kind != 0 {
		plain := it
		plain.Outcome.Error = "the attempt's error could not be stored: " + backend.ErrorText(refusal.Error())
		plain.Outcome.RetryDelay = max(0, plain.Outcome.RetryDelay)
		plain.Outcome.Duration = max(0, plain.Outcome.Duration)
		if err := once(ctx, []Item{plain}); err == nil {
			c.log.Error(op+": the backend refused this outcome; wrote it with a plain error text",
				"job_id", ref.ID, "attempt", ref.Attempt, "outcome", it.Outcome.Kind, "err", refusal)
			return
		}
	}
	c.log.Error(op+": the backend refused this item; dropped it, the job returns when its lease expires",
		"job_id", ref.ID, "attempt", ref.Attempt, "err", refusal)
}

func (c *Completer) completeOnce(ctx context.Context, items []Item) error {
	unfenceItems(ctx, c.b, items)
	outcomes := c.sent[:0]
	for _, it := range items {
		outcomes = append(outcomes, it.Outcome)
	}
	c.sent = outcomes
	res, err := c.b.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
	if err != nil {
		return err
	}
	c.report(items, res)
	return nil
}

// report tells the hooks what became of items, written as res says: the
// stale ones were refused, the cancelled ones ended cancelled, the others
// applied.
func (c *Completer) report(items []Item, res backend.CompleteResult) {
	if len(res.Stale) > 0 && c.onStale != nil {
		c.onStale(staleItems(items, res.Stale))
	}
	if len(res.Cancelled) > 0 && c.onCancel != nil {
		c.onCancel(staleItems(items, res.Cancelled))
	}
	if c.onWrite != nil {
		c.onWrite(appliedItems(items, res))
	}
}

// appliedItems is items but those res says the backend refused (stale) or
// ended cancelled instead; items itself when there are none (the usual
// case, without a copy).
func appliedItems(items []Item, res backend.CompleteResult) []Item {
	if len(res.Stale) == 0 && len(res.Cancelled) == 0 {
		return items
	}
	return pickItems(items, false, res.Stale, res.Cancelled)
}

func (c *Completer) releaseOnce(ctx context.Context, items []Item) error {
	unfenceItems(ctx, c.b, items)
	refs := make([]backend.JobRef, len(items))
	for i, it := range items {
		refs[i] = it.Outcome.Ref
	}
	res, err := c.b.JobRelease(ctx, refs)
	if err != nil {
		return err
	}
	c.report(items, res)
	return nil
}

// staleItems picks the items whose refs the fence refused.
func staleItems(items []Item, stale []backend.JobRef) []Item { return pickItems(items, true, stale) }

// pickItems picks the items whose refs are among refs (in) or not (!in).
func pickItems(items []Item, in bool, refs ...[]backend.JobRef) []Item {
	named := map[backend.JobRef]bool{}
	for _, rs := range refs {
		for _, r := range rs {
			named[r] = true
		}
	}
	var out []Item
	for _, it := range items {
		if named[it.Outcome.Ref] == in {
			out = append(out, it)
		}
	}
	return out
}
