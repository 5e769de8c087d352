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
// lease could not be extended: another worker may already run the job.
var ErrLeaseLost = errors.New("lease lost")

// LeaseExtender heartbeats every held job in one call per tick, so long
// handlers keep their lease, and cancels the handlers whose lease was lost.
type LeaseExtender struct {
	b        backend.Backend
	lease    time.Duration
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	held map[int64]heldJob
}

type heldJob struct {
	ref    backend.JobRef
	cancel context.CancelCauseFunc
}

// NewLeaseExtender extends held leases to lease every interval.
func NewLeaseExtender(b backend.Backend, lease, interval time.Duration, log *slog.Logger) *LeaseExtender {
	return &LeaseExtender{b: b, lease: lease, interval: interval, log: log, held: map[int64]heldJob{}}
}

// Add starts heartbeating ref; cancel is called with ErrLeaseLost if the
// lease is lost.
func (e *LeaseExtender) Add(ref backend.JobRef, cancel context.CancelCauseFunc) {
	e.mu.Lock()
	e.held[ref.ID] = heldJob{ref: ref, cancel: cancel}
	e.mu.Unlock()
}

// Remove stops heartbeating the job.
func (e *LeaseExtender) Remove(id int64) {
	e.mu.Lock()
	delete(e.held, id)
	e.mu.Unlock()
}

// Run extends held leases every interval until ctx ends.
func (e *LeaseExtender) Run(ctx context.Context) { ticker.Loop(ctx, e.interval, e.RunOnce) }

// RunOnce extends every held lease once.
func (e *LeaseExtender) RunOnce(ctx context.Context) {
	e.mu.Lock()
	refs := make([]backend.JobRef, 0, len(e.held))
	for _, h := range e.held {
		refs = append(refs, h.ref)
	}
	e.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	lost, err := e.b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: refs, Lease: e.lease})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("extend job leases", "jobs", len(refs), "err", err)
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ref := range lost {
		if h, ok := e.held[ref.ID]; ok && h.ref == ref {
			e.log.Warn("job lease lost; cancelling its handler", "job_id", ref.ID, "attempt", ref.Attempt)
			h.cancel(ErrLeaseLost)
			delete(e.held, ref.ID)
		}
	}
}
