package backend

import (
	"fmt"
	"time"
)

// A job's deadline (InsertParams.Deadline) is the latest time it may
// start: a job not claimed by then is never run. JobClaim never returns
// a job whose deadline has passed by the backend's clock, and LeaseSweep
// moves such a pending job to failed_jobs with DeadlineError as its
// error, its attempts unchanged (no attempt was made, so its Errors gain
// no entry), never to be retried; SweptJob.Expired names it. A job
// already running when its deadline passes is not stopped: the deadline
// is about starting. A retrying job whose next attempt is due after its
// deadline expires like any other pending one. A replay clears the
// deadline, or the job would expire again at once.
//
// Failed jobs, not a state of their own: an expired job is a job that
// gave up, and the failed jobs are where operators already look for
// those, list, replay and purge them, with every surface and retention
// rule that exists for them.

// DeadlineError is the error text a job whose deadline passed before it
// was claimed ends with. Every backend writes it, so failed jobs read
// alike and the conformance suite can find them.
func DeadlineError(deadline time.Time) string {
	return DeadlineErrorPrefix + deadline.UTC().Format(time.RFC3339)
}

// DeadlineErrorPrefix starts every DeadlineError.
const DeadlineErrorPrefix = "deadline exceeded: not started by "

// Expired reports whether a job with deadline d (zero: none) may no
// longer start at now: a job may start at its deadline, not after it.
func Expired(d, now time.Time) bool { return !d.IsZero() && now.After(d) }

// CheckDeadlines checks the items' deadlines against now, the backend's
// clock, taken in the insert: a deadline must be after now, and no
// earlier than the item's due time (it could never run). Backends call
// it in JobInsertMany before writing anything; an error names the item
// and wraps an *InputError (Field "deadline").
func CheckDeadlines(params []InsertParams, now time.Time) error {
	for i, p := range params {
		if p.Deadline.IsZero() {
			continue
		}
		var reason string
		switch due := p.AvailableAt(now); {
		case !p.Deadline.After(now):
			reason = fmt.Sprintf("%s has passed (the store's clock reads %s)", p.Deadline.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		case p.Deadline.Before(due):
			reason = fmt.Sprintf("%s is before the job's due time %s: it could never start", p.Deadline.UTC().Format(time.RFC3339Nano), due.UTC().Format(time.RFC3339Nano))
		default:
			continue
		}
		return fmt.Errorf("insert job %d of %d: %w", i+1, len(params), &InputError{Field: "deadline", Reason: reason})
	}
	return nil
}

// validateDeadline is ValidateInsert's part: what needs no clock. A
// keyed job's expiry would have to hand its key on from a job that
// never ran, and a replace or debounce gives the waiting holder a new
// due time that could pass the holder's deadline: both are refused
// rather than half honoured.
func validateDeadline(p InsertParams) error {
	if p.Deadline.IsZero() {
		return nil
	}
	switch {
	case p.Key != "":
		return &InputError{Field: "deadline", Reason: "is not for a keyed job"}
	case p.OnConflict != ConflictSkip:
		return &InputError{Field: "deadline", Reason: fmt.Sprintf("is not for the %s conflict mode: the new due time could pass the waiting job's deadline", p.OnConflict)}
	case p.Deadline.Year() > 9999 || p.Deadline.Year() < 1970:
		return &InputError{Field: "deadline", Reason: fmt.Sprintf("%s is out of range", p.Deadline)}
	}
	return nil
}

// RefuseDeadlines is what a backend without deadlines calls first in its
// inserts: it refuses a batch holding an item with a deadline, since
// running the job late instead would break the promise.
func RefuseDeadlines(params []InsertParams) error {
	for i, p := range params {
		if !p.Deadline.IsZero() {
			return fmt.Errorf("insert job %d of %d: deadline: %w", i+1, len(params), ErrNotSupported)
		}
	}
	return nil
}
