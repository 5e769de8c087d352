package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotSupported: the backend lacks an optional capability (the sync
// backend has no queue to pause or limit). jobq.ErrNotSupported is this
// error.
var ErrNotSupported = errors.New("not supported by this backend")

// QueueController is implemented by backends that keep per-queue control
// settings in the store itself, so every worker on every machine obeys
// them: a paused flag and limits across all workers. The runtime needs no
// change for them: JobClaim enforces them inside its own atomic step.
//
//   - A paused queue is skipped by every JobClaim from the moment
//     QueuePause returns; jobs already reserved run on and complete
//     normally, and enqueues keep going in. Resuming wakes subscribers
//     (see Notifier) at once.
//   - Concurrency > 0: a claim never leaves more than Concurrency jobs of
//     the queue reserved at once, counted over every worker (a reserved
//     job whose worker died counts until its lease expires).
//   - Rate > 0: at most Rate jobs of the queue are claimed per RatePeriod,
//     in windows aligned to the Unix epoch (a rate of 50 per second
//     allows 50 claims in each whole second of the backend's clock).
//
// A job held back by a pause or a limit stays pending with its attempt
// count untouched: a limit never spends an attempt. A claim over several
// queues orders jobs by priority within the unlimited queues and within
// each limited one, and fills its batch from the unlimited queues first.
type QueueController interface {
	// QueuePause pauses (paused true) or resumes a queue. It is idempotent
	// and leaves the queue's limits as they are. The queue need not hold
	// any job. An invalid name wraps ErrInvalidInput.
	QueuePause(ctx context.Context, queue string, paused bool) error

	// QueueSetLimits replaces the queue's limits (both of them; the zero
	// QueueLimits clears them) and starts a new rate window. It leaves the
	// paused flag as it is. Limits are checked with ValidateQueueLimits.
	QueueSetLimits(ctx context.Context, queue string, limits QueueLimits) error

	// QueueSettingsList returns every queue that is paused, limited or
	// has key rules (see KeyController), sorted by name. A queue resumed
	// and cleared of its limits and key rules is not listed.
	QueueSettingsList(ctx context.Context) ([]QueueSettings, error)
}

// QueueLimits bounds one queue across every worker. Zero fields mean no
// limit.
type QueueLimits struct {
	// Concurrency is the most jobs of the queue reserved (running) at
	// once; 0: unlimited.
	Concurrency int
	// Rate is the most jobs of the queue started per RatePeriod; 0:
	// unlimited.
	Rate int
	// RatePeriod is the rate's window, MinRatePeriod..MaxRatePeriod when
	// Rate is set, zero otherwise.
	RatePeriod time.Duration
}

// IsZero reports whether l limits nothing.
func (l QueueLimits) IsZero() bool { return l.Concurrency == 0 && l.Rate == 0 }

// QueueSettings is the control state of one queue.
type QueueSettings struct {
	Queue  string
	Paused bool
	QueueLimits
	// Keys are the queue's key rules (see KeyController); zero on a
	// backend without keys. QueueSettingsList lists a queue with key rules
	// too.
	Keys KeyRules
}

// Bounds that ValidateQueueLimits enforces.
const (
	MaxQueueConcurrency = 1_000_000
	MaxQueueRate        = 1_000_000_000
	// The rate window is stored in microseconds (milliseconds on Redis):
	// a millisecond is the shortest window every backend can keep.
	MinRatePeriod = time.Millisecond
	MaxRatePeriod = 24 * time.Hour
)

// ValidateQueueLimits checks limits before anything is written.
func ValidateQueueLimits(l QueueLimits) error {
	switch {
	case l.Concurrency < 0 || l.Concurrency > MaxQueueConcurrency:
		return &InputError{Field: "concurrency", Reason: fmt.Sprintf("%d: use 1..%d, or 0 for no limit", l.Concurrency, MaxQueueConcurrency)}
	case l.Rate < 0 || l.Rate > MaxQueueRate:
		return &InputError{Field: "rate", Reason: fmt.Sprintf("%d: use 1..%d starts per period, or 0 for no limit", l.Rate, MaxQueueRate)}
	case l.Rate == 0 && l.RatePeriod != 0:
		return &InputError{Field: "rate period", Reason: fmt.Sprintf("%s given without a rate: set both, e.g. 50 per 1s", l.RatePeriod)}
	case l.Rate > 0 && (l.RatePeriod < MinRatePeriod || l.RatePeriod > MaxRatePeriod):
		return &InputError{Field: "rate period", Reason: fmt.Sprintf("%s: use %s..%s", l.RatePeriod, MinRatePeriod, MaxRatePeriod)}
	case l.Rate > 0 && l.RatePeriod%MinRatePeriod != 0:
		return &InputError{Field: "rate period", Reason: fmt.Sprintf("%s: use whole milliseconds", l.RatePeriod)}
	}
	return nil
}

// RateWindow returns the number of the rate window that now falls in and
// when the next one starts: windows of period aligned to the Unix epoch,
// so every process and backend agrees on them.
func RateWindow(now time.Time, period time.Duration) (window int64, next time.Time) {
	p := period.Microseconds()
	us := now.UnixMicro()
	window = us / p
	return window, time.UnixMicro((window + 1) * p)
}

// Allowance is how many jobs a claim of want may take from a limited queue
// with reserved jobs held now and used claims counted in the current rate
// window. It is never negative.
func (l QueueLimits) Allowance(want int, reserved, used int64) int {
	n := int64(want)
	if l.Concurrency > 0 {
		n = min(n, int64(l.Concurrency)-reserved)
	}
	if l.Rate > 0 {
		n = min(n, int64(l.Rate)-used)
	}
	return int(max(n, 0))
}
