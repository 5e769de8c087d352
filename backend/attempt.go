package backend

import (
	"strings"
	"time"
)

// AttemptError is one failed attempt of a job, as the store recorded it
// when the attempt ended: a job that failed three different ways shows all
// three, not only the last (JobRow.LastError, FailedJob.Error).
//
// Every path that records an attempt's error appends one: a retry, a fail,
// a counted release (ReleasedError) and a lease sweep's rescue or move to
// failed jobs (LeaseExpiredError, with Duration 0 and no Worker: nobody
// reported the attempt), the workflow task paths that end a task's job
// failed among them. A done outcome, a defer (OutcomeDefer: the holder gave
// the job back untouched) and a free release add nothing.
type AttemptError struct {
	// Attempt is the attempt number the claim counted (JobRow.Attempts
	// while it ran).
	Attempt int
	// At is when the attempt ended, by the backend's clock.
	At time.Time
	// Duration is how long the handler ran, as its worker reported it
	// (Outcome.Duration); 0 when unknown (an expired lease, a release).
	Duration time.Duration
	// Worker names who ran the attempt (Outcome.Worker, e.g.
	// "host:pid"); empty when unknown.
	Worker string
	// Error is the attempt's error text, as ErrorText normalised it.
	Error string
}

// MaxAttemptErrors bounds the attempt errors a job keeps: past it, the
// oldest entry is dropped as a new one is appended, so a job retried
// without end cannot grow its row without end.
const MaxAttemptErrors = 20

// MaxWorkerBytes is the most Outcome.Worker holds once stored; WorkerText
// cuts a longer name.
const MaxWorkerBytes = 200

// WorkerText is the normalisation every outcome's Worker gets before it is
// stored, like ErrorText for errors: invalid UTF-8 and NUL bytes become
// U+FFFD and the text is cut to MaxWorkerBytes on a rune boundary. A
// worker's name is informational: a strange one is stored cleaned, never
// refused, so it cannot fail the batch of outcomes it rides in.
func WorkerText(s string) string {
	if !cleanText(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return Shorten(s, MaxWorkerBytes)
}

// AppendAttemptError appends e to errs, dropping the oldest entries past
// MaxAttemptErrors. It always returns a new slice, so a caller may keep
// handing out the old one. For stores that keep the history as a Go slice
// (memory) and for tests; the others append in their own statements.
func AppendAttemptError(errs []AttemptError, e AttemptError) []AttemptError {
	if drop := len(errs) + 1 - MaxAttemptErrors; drop > 0 {
		errs = errs[drop:]
	}
	out := make([]AttemptError, 0, len(errs)+1)
	return append(append(out, errs...), e)
}
