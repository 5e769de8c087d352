package backend

import (
	"context"
	"fmt"
)

// Canceller is implemented by backends whose jobs can be cancelled (sqlite,
// postgres, redis, memory; not sync, which runs each job inside its
// enqueue).
//
// A cancelled job is recorded in the finished jobs (see Retainer) with state
// cancelled, whatever the retention of completed jobs: the record is what
// lets a second cancel, the job's holder and an operator tell "cancelled"
// from "unknown". Workers prune these records after their retention time.
//
// A reserved job cannot be stopped by the backend: a cancel marks it
// cancelling (it stays reserved, holding its unique key) and the holder
// learns it from JobCancelling or from a refused heartbeat. From then on
// every write of the holder is refused: JobExtendLease reports the ref
// lost, and whatever outcome JobComplete or JobRelease gets for it, the job
// ends cancelled (listed in CompleteResult.Cancelled, never retried, never
// moved to failed_jobs). A holder that never reports loses its lease, and
// LeaseSweep ends the job cancelled instead of rescuing it.
type Canceller interface {
	// JobCancel cancels the jobs with the given IDs and says, per ID in
	// order, what it did. Pending and scheduled jobs move to the finished
	// jobs as cancelled at once, freeing their unique key; reserved ones
	// become cancelling. It fails only as a whole (the store could not be
	// reached): an ID that cannot be cancelled is a result, not an error.
	JobCancel(ctx context.Context, ids []int64) ([]CancelResult, error)

	// JobCancelling returns the attempts whose cancel was requested and
	// that have not ended yet: what a worker polls to stop its handlers.
	// It reads an index of the (few) cancelling jobs only, so its cost
	// does not grow with the queue.
	JobCancelling(ctx context.Context) ([]JobRef, error)
}

// CancelResult says what JobCancel did with one ID.
type CancelResult struct {
	ID      int64
	Outcome CancelOutcome
	// Attempt is the attempt being stopped (CancelRequested) or the
	// attempts made (CancelCancelled, CancelAlready); 0 otherwise.
	Attempt int
}

// CancelOutcome is what became of one cancel.
type CancelOutcome int

// The outcomes of a cancel.
const (
	// CancelCancelled: the job was pending or scheduled and is now
	// cancelled.
	CancelCancelled CancelOutcome = iota + 1
	// CancelRequested: the job is running; its holder is told to stop and
	// the job ends cancelled when it does (or when its lease runs out).
	CancelRequested
	// CancelAlready: the job was cancelled (or its cancel requested)
	// before; nothing changed.
	CancelAlready
	// CancelCompleted: the job completed (and is kept by retention);
	// nothing changed.
	CancelCompleted
	// CancelFailed: the job is in failed_jobs; nothing changed.
	CancelFailed
	// CancelNotFound: no live or kept job has that ID: it never existed,
	// or it completed and was not kept (retention off), or its record
	// was pruned.
	CancelNotFound
)

// String names the outcome for output and logs.
func (o CancelOutcome) String() string {
	switch o {
	case CancelCancelled:
		return "cancelled"
	case CancelRequested:
		return "cancel requested"
	case CancelAlready:
		return "already cancelled"
	case CancelCompleted:
		return "already completed"
	case CancelFailed:
		return "already failed"
	case CancelNotFound:
		return "not found"
	}
	return "unknown"
}

// Changed reports whether the cancel changed the job (cancelled it or
// requested its stop).
func (o CancelOutcome) Changed() bool { return o == CancelCancelled || o == CancelRequested }

// ValidateCancelIDs refuses an empty list or an ID below 1.
func ValidateCancelIDs(ids []int64) error {
	if len(ids) == 0 {
		return &InputError{Field: "job IDs", Reason: "name at least one job to cancel"}
	}
	for _, id := range ids {
		if id < 1 {
			return &InputError{Field: "job ID", Reason: fmt.Sprintf("%d: job IDs start at 1", id)}
		}
	}
	return nil
}

// CancelledError is the error a worker reports for an attempt that ended
// because its job was cancelled. Backends refuse that outcome (the
// attempt is no longer reserved) and end the job cancelled, keeping the
// last_error it had before.
const CancelledError = "cancelled"
