package jobq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// The inspector's cancel and job-listing types, re-exported from backend.
type (
	// CancelResult says what a cancel did with one job.
	CancelResult = backend.CancelResult
	// CancelOutcome is what became of one cancel.
	CancelOutcome = backend.CancelOutcome
	// FinishedJob is a kept completed or cancelled job.
	FinishedJob = backend.FinishedJob
	// JobFilter selects listed jobs; zero fields match all.
	JobFilter = backend.JobFilter
	// JobRow is one live job as the backend stores it.
	JobRow = backend.JobRow
	// Progress is what a running job's handler last reported (see
	// SetProgress): JobRow.Progress.
	Progress = backend.Progress
)

// The outcomes of Inspector.Cancel (see backend.CancelOutcome).
const (
	CancelCancelled = backend.CancelCancelled // was pending or scheduled: cancelled now
	CancelRequested = backend.CancelRequested // running: its handler is told to stop; it ends cancelled
	CancelAlready   = backend.CancelAlready   // cancelled before: nothing changed
	CancelCompleted = backend.CancelCompleted // completed (and kept): nothing changed
	CancelFailed    = backend.CancelFailed    // in the failed jobs: nothing changed
	CancelNotFound  = backend.CancelNotFound  // unknown, or completed and not kept
)

// Cancel cancels the given jobs and says, per ID in order, what it did:
// pending and scheduled jobs are cancelled at once; a running job's
// handler has its context cancelled (cause ErrJobCancelled) on whichever
// worker runs it, within the workers' CancelPollInterval, and the job ends
// cancelled whatever the handler returns. Cancelling a job twice, or one
// that completed, failed or does not exist, is a result
// (CancelAlready, CancelCompleted, CancelFailed, CancelNotFound), not an
// error. A backend that cannot cancel (sync) returns ErrNotSupported.
func (i *Inspector) Cancel(ctx context.Context, ids ...int64) ([]CancelResult, error) {
	c, ok := backend.As[backend.Canceller](i.b)
	if !ok {
		return nil, fmt.Errorf("cancel jobs: %w: %s", ErrNotSupported, keepsNothing(i.b))
	}
	return c.JobCancel(ctx, ids)
}

// JobState is where a job is: pending, scheduled, reserved, cancelling,
// failed, completed or cancelled (see backend.JobState, which says which
// calls take which). Workflows and tasks have their own states
// (WorkflowState, TaskState).
type JobState = backend.JobState

// The states of a job, typed: the values Inspector.Job reports and
// JobsPage and FinishedPage take, spelled as the command line and the
// admin API show them.
const (
	StatePending   = backend.StatePending   // due now
	StateScheduled = backend.StateScheduled // due later (delayed or backing off)
	StateReserved  = backend.StateReserved  // running (cancelling ones included)
	// StateCancelling is what Inspector.Job says of a running job whose
	// cancel was requested; listings count it as reserved.
	StateCancelling = backend.StateCancelling
	StateFailed     = backend.StateFailed    // in the failed jobs (Inspector.FailedPage)
	StateCompleted  = backend.StateCompleted // kept by retention
	StateCancelled  = backend.StateCancelled // kept for Retention.Cancelled
)

// ParseJobState reads a job state as a user types it ("pending",
// "scheduled", …), refusing an unknown name with an error that wraps
// ErrInvalidInput and lists the valid ones. Check the result against what
// the call takes: JobsPage lists pending, scheduled and reserved jobs,
// FinishedPage completed and cancelled ones.
func ParseJobState(s string) (JobState, error) {
	return backend.ParseJobState(s)
}

// JobsPage lists live jobs in state (StatePending, StateScheduled or
// StateReserved) matching f, newest first: limit of them (0 means 100)
// with IDs below beforeID (0: from the newest). Pass the last ID of a page
// as beforeID to get the next. A backend that cannot list (sync) returns
// ErrNotSupported.
func (i *Inspector) JobsPage(ctx context.Context, state JobState, f JobFilter, limit int, beforeID int64) ([]*JobRow, error) {
	r, err := i.retainer("list jobs")
	if err == nil {
		err = i.keyFilter("list jobs", f.Key)
	}
	if err != nil {
		return nil, err
	}
	return r.JobList(ctx, backend.JobListParams{State: state, Filter: f, Limit: limit, BeforeID: beforeID})
}

// FinishedPage lists kept jobs in state (StateCompleted or StateCancelled)
// matching f (its time range bounds when they finished), newest first,
// paged like JobsPage.
func (i *Inspector) FinishedPage(ctx context.Context, state JobState, f JobFilter, limit int, beforeID int64) ([]*FinishedJob, error) {
	r, err := i.retainer("list finished jobs")
	if err == nil {
		err = i.keyFilter("list finished jobs", f.Key)
	}
	if err != nil {
		return nil, err
	}
	return r.FinishedList(ctx, backend.FinishedListParams{State: state, Filter: f, Limit: limit, BeforeID: beforeID})
}

func (i *Inspector) retainer(op string) (backend.Retainer, error) {
	r, ok := backend.As[backend.Retainer](i.b)
	if !ok {
		return nil, fmt.Errorf("%s: %w: %s", op, ErrNotSupported, keepsNothing(i.b))
	}
	return r, nil
}

// keepsNothing says why b cannot cancel or list jobs.
func keepsNothing(b backend.Backend) string {
	if _, inline := backend.As[backend.Inline](b); inline {
		return "the sync backend runs each job inside its Enqueue and keeps no jobs"
	}
	return fmt.Sprintf("%T keeps no cancellable or listable jobs", b)
}

// JobInfo is one job found by ID (Inspector.Job): exactly one of Live,
// Finished and Failed is set.
type JobInfo struct {
	// State is StatePending, StateScheduled, StateReserved,
	// StateCancelling, StateCompleted, StateCancelled or StateFailed.
	State    JobState
	Live     *JobRow      // a pending, scheduled or reserved job
	Finished *FinishedJob // a kept completed or cancelled job
	Failed   *FailedJob   // a job among the failed jobs
}

// Job finds a job by ID wherever it is: among the live jobs, the failed
// ones (a job keeps its ID for its whole life, failed and replayed too)
// and the kept finished ones (completed, cancelled), or returns
// ErrNotFound. Pending and scheduled are told apart by this process's
// clock. A backend that keeps no finished jobs (sync) finds live and
// failed jobs only.
func (i *Inspector) Job(ctx context.Context, id int64) (JobInfo, error) {
	if id < 1 {
		return JobInfo{}, &backend.InputError{Field: "id", Reason: fmt.Sprintf("%d: job IDs start at 1", id)}
	}
	row, err := i.b.JobGet(ctx, id)
	switch {
	case err == nil:
		return JobInfo{State: liveState(row, time.Now()), Live: row}, nil
	case !errors.Is(err, ErrNotFound):
		return JobInfo{}, err
	}
	f, err := i.b.FailedGet(ctx, id)
	switch {
	case err == nil:
		return JobInfo{State: StateFailed, Failed: f}, nil
	case !errors.Is(err, ErrNotFound):
		return JobInfo{}, err
	}
	r, ok := backend.As[backend.Retainer](i.b)
	if !ok {
		return JobInfo{}, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	// The newest kept job at or below id is id itself when it is kept: one
	// indexed read per state, no new backend method.
	for _, st := range []JobState{StateCompleted, StateCancelled} {
		got, err := r.FinishedList(ctx, backend.FinishedListParams{State: st, Limit: 1, BeforeID: id + 1, Results: true})
		if err != nil {
			return JobInfo{}, err
		}
		if len(got) == 1 && got[0].ID == id {
			return JobInfo{State: st, Finished: got[0]}, nil
		}
	}
	return JobInfo{}, fmt.Errorf("job %d: %w", id, ErrNotFound)
}

// liveState is a live job's state as Inspector.Job reports it: its stored
// status, except that a pending job due later is scheduled, which no store
// records because the clock alone turns it pending.
func liveState(row *JobRow, now time.Time) JobState {
	switch {
	case row.Status == StateCancelling, row.Status == StateReserved:
		return row.Status
	case row.AvailableAt.After(now):
		return StateScheduled
	}
	return StatePending
}
