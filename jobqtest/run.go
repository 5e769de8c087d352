package jobqtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// MaxDrainAttempts bounds the attempts one Drain runs, so handlers that
// keep enqueueing each other fail the test instead of hanging it.
const MaxDrainAttempts = 10000

// State is what became of a job after one attempt.
type State string

// The states an attempt leaves its job in.
const (
	StateDone    State = "done"    // the handler succeeded; the job is gone
	StateRetried State = "retried" // it failed with attempts left; due again
	StateFailed  State = "failed"  // it failed for good; moved to failed jobs
	// StateReleased: given back untouched (the worker's shutdown cause on
	// the context): not seen unless the test's context says so.
	StateReleased State = "released"
	// StateDeferred: no handler in the registry for its type, so it was
	// given back untouched, its attempt not counted, due again after a
	// delay (jobq.EventDeferred) that Drain does not treat as elapsed:
	// the job stays pending for a worker that has the handler.
	StateDeferred State = "deferred"
)

// Attempt is one attempt Drain ran.
type Attempt struct {
	JobID       int64
	Type        string
	Queue       string
	Attempt     int // 1 on the first try
	MaxAttempts int
	Err         error // the handler's error; nil when done
	State       State
	// RetryDelay is the delay the retry policy (or RetryAfter) asked for
	// (StateRetried only). Drain treats it as elapsed: the job is due again
	// at once.
	RetryDelay time.Duration
}

// String describes the attempt.
func (a Attempt) String() string {
	s := fmt.Sprintf("job %d (%s) attempt %d/%d: %s", a.JobID, a.Type, a.Attempt, a.MaxAttempts, a.State)
	if a.Err != nil {
		s += ": " + a.Err.Error()
	}
	switch a.State {
	case StateRetried:
		s += fmt.Sprintf(" (retry delay %s, treated as elapsed)", a.RetryDelay)
	case StateDeferred:
		s += fmt.Sprintf(" (given back, the attempt not counted; due again in %s)", a.RetryDelay)
	}
	return s
}

// Attempts is the report of one Drain, in the order the attempts ran.
type Attempts []Attempt

// OfType returns the attempts of jobs of typ.
func (as Attempts) OfType(typ string) Attempts {
	var out Attempts
	for _, a := range as {
		if a.Type == typ {
			out = append(out, a)
		}
	}
	return out
}

// Count returns how many attempts ended in state s.
func (as Attempts) Count(s State) int {
	n := 0
	for _, a := range as {
		if a.State == s {
			n++
		}
	}
	return n
}

// String lists the attempts, one a line.
func (as Attempts) String() string {
	lines := make([]string, len(as))
	for i, a := range as {
		lines[i] = a.String()
	}
	return strings.Join(lines, "\n")
}

// Drain runs the jobs that are due on the recorder's backend until none
// is, in the calling goroutine: no worker goroutine, no sleep. Each
// attempt claims the next due job (priority, then due time, then id) and runs it with
// reg's handler and middleware, cfg's timeout and retry policy and the
// type's HandlerOptions, through jobq.Worker.RunOne, so a failure is
// retried, or moved to failed jobs, exactly as a worker would. Backoff
// delays are treated as elapsed (the retry is written due at once, the
// report keeps the policy's delay), so a job that keeps failing runs its
// MaxAttempts attempts within one call. Jobs delayed at enqueue (Delay,
// RunAt) run only once due by the backend's clock: open the backend with a
// Clock and advance it.
//
// cfg.Queues defaults to every queue the recorder saw a job stored in (and
// "default"), re-picked before each attempt, so a job a handler stores in a
// new queue during the call runs in it too, in claim order; queues the
// caller names are kept as given. cfg.Logger defaults to a discarding
// one. The recorder's WorkerHooks are added to cfg.Hooks, so every attempt
// counts as Ran, except a job whose type has no handler in reg: as a
// worker would, Drain gives it back untouched (StateDeferred), and it
// stays pending; nothing of the part started (see Observation.Unhandled). On
// the sync backend nothing is ever deferred and Drain returns no attempts.
//
// Do not run a Worker on the same backend meanwhile: Drain's retries would
// be due at once for it too. It stops with an error after
// MaxDrainAttempts attempts, or at the first backend error.
func (r *Recorder) Drain(ctx context.Context, reg *jobq.Registry, cfg jobq.WorkerConfig) (Attempts, error) {
	if r.inline {
		return nil, nil
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Hooks = append(append([]jobq.WorkerHooks(nil), cfg.Hooks...), r.WorkerHooks())
	// A worker claims from a fixed list of queues. When the caller named
	// none, a handler may store a follow-up job in a queue no job used
	// before: the worker is made again, on the grown list, before the next
	// claim, so that job is claimed in its turn like any other. The
	// recorder's queues only grow, so their count tells when. A Worker
	// that only calls RunOne starts no goroutine: dropping one leaks none.
	auto := len(cfg.Queues) == 0
	known := -1 // the count of stored queues w was made for
	var w *jobq.Worker
	r.setElapse(true)
	defer r.setElapse(false)
	var out Attempts
	for len(out) < MaxDrainAttempts {
		if w == nil || auto && r.storedQueueCount() != known {
			if auto {
				cfg.Queues = r.storedQueues()
				known = len(cfg.Queues)
				if !containsString(cfg.Queues, "default") {
					cfg.Queues = append(cfg.Queues, "default")
				}
			}
			var err error
			if w, err = jobq.NewWorker(r.b, reg, cfg); err != nil {
				return out, fmt.Errorf("drain: %w", err)
			}
		}
		ev, ok, err := w.RunOne(ctx)
		if ok {
			out = append(out, attemptOf(ev))
			if ev.Job != nil { // the Finished hook is skipped when the write failed
				r.endRun(jobKey(ev.Job), ev.Err)
			}
		}
		if err != nil {
			return out, fmt.Errorf("drain: %w", err)
		}
		if !ok {
			return out, nil
		}
	}
	return out, fmt.Errorf("drain: still jobs due after %d attempts (do handlers keep enqueueing each other?)", MaxDrainAttempts)
}

// RunQueue is Drain for a test: it fails t on an error and logs the
// attempts.
func (r *Recorder) RunQueue(t testing.TB, reg *jobq.Registry, cfg jobq.WorkerConfig) Attempts {
	t.Helper()
	ctx := context.Background()
	if c, ok := t.(interface{ Context() context.Context }); ok {
		ctx = c.Context()
	}
	as, err := r.Drain(ctx, reg, cfg)
	if len(as) > 0 {
		t.Logf("jobqtest: ran %d attempt(s):\n%s", len(as), as)
	}
	if err != nil {
		t.Fatalf("jobqtest: %v", err)
	}
	return as
}

func attemptOf(ev jobq.Event) Attempt {
	a := Attempt{Err: ev.Err, RetryDelay: ev.RetryDelay}
	if ev.Job != nil {
		a.JobID, a.Type, a.Queue, a.Attempt, a.MaxAttempts = ev.Job.ID, ev.Job.Type, ev.Job.Queue, ev.Job.Attempt, ev.Job.MaxAttempts
	}
	switch ev.Kind {
	case jobq.EventDone:
		a.State = StateDone
	case jobq.EventRetry:
		a.State = StateRetried
	case jobq.EventFailed:
		a.State = StateFailed
	case jobq.EventDeferred:
		a.State = StateDeferred
	default:
		a.State = StateReleased
	}
	return a
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
