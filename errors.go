package jobq

import (
	"errors"
	"time"

	"github.com/jobq/jobq/backend"
)

// Sentinel errors callers branch on with errors.Is. They are the backend's
// sentinels re-exported, so a caller never needs to import backend.
var (
	// ErrDuplicate is returned by Enqueue, with the existing job's ID, when
	// a job with the same unique key is still pending or reserved.
	ErrDuplicate = errors.New("duplicate unique key")
	// ErrInvalidInput wraps every refusal of bad input (queue name, type,
	// payload, options); errors.As with *backend.InputError gives the field.
	ErrInvalidInput = backend.ErrInvalidInput
	// ErrNotFound is returned when a job or failed job does not exist.
	ErrNotFound = backend.ErrNotFound
	// ErrClosed is returned after the backend was closed.
	ErrClosed = backend.ErrClosed
	// ErrUnavailable is returned when the backend cannot be reached.
	ErrUnavailable = backend.ErrUnavailable
	// ErrNotSupported is returned when the backend lacks an optional
	// capability, e.g. EnqueueTx on a backend without transactions.
	ErrNotSupported = backend.ErrNotSupported
	// ErrNoHandler is the error of a job whose type has no handler
	// registered. A worker never runs nor fails such a job: it gives it
	// back untouched for a worker that has the handler (EventDeferred,
	// whose Err matches it). On the sync backend Enqueue returns it.
	// Tests tell such a job, of which nothing started, from one that ran.
	ErrNoHandler = errors.New("no handler registered")
)

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the worker moves the job to failed_jobs at once,
// skipping its remaining attempts: use it for failures no retry can fix (a
// malformed request, a 4xx answer, a record that no longer exists).
// Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError carries the delay a handler asked for.
type retryAfterError struct {
	delay time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	return "retry after " + e.delay.String() + ": " + e.err.Error()
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err so the next attempt is scheduled after exactly d
// (no backoff, no jitter) instead of the retry policy's delay: use it when
// the other side said when to come back, e.g. a 429 with Retry-After. The
// attempt still counts; when none remain the job fails as usual. A negative
// d is treated as 0. RetryAfter(d, nil) returns nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{delay: d, err: err}
}

// retryAfter returns the delay asked for by RetryAfter, if any.
func retryAfter(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.delay, true
	}
	return 0, false
}
