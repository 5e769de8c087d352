package runner

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq/backend"
)

// Claimer reserves jobs into the worker's free slots and hands each to
// dispatch. It claims when woken (a backend notification), on every poll
// (see pollWait), and straight away again while claims come back full, so a backlog
// drains without waiting for ticks. When the backlog is known but few slots
// are free it waits briefly (cooldown) for more, so that claims stay large
// instead of one job per transaction. Likewise, when a claim comes back
// with several jobs but short of full (jobs arrive about as fast as they
// are claimed), it waits the cooldown before claiming again, so the next
// claim carries what arrived meanwhile instead of each claim taking a few:
// on the Postgres steady benchmark claims grew larger and, with the
// completer's linger, throughput rose (docs/performance.md). A claim that
// finds one job (a quiet queue) is followed at once by the next wake-up, so
// pickup latency is unchanged.
//
// A full claim of jobs none of which this worker can run (Runnable: types
// it has no handler for, which it gives back untouched) is no backlog it
// can work: the claimer then waits for the next tick or wake-up rather
// than claim again at once. Otherwise a worker without a type's handler
// spins through a queue of such jobs ahead of the workers that have it;
// on SQLite, whose writers in other processes wait their turn in a busy
// handler's sleeps, it took nearly every job each time they came due.
//
// A claim in flight when ctx ends is seen through: it runs under a context
// of its own, bounded by the lease, and the jobs it brings are dispatched
// like any other (the worker's shutdown then waits for them). Cutting it
// short could lose the reply to a claim the server committed, leaving the
// jobs reserved with an attempt counted that never ran, and a job with one
// attempt in failed_jobs without ever having run.
type Claimer struct {
	b        backend.Backend
	queues   []string
	batch    int
	lease    time.Duration
	poll     time.Duration
	cooldown time.Duration
	log      *slog.Logger
	dispatch func(Claimed)
	runnable func(*backend.JobRow) bool
	slots    chan struct{}
	wake     <-chan struct{}
}

// ClaimerConfig configures a Claimer.
type ClaimerConfig struct {
	Queues      []string
	Concurrency int           // slots
	Batch       int           // most jobs per claim
	Lease       time.Duration // lease given to claimed jobs
	Poll        time.Duration // claim at least this often when idle
	Cooldown    time.Duration // wait this long at most for half a batch of slots while a backlog is known
	Wake        <-chan struct{}
	Log         *slog.Logger
	// Dispatch runs a claimed job; it must arrange for Done to be called
	// when the job's slot is free again. It must not block for long.
	Dispatch func(Claimed)
	// Runnable tells whether the worker can run a claimed job (has its
	// type's handler); nil: every job. See Claimer for why it matters.
	Runnable func(*backend.JobRow) bool
}

// Claimed is one job a claim brought.
type Claimed struct {
	Row *backend.JobRow
	// LeaseDeadline is when the lease runs out unless extended, by this
	// process's monotonic clock: the claim's start plus the lease, never
	// later than the backend's own lease_until.
	LeaseDeadline time.Time
}

// NewClaimer returns a claimer with every slot free.
func NewClaimer(b backend.Backend, cfg ClaimerConfig) *Claimer {
	c := &Claimer{
		b: b, queues: cfg.Queues, batch: cfg.Batch, lease: cfg.Lease, poll: cfg.Poll,
		cooldown: cfg.Cooldown, log: cfg.Log, dispatch: cfg.Dispatch, wake: cfg.Wake,
		runnable: cfg.Runnable, slots: make(chan struct{}, cfg.Concurrency),
	}
	for range cfg.Concurrency {
		c.slots <- struct{}{}
	}
	return c
}

// SetWake sets the channel whose values wake an idle claimer (a backend's
// notifications); call it before Run.
func (c *Claimer) SetWake(ch <-chan struct{}) { c.wake = ch }

// Done frees the slot of a finished job.
func (c *Claimer) Done() { c.slots <- struct{}{} }

// Run claims until ctx ends. It returns without waiting for dispatched jobs.
func (c *Claimer) Run(ctx context.Context) {
	tick := time.NewTimer(c.pollWait())
	defer tick.Stop()
	backlog := true // claim at once on start
	errWait := 100 * time.Millisecond
	for {
		if !backlog {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			case <-tick.C:
				tick.Reset(c.pollWait())
			}
		}
		n, ok := c.takeSlots(ctx, backlog)
		if !ok {
			return
		}
		start := time.Now()
		jobs, err := c.claim(ctx, n)
		for range n - len(jobs) {
			c.slots <- struct{}{}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("claim jobs, will retry", "queues", c.queues, "in", errWait, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(errWait):
			}
			errWait = min(errWait*2, 5*time.Second)
			// Try again now that the backoff is over rather than at the
			// next poll: jobs may well be waiting.
			backlog = true
			continue
		}
		errWait = 100 * time.Millisecond
		deadline := start.Add(c.lease)
		for _, j := range jobs {
			c.dispatch(Claimed{Row: j, LeaseDeadline: deadline})
		}
		if ctx.Err() != nil {
			return
		}
		backlog = len(jobs) == n && c.anyRunnable(jobs)
		if !backlog && len(jobs) >= 2 && c.cooldown > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.cooldown):
			}
		}
	}
}

// anyRunnable tells whether the worker can run any of jobs. It stops at
// the first it can, so a claim of jobs it runs (the common case) costs one
// Runnable call, not one per job: the worker looks each job's type up
// again when it runs it.
func (c *Claimer) anyRunnable(jobs []*backend.JobRow) bool {
	if c.runnable == nil {
		return true
	}
	for _, j := range jobs {
		if c.runnable(j) {
			return true
		}
	}
	return false
}

// pollWait is the time to the next poll: drawn between half the poll
// interval and all of it, so a job is still noticed within the interval,
// and worker processes that poll one store do not stay in step. In step,
// the jobs that come due between one process's poll and the next
// process's went to the first, run after run: on SQLite, where a worker
// learns of other processes' jobs only by polling, a process whose polls
// fell just after another's got a fraction of the jobs, and a worker
// without a type's handler took most of them from the one that had it.
func (c *Claimer) pollWait() time.Duration { return c.poll/2 + rand.N(c.poll-c.poll/2+1) }

// claim reserves up to n jobs under a context that outlives ctx (see
// Claimer), bounded by the lease: a claim that takes longer brings jobs
// whose lease is already running out.
func (c *Claimer) claim(ctx context.Context, n int) ([]*backend.JobRow, error) {
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.lease)
	defer cancel()
	return c.b.JobClaim(claimCtx, backend.ClaimParams{Queues: c.queues, Max: n, Lease: c.lease})
}

// takeSlots blocks for one free slot, then takes every other free one up to
// the batch size. With a known backlog it waits up to the cooldown for at
// least half a batch, trading a millisecond for far fewer claims.
func (c *Claimer) takeSlots(ctx context.Context, backlog bool) (int, bool) {
	select {
	case <-ctx.Done():
		return 0, false
	case <-c.slots:
	}
	if ctx.Err() != nil {
		// Both were ready and select chose the slot: stopping wins.
		c.slots <- struct{}{}
		return 0, false
	}
	n := 1 + c.grab(c.batch-1)
	want := max(1, min(c.batch, cap(c.slots))/2)
	if !backlog || n >= want || c.cooldown <= 0 {
		return n, true
	}
	timer := time.NewTimer(c.cooldown)
	defer timer.Stop()
	for n < want {
		select {
		case <-ctx.Done():
			for range n {
				c.slots <- struct{}{}
			}
			return 0, false
		case <-timer.C:
			return n + c.grab(c.batch-n), true
		case <-c.slots:
			n++
		}
	}
	return n + c.grab(c.batch-n), true
}

// grab takes up to k free slots without blocking.
func (c *Claimer) grab(k int) int {
	got := 0
	for got < k {
		select {
		case <-c.slots:
			got++
		default:
			return got
		}
	}
	return got
}
