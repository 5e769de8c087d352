// Package inline is the sync: backend for tests and local development that runs each
// job's handler inline, inside Enqueue, and returns the handler's error to
// the caller. Nothing is stored: there is no queue, no retry and no
// failed_jobs, so the inspection methods report empty results. Use it where
// a test wants a job's effect before Enqueue returns.
//
// One Backend runs every job with one runner, so it serves one handler
// registry: jobq.NewClient binds the client's Registry (BindRunner) and
// refuses a second client with another one, which would otherwise take
// over the first client's jobs with its own handlers. Clients sharing a
// registry may share a Backend; clients with different registries each
// need their own.
//
// URL: "sync:".
package inline

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
)

func init() {
	backend.Register("sync", func(ctx context.Context, url string, opts backend.OpenOptions) (backend.Backend, error) {
		if opts.Existing {
			return nil, &backend.InputError{Field: "backend URL", Reason: "sync: stores nothing; use sqlite: or postgres:// for a store that outlives one command"}
		}
		if url != "sync:" {
			return nil, &backend.InputError{Field: "backend URL", Reason: fmt.Sprintf("%q: the sync backend takes no path or options; use sync:", url)}
		}
		return New(), nil
	})
}

// Backend runs jobs inline. Create it with New; a client binds its handlers
// through BindRunner and SetRunner.
type Backend struct {
	mu     sync.RWMutex
	run    func(ctx context.Context, job *backend.JobRow) error
	owner  any // what BindRunner bound; nil: nothing yet
	nextID atomic.Int64
	closed atomic.Bool
}

// New returns a sync backend.
func New() *Backend { return &Backend{} }

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Inline  = (*Backend)(nil)
)

// BindRunner binds b to owner, whose handlers the runner given to
// SetRunner runs (jobq.NewClient passes its Registry), before that runner
// is set. Binding the owner b is bound to again is allowed; another owner
// is refused with an error wrapping backend.ErrInvalidInput, and b is left
// as it was: its jobs would otherwise silently run with the second
// owner's handlers. owner must be comparable (a pointer). SetRunner alone
// binds no owner, so direct users of backend.Inline are unaffected.
func (b *Backend) BindRunner(owner any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owner != nil && b.owner != owner {
		return &backend.InputError{Field: "sync backend runner", Reason: "already bound to another registry: one sync backend runs every job with one registry's handlers; give its clients the same registry, or each registry a backend of its own"}
	}
	b.owner = owner
	return nil
}

// SetRunner implements backend.Inline.
func (b *Backend) SetRunner(run func(ctx context.Context, job *backend.JobRow) error) {
	b.mu.Lock()
	b.run = run
	b.mu.Unlock()
}

// JobInsertMany validates every job first (so a bad one runs none), then runs
// each in order, stopping at the first handler error, which it returns
// wrapped with the job's ID and type. Unique keys never collide: a job is
// gone before the next insert. Delays and run-at times are ignored: the
// point of this backend is running now.
func (b *Backend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if b.closed.Load() {
		return nil, backend.ErrClosed
	}
	for _, p := range params {
		if err := backend.ValidateInsert(p); err != nil {
			return nil, err
		}
	}
	// A deadline is met at once here; one already passed is still bad
	// input, as on every backend.
	if err := backend.CheckDeadlines(params, time.Now()); err != nil {
		return nil, err
	}
	b.mu.RLock()
	run := b.run
	b.mu.RUnlock()
	if run == nil {
		return nil, fmt.Errorf("run job: %w: no runner bound; create a jobq.Client with a Registry", backend.ErrInvalidInput)
	}
	out := make([]backend.InsertResult, len(params))
	for i, p := range params {
		now := time.Now()
		row := &backend.JobRow{
			ID: b.nextID.Add(1), Queue: p.Queue, Type: p.Type, Payload: p.Payload,
			Attempts: 1, MaxAttempts: p.MaxAttempts, Priority: p.Priority, Status: backend.StateReserved,
			AvailableAt: now, ReservedAt: now, CreatedAt: now, UniqueKey: p.UniqueKey,
			Metadata: metadata(p.Metadata), Key: p.Key,
		}
		out[i] = backend.InsertResult{ID: row.ID}
		if err := run(ctx, row); err != nil {
			return out[:i+1], fmt.Errorf("run job %d (%s): %w", row.ID, row.Type, err)
		}
	}
	return out, nil
}

// metadata copies the inserter's map for the handler, so neither can change
// the other's; an empty map is none, as on the storing backends.
func metadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func (b *Backend) check(ctx context.Context) error {
	if b.closed.Load() {
		return backend.ErrClosed
	}
	return ctx.Err()
}

// JobClaim returns nothing: no job is ever stored.
func (b *Backend) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	if err := backend.ValidateClaim(p); err != nil {
		return nil, err
	}
	return nil, b.check(ctx)
}

// JobComplete reports every outcome stale: no job is held. A malformed
// outcome is refused as on every backend.
func (b *Backend) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	if _, err := backend.PrepareOutcomes(p.Outcomes); err != nil {
		return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w", err)
	}
	var res backend.CompleteResult
	for _, o := range p.Outcomes {
		res.Stale = append(res.Stale, o.Ref)
	}
	return res, b.check(ctx)
}

// JobExtendLease reports every lease lost: no job is held.
func (b *Backend) JobExtendLease(ctx context.Context, p backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	return p.Refs, b.check(ctx)
}

// JobRelease releases nothing: no job is held, so every ref is stale.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	return backend.CompleteResult{Stale: refs}, b.check(ctx)
}

// LeaseSweep finds nothing.
func (b *Backend) LeaseSweep(ctx context.Context, _ backend.SweepParams) (backend.SweepResult, error) {
	return backend.SweepResult{}, b.check(ctx)
}

// JobGet finds nothing.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
}

// QueueStats is always empty.
func (b *Backend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	return nil, b.check(ctx)
}

// FailedList is always empty.
func (b *Backend) FailedList(ctx context.Context, p backend.FailedListParams) ([]*backend.FailedJob, error) {
	if err := backend.ValidateFilter(p.Filter); err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return nil, b.check(ctx)
}

// FailedGet finds nothing.
func (b *Backend) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("get failed job %d: %w", jobID, backend.ErrNotFound)
}

// FailedReplay finds nothing to replay; named job IDs are ErrNotFound.
func (b *Backend) FailedReplay(ctx context.Context, p backend.FailedReplayParams) (backend.ReplayResult, error) {
	if err := backend.ValidateFilter(p.Filter); err != nil {
		return backend.ReplayResult{}, fmt.Errorf("replay failed jobs: %w", err)
	}
	if err := b.check(ctx); err != nil {
		return backend.ReplayResult{}, err
	}
	if len(p.IDs) > 0 {
		return backend.ReplayResult{}, fmt.Errorf("replay failed job %d: %w", p.IDs[0], backend.ErrNotFound)
	}
	return backend.ReplayResult{}, nil
}

// FailedPurge deletes nothing; bad parameters are refused as on every
// backend.
func (b *Backend) FailedPurge(ctx context.Context, p backend.FailedPurgeParams) (int, error) {
	err := backend.ValidatePurge(p)
	if err == nil {
		err = backend.ValidateFilter(p.Filter)
	}
	if err != nil {
		return 0, fmt.Errorf("purge failed jobs: %w", err)
	}
	return 0, b.check(ctx)
}

// Close implements backend.Backend.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}
