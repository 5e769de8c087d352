package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// ErrLeaseLost is the cause given to a handler's context when its job's
// lease is gone: the backend said another worker took the job over, or
// heartbeats kept failing until the lease ran out, so another worker may
// already run the job.
var ErrLeaseLost = errors.New("lease lost")

// ErrJobCancelled is the cause given to a handler's context when its job
// was cancelled (see backend.Canceller): the job ends cancelled whatever
// the handler returns.
var ErrJobCancelled = errors.New("job cancelled")

// LeaseExtender heartbeats every held attempt in one call per tick, so long
// handlers keep their lease, and cancels the handlers whose lease was lost.
// Attempts are tracked by their JobRef, never by job ID alone: a job whose
// lease was lost may be claimed again by the same worker while the old
// attempt still runs, and each attempt keeps its own heartbeat.
//
// Each attempt has a lease deadline by this process's monotonic clock: the
// start of the call that claimed or last extended it, plus the lease. The
// backend's clock is what decides, but the backend cannot be asked when it
// does not answer; a deadline measured from before the call is never later
// than the backend's, so when heartbeats fail until it passes, the handler
// is cancelled no later than other workers may take the job.
type LeaseExtender struct {
	b        backend.Backend
	lease    time.Duration
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	held map[backend.JobRef]*heldJob
}

type heldJob struct {
	cancel   context.CancelCauseFunc
	deadline time.Time
	// inTx: the handler is completing the job in its own transaction
	// (see MarkInTx).
	inTx bool
}

// NewLeaseExtender extends held leases to lease every interval.
func NewLeaseExtender(b backend.Backend, lease, interval time.Duration, log *slog.Logger) *LeaseExtender {
	return &LeaseExtender{b: b, lease: lease, interval: interval, log: log, held: map[backend.JobRef]*heldJob{}}
}

// Add starts heartbeating the attempt ref, whose lease runs out at
// deadline unless extended; cancel is called with ErrLeaseLost if the
// lease is lost.
func (e *LeaseExtender) Add(ref backend.JobRef, deadline time.Time, cancel context.CancelCauseFunc) {
	e.mu.Lock()
	e.held[ref] = &heldJob{cancel: cancel, deadline: deadline}
	e.mu.Unlock()
}

// MarkInTx says the handler of the held attempt ref is completing its job
// inside its own transaction, which may commit (the job is then gone), roll
// back (the job is still held, and the handler may go on working or try
// again), or stay open for a while holding the job's row. The lease is
// extended on until the handler returns, but in a call of its own, so a
// row locked by that transaction delays no other job's heartbeat; and when
// the backend says the attempt no longer holds the job, its handler is not
// cancelled, since the likeliest reason is that the transaction committed.
// Were the lease truly lost, that could only follow heartbeats failing
// until the local deadline, which still cancels the handler.
func (e *LeaseExtender) MarkInTx(ref backend.JobRef) {
	e.mu.Lock()
	if h, ok := e.held[ref]; ok {
		h.inTx = true
	}
	e.mu.Unlock()
}

// Remove stops heartbeating the attempt ref; other attempts of the same
// job are untouched.
func (e *LeaseExtender) Remove(ref backend.JobRef) {
	e.mu.Lock()
	delete(e.held, ref)
	e.mu.Unlock()
}

// Held is the number of attempts being heartbeated.
func (e *LeaseExtender) Held() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.held)
}

// Run extends held leases every interval until ctx ends.
func (e *LeaseExtender) Run(ctx context.Context) { ticker.Loop(ctx, e.interval, e.RunOnce) }

// RunOnce extends every held lease once. The call is bounded by the
// interval, so a backend that hangs cannot keep the deadlines from being
// checked. Attempts completing in their handler's transaction (MarkInTx)
// are extended by a call of their own, alongside.
//
// An attempt whose deadline has passed already (the process was paused,
// say by SIGSTOP, or starved for longer than the lease) is cancelled at
// once, without asking the backend: other workers may have taken its job
// over by now, and a resumed process must not go on as its holder.
func (e *LeaseExtender) RunOnce(ctx context.Context) {
	now := time.Now()
	e.mu.Lock()
	refs := make([]backend.JobRef, 0, len(e.held))
	var inTx []backend.JobRef
	for ref, h := range e.held {
		if !now.Before(h.deadline) {
			e.log.Warn("job lease ran out before it could be extended (was the process paused or starved?); cancelling its handler",
				"job_id", ref.ID, "attempt", ref.Attempt)
			h.cancel(ErrLeaseLost)
			delete(e.held, ref)
			continue
		}
		if h.inTx {
			inTx = append(inTx, ref)
		} else {
			refs = append(refs, ref)
		}
	}
	e.mu.Unlock()
	if len(inTx) > 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.extend(ctx, inTx)
		}()
		defer func() { <-done }()
	}
	if len(refs) > 0 {
		e.extend(ctx, refs)
	}
}

// extend extends the leases of refs in one call and acts on the answer:
// the handlers of lost attempts are cancelled (with ErrJobCancelled when a
// cancel took them), and when the call fails, those whose deadline has
// passed.
func (e *LeaseExtender) extend(ctx context.Context, refs []backend.JobRef) {
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, e.interval)
	lost, err := e.b.JobExtendLease(callCtx, backend.ExtendLeaseParams{Refs: refs, Lease: e.lease})
	cancel()
	// A bound of its own: a slow heartbeat must not leave the question
	// of which lost leases were cancels no time, and report a cancel as a
	// lost lease.
	callCtx, cancel = context.WithTimeout(ctx, e.interval)
	cancelled := e.cancelledAmong(callCtx, lost)
	cancel()
	if ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.log.Warn("extend job leases", "jobs", len(refs), "err", err)
		now := time.Now()
		for _, ref := range refs {
			if h, ok := e.held[ref]; ok && !now.Before(h.deadline) {
				e.log.Warn("job lease ran out while heartbeats failed; cancelling its handler", "job_id", ref.ID, "attempt", ref.Attempt)
				h.cancel(ErrLeaseLost)
				delete(e.held, ref)
			}
		}
		return
	}
	gone := make(map[backend.JobRef]bool, len(lost))
	for _, ref := range lost {
		gone[ref] = true
		if h, ok := e.held[ref]; ok {
			if h.inTx && !cancelled[ref] {
				// Most likely the handler's transaction committed: the
				// job is done, and its handler must not hear otherwise.
				delete(e.held, ref)
				continue
			}
			if cancelled[ref] {
				e.log.Debug("job cancelled; cancelling its handler", "job_id", ref.ID, "attempt", ref.Attempt)
				h.cancel(ErrJobCancelled)
			} else {
				e.log.Warn("job lease lost; cancelling its handler", "job_id", ref.ID, "attempt", ref.Attempt)
				h.cancel(ErrLeaseLost)
			}
			delete(e.held, ref)
		}
	}
	deadline := start.Add(e.lease)
	for _, ref := range refs {
		if h, ok := e.held[ref]; ok && !gone[ref] {
			h.deadline = deadline
		}
	}
}

// cancelledAmong asks a backend.Canceller which of the lost refs were
// lost to a cancel rather than to another worker, so the heartbeat's
// refusal doubles as the fallback that tells handlers of cancels (see
// CancelWatcher for the fast path). Only called when a lease was lost.
func (e *LeaseExtender) cancelledAmong(ctx context.Context, lost []backend.JobRef) map[backend.JobRef]bool {
	c, ok := backend.As[backend.Canceller](e.b)
	if !ok || len(lost) == 0 {
		return nil
	}
	refs, err := c.JobCancelling(ctx)
	if err != nil {
		e.log.Warn("list cancelled jobs", "err", err)
		return nil
	}
	out := make(map[backend.JobRef]bool, len(refs))
	for _, r := range refs {
		out[r] = true
	}
	return out
}

// CancelHeld cancels the handlers of the held attempts among refs with
// cause and stops heartbeating them; it returns how many it cancelled.
func (e *LeaseExtender) CancelHeld(refs []backend.JobRef, cause error) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ref := range refs {
		if h, ok := e.held[ref]; ok {
			h.cancel(cause)
			delete(e.held, ref)
			n++
		}
	}
	return n
}
