package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrStale: a holder's write named a claim that no longer holds its job
// (it was released, rescued, re-claimed, finished or is gone), so nothing
// was written. The batch writes of a holder (JobComplete, JobRelease,
// JobExtendLease) report such refs in their results instead; single writes
// (JobProgress) return it.
var ErrStale = errors.New("claim no longer holds the job")

// MaxProgressMessageBytes bounds Progress.Message: progress is a short
// status line a dashboard shows next to a bar, not a log.
const MaxProgressMessageBytes = 200

// Progress is what a running handler last reported of its attempt.
type Progress struct {
	Percent int    // 0..100
	Message string // one line, at most MaxProgressMessageBytes of UTF-8; "" for none
	// At is when it was reported, by the backend's clock; ignored (the
	// backend sets it) in JobProgress.
	At time.Time
}

// ProgressReporter is implemented by backends that store a running job's
// progress. Progress belongs to one attempt: it is read only while the
// claim that wrote it holds the job (reserved, or cancelling), so a job
// given back (released, retried, deferred, rescued by the lease sweep)
// shows none again, and a finished job keeps none (FinishedJob has no
// progress; a kept job's outcome is its Result). Without this capability
// the runtime's SetProgress does nothing.
type ProgressReporter interface {
	// JobProgress records p as the progress of the job ref names, with At
	// the backend's now, replacing the one before. It is fenced: when the
	// job is not reserved under ref.Token (a cancelling job included: its
	// attempt is being stopped), it writes nothing and returns an error
	// wrapping ErrStale. A p that ValidateProgress refuses is an error
	// wrapping ErrInvalidInput, with nothing written. JobGet and
	// Retainer.JobList return it as JobRow.Progress; JobClaim does not
	// read it (a claimed attempt has none yet).
	JobProgress(ctx context.Context, ref JobRef, p Progress) error
}

// ValidateProgress refuses a percent outside 0..100 and a message that is
// too long, not UTF-8 or holds a control character (a NUL, a line break,
// an escape): an *InputError wrapping ErrInvalidInput.
func ValidateProgress(p Progress) error {
	if p.Percent < 0 || p.Percent > 100 {
		return &InputError{Field: "progress percent", Reason: fmt.Sprintf("%d is not within 0..100", p.Percent)}
	}
	if len(p.Message) > MaxProgressMessageBytes {
		return &InputError{Field: "progress message", Reason: fmt.Sprintf("%d bytes is more than %d", len(p.Message), MaxProgressMessageBytes)}
	}
	if !cleanText(p.Message) || !printable(p.Message) {
		// One line of text: what a terminal or a page prints as is,
		// with no escape sequence or line break of its own.
		return &InputError{Field: "progress message", Reason: "not one line of printable UTF-8"}
	}
	return nil
}

// ReportProgress is the frame of every backend's JobProgress: it refuses
// a p that ValidateProgress refuses, then calls write with the operation's
// name for its errors; write applies the fenced write and reports whether
// the claim still held the job. A refused write becomes the error wrapping
// ErrStale, in the same words on every backend.
func ReportProgress(ref JobRef, p Progress, write func(op string) (held bool, err error)) error {
	op := fmt.Sprintf("report progress of job %d", ref.ID)
	if err := ValidateProgress(p); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	held, err := write(op)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%s (token %d): %w", op, ref.Token, ErrStale)
	}
	return nil
}
