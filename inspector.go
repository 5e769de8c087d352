package jobq

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// The inspector's types are the backend's, re-exported so operators' code
// needs only this package.
type (
	// QueueStats counts one queue's jobs by state.
	QueueStats = backend.QueueStats
	// FailedJob is one row of failed_jobs, named by its JobID.
	FailedJob = backend.FailedJob
	// AttemptError is one failed attempt of a job: FailedJob.Errors and
	// JobRow.Errors hold the last MaxAttemptErrors of them.
	AttemptError = backend.AttemptError
	// FailedFilter selects failed jobs; zero fields match all (which
	// PurgeMatching refuses: PurgeAll says it).
	FailedFilter = backend.FailedFilter
	// TypeCount is a number of jobs of one queue and type.
	TypeCount = backend.TypeCount
)

// MaxAttemptErrors is how many failed attempts a job's record keeps: the
// oldest are dropped past it.
const MaxAttemptErrors = backend.MaxAttemptErrors

// Inspector is the one read-and-repair view of a backend that every operator
// surface shares (the command line now, HTTP admin and metrics later): queue
// counts and the failed-jobs table. Its errors are the backend's, which
// already name the operation ("replay failed jobs: failed job 7: not
// found"); the inspector adds nothing to them but its own checks.
type Inspector struct {
	b     backend.Backend
	hooks []InspectorHooks
}

// InspectorHooks observe the changes an inspector makes, so that what an
// operator does through it (the command line, an admin server) is counted
// by the metrics of the process that did it. Every field is optional;
// hooks run synchronously, in order, after the backend call returned.
type InspectorHooks struct {
	// Replayed: failed jobs went back to pending, counted per queue and
	// type (each once, counts above zero). It is called for every replay
	// that moved a job, also one by filter that stopped part-way with an
	// error: the chunks before the error were committed.
	Replayed func(ctx context.Context, moved []TypeCount)
}

// NewInspector returns an inspector over b, calling hooks (see
// InspectorHooks) after its changes.
func NewInspector(b backend.Backend, hooks ...InspectorHooks) *Inspector {
	return &Inspector{b: b, hooks: hooks}
}

// replayed reports a replay's moves to the hooks.
func (i *Inspector) replayed(ctx context.Context, r backend.ReplayResult) {
	if len(r.ByType) == 0 {
		return
	}
	for _, h := range i.hooks {
		if h.Replayed != nil {
			h.Replayed(ctx, r.ByType)
		}
	}
}

// Stats counts jobs per queue and state, sorted by queue.
func (i *Inspector) Stats(ctx context.Context) ([]QueueStats, error) {
	return i.b.QueueStats(ctx)
}

// Totals sums per-queue stats; its Queue field is empty and its OldestDue
// is the earliest of the queues'.
func Totals(stats []QueueStats) QueueStats {
	var t QueueStats
	for _, s := range stats {
		t.Pending += s.Pending
		t.Scheduled += s.Scheduled
		t.Reserved += s.Reserved
		t.Failed += s.Failed
		if !s.OldestDue.IsZero() && (t.OldestDue.IsZero() || s.OldestDue.Before(t.OldestDue)) {
			t.OldestDue = s.OldestDue
		}
	}
	return t
}

// FailedPage lists failed jobs matching f, the last to fail first: limit
// of them (0 means 100) below the cursor beforeID (0 means from the
// newest). Pass the last row's ID (FailedJob.ID, the failed row's own, not
// its JobID) as beforeID to get the next page: it is the cursor and
// nothing else.
func (i *Inspector) FailedPage(ctx context.Context, f FailedFilter, limit int, beforeID int64) ([]*FailedJob, error) {
	if limit < 0 || beforeID < 0 {
		return nil, fmt.Errorf("%w: limit and before must not be negative", ErrInvalidInput)
	}
	if err := i.keyFilter("list failed jobs", f.Key); err != nil {
		return nil, err
	}
	return i.b.FailedList(ctx, backend.FailedListParams{Filter: f, Limit: limit, BeforeID: beforeID})
}

// Failed returns the failed job whose job ID is jobID (the ID it had while
// live, which a replay keeps), or ErrNotFound.
func (i *Inspector) Failed(ctx context.Context, jobID int64) (*FailedJob, error) {
	return i.b.FailedGet(ctx, jobID)
}

// Replay moves the failed jobs of the given job IDs back to pending, under
// the same IDs, with attempts reset and returns how many were replayed and
// how many were skipped because a live job now holds their unique key or
// they are tasks of a workflow a user cancelled. A replayed workflow task
// brings back, in the same step, the tasks its failure cancelled. A job ID
// that is not among the failed jobs is ErrNotFound.
func (i *Inspector) Replay(ctx context.Context, ids ...int64) (replayed, skipped int, err error) {
	if len(ids) == 0 {
		return 0, 0, fmt.Errorf("%w: name at least one failed job to replay", ErrInvalidInput)
	}
	r, err := i.b.FailedReplay(ctx, backend.FailedReplayParams{IDs: ids})
	if err != nil {
		return 0, 0, err // nothing moved: a replay by IDs is all or nothing
	}
	i.replayed(ctx, r)
	return r.Replayed, r.Skipped, nil
}

// ReplayAll replays every failed job matching f (the zero filter: all).
// It works in chunks (see backend.Backend.FailedReplay): on an error the
// counts are those of the chunks committed before it.
func (i *Inspector) ReplayAll(ctx context.Context, f FailedFilter) (replayed, skipped int, err error) {
	if err := i.keyFilter("replay failed jobs", f.Key); err != nil {
		return 0, 0, err
	}
	r, err := i.b.FailedReplay(ctx, backend.FailedReplayParams{Filter: f})
	i.replayed(ctx, r)
	return r.Replayed, r.Skipped, err
}

// PurgeIDs deletes the failed jobs of the listed job IDs and returns how
// many were deleted; a job ID that is not (or no longer) among the failed
// jobs is not counted and is no error. An empty list is ErrInvalidInput
// and deletes nothing.
//
// Purging has one call per meaning (PurgeIDs, PurgeMatching, PurgeAll,
// PurgeKeepNewest) because a single call taking both IDs and a filter read
// an empty ID list (ids... of an empty slice) as "use the filter", and with
// the zero filter that emptied the whole dead-letter queue.
func (i *Inspector) PurgeIDs(ctx context.Context, ids ...int64) (int, error) {
	if len(ids) == 0 {
		return 0, fmt.Errorf("%w: name at least one failed job to purge (PurgeAll deletes every one)", ErrInvalidInput)
	}
	return i.b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: ids})
}

// PurgeMatching deletes every failed job matching f and returns how many
// were deleted. olderThan > 0 keeps jobs that failed more recently than
// that, by the backend's clock (the database's on a server, the same clock
// that stamped failed_at); it replaces f.OlderThan. A selection that
// matches every failed job, the zero filter with olderThan 0, is
// ErrInvalidInput and deletes nothing: call PurgeAll to mean that.
func (i *Inspector) PurgeMatching(ctx context.Context, f FailedFilter, olderThan time.Duration) (int, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: older-than %s is negative", ErrInvalidInput, olderThan)
	}
	if olderThan > 0 {
		f.OlderThan = olderThan
	}
	if matchesAll(f) {
		return 0, fmt.Errorf("%w: purge by filter needs a queue, type, key, failed-before time or older-than age; to delete every failed job call PurgeAll", ErrInvalidInput)
	}
	if err := i.keyFilter("purge failed jobs", f.Key); err != nil {
		return 0, err
	}
	return i.b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: f})
}

// PurgeAll deletes every failed job and returns how many were deleted.
//
// It is a method of its own, taking no filter (unlike ReplayAll), rather
// than an All field on FailedFilter: a purge cannot be undone, so the call
// that empties the table must not be reachable by leaving something unset,
// and a zero-value struct cannot tell "all" from "forgot to fill it in".
// The filter is also shared with FailedPage and ReplayAll, where a flag
// only purging reads would mean nothing. A named method keeps the
// destructive call visible in review, as Asynq's DeleteAllArchivedTasks
// does. Narrow with PurgeMatching.
func (i *Inspector) PurgeAll(ctx context.Context) (int, error) {
	return i.b.FailedPurge(ctx, backend.FailedPurgeParams{})
}

// matchesAll reports whether f selects every failed job. A FailedBefore
// holding the zero instant in some location is still unset to a backend
// (it tests IsZero), so it is normalised before the comparison; comparing
// with the zero struct, not field by field, keeps a field added to
// FailedFilter later from being ignored here.
func matchesAll(f FailedFilter) bool {
	if f.FailedBefore.IsZero() {
		f.FailedBefore = time.Time{}
	}
	return f == FailedFilter{}
}

// PurgeKeepNewest bounds the failed-jobs table by count: of the failed jobs
// matching f (the zero filter: all of them), the keep that failed last
// stay and the rest are deleted, in one step. With a queue
// or type in f, only those jobs are counted and pruned; others are
// untouched. It returns how many were deleted, 0 when no more than keep
// match. keep must be at least 1 (PurgeMatching and PurgeAll delete every
// match); anything less is ErrInvalidInput.
//
// Unlike PurgeMatching it accepts the zero filter: keep is a number the
// caller had to write, at least 1, so no unset value can make it empty the
// table, and bounding the whole table by count is what retention does.
func (i *Inspector) PurgeKeepNewest(ctx context.Context, f FailedFilter, keep int) (int, error) {
	if keep < 1 {
		return 0, fmt.Errorf("%w: keep %d: keep at least 1 failed job (PurgeAll deletes them all)", ErrInvalidInput, keep)
	}
	if err := i.keyFilter("purge failed jobs", f.Key); err != nil {
		return 0, err
	}
	return i.b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: f, KeepNewest: keep})
}
