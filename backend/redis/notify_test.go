package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// waitWake waits up to limit for a wake-up on ch and returns when it came.
func waitWake(t *testing.T, ch <-chan struct{}, limit time.Duration, after string) time.Time {
	t.Helper()
	select {
	case <-ch:
		return time.Now()
	case <-time.After(limit):
		t.Fatalf("no wake-up within %s after %s", limit, after)
	}
	return time.Time{}
}

// noWake asserts that ch stays quiet for d.
func noWake(t *testing.T, ch <-chan struct{}, d time.Duration, after string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("woken within %s after %s", d, after)
	case <-time.After(d):
	}
}

// TestWakeAcrossBackends: a subscriber of one Backend is woken by an
// insert through another (another process, as far as Redis can tell), and
// a delayed job inserted there wakes it at its due time, not before.
func TestWakeAcrossBackends(t *testing.T) {
	a := openTest(t, Options{})
	b := openURL(t, testURL(t), Options{KeyPrefix: a.KeyPrefix(), Logger: quiet})
	ch, cancel := a.Subscribe([]string{"q"})
	defer cancel()
	// The subscription's confirmation wakes it once (messages sent before
	// it are lost): that is the sign it is listening.
	waitWake(t, ch, time.Minute, "subscribing")

	insertJob(t, b, "q")
	waitWake(t, ch, time.Minute, "an insert through the other backend")
	rows, err := a.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %d rows, %v", len(rows), err)
	}

	// Not before the due time is the point; how soon after it is the
	// timer's and the scheduler's business, and a loaded machine (-race,
	// a CPU hog) is late by far more than the 50ms these bounds once
	// allowed: the upper bounds are generous (lateLimit) and the waits are
	// failure deadlines. The quiet window is counted from before the
	// insert, as the wake-up may come sooner after a slow insert returns.
	const delay = 200 * time.Millisecond
	const lateLimit = 2 * time.Second
	start := time.Now()
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, Delay: delay}}); err != nil {
		t.Fatal(err)
	}
	if quiet := time.Until(start.Add(delay - 50*time.Millisecond)); quiet > 0 {
		noWake(t, ch, quiet, "inserting a job due in 200ms")
	}
	woke := waitWake(t, ch, time.Minute, "the delayed job's due time")
	if d := woke.Sub(start); d < delay-20*time.Millisecond || d > delay+lateLimit {
		t.Errorf("woken %s after the insert, want at the due time (%s), not before", d, delay)
	}
	rows, err = a.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim at the wake-up = %d rows, %v; want the delayed job", len(rows), err)
	}

	// A retry with a delay, written through the other backend, too.
	start = time.Now()
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{
		{Ref: rows[0].Ref(), Kind: backend.OutcomeRetry, RetryDelay: delay, Error: "later"},
	}}); err != nil {
		t.Fatal(err)
	}
	woke = waitWake(t, ch, time.Minute, "the retry's due time")
	if d := woke.Sub(start); d < delay-20*time.Millisecond || d > delay+lateLimit {
		t.Errorf("woken %s after the retry, want at its due time (%s), not before", d, delay)
	}
}

// TestWakeAfterClose: Close stops the notifier; Subscribe then returns a
// channel that never fires, and cancelling twice is fine.
func TestWakeAfterClose(t *testing.T) {
	b := openTest(t, Options{})
	ch, cancel := b.Subscribe([]string{"q"})
	waitWake(t, ch, time.Minute, "subscribing")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	cancel()
	ch2, cancel2 := b.Subscribe([]string{"q"})
	defer cancel2()
	noWake(t, ch2, 50*time.Millisecond, "subscribing to a closed backend")
}

// TestWakeAtReleasedTaskDue: a task released with a delay arms a wake-up
// at its due time in the process that released it, whether a completion
// released it, the lease sweep failing its dependency, or a release
// ending that dependency cancelled. Without it an idle worker here would
// find the task only at its next poll.
func TestWakeAtReleasedTaskDue(t *testing.T) {
	const delay = 200 * time.Millisecond
	b := openTest(t, Options{})
	ch, cancel := b.Subscribe([]string{"q"})
	defer cancel()
	waitWake(t, ch, time.Minute, "subscribing")

	// wantDue waits for the wake-up of a task released at start, due
	// delay later; the wait is a failure deadline, not a bound.
	wantDue := func(start time.Time, after string) {
		t.Helper()
		woke := waitWake(t, ch, 30*time.Second, after)
		if d := woke.Sub(start); d < delay-20*time.Millisecond {
			t.Errorf("woken %s after %s, before the released task was due (%s)", d, after, delay)
		}
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].Type != "b" {
			t.Fatalf("claim at the wake-up = %d rows, %v; want the released task b", len(rows), err)
		}
	}

	later := wtask("q", "b", "a")
	later.Job.Delay = delay
	wfInsertT(t, b, wtask("q", "a"), later)
	a := claimN(t, b, 1, time.Minute, "q")[0]
	drain(ch)
	start := time.Now()
	doneRows(t, b, nil, a)
	wantDue(start, "completing a, which released b")

	// The sweep fails a job whose lease ran out with its attempts spent;
	// b goes on after a failed a (DepContinue) and is released.
	first := wtask("q", "a")
	first.Job.MaxAttempts = 1
	later.Deps[0].Policy = backend.DepContinue
	wfInsertT(t, b, first, later)
	claimN(t, b, 1, 50*time.Millisecond, "q")
	time.Sleep(60 * time.Millisecond) // the lease must run out: that is the state under test
	drain(ch)
	start = time.Now()
	for {
		res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantDue(start, "sweeping a, which released b")

	// A release of a job whose cancel was requested ends it cancelled;
	// b goes on after it (DepContinue) and is released.
	wfInsertT(t, b, wtask("q", "a"), later)
	a = claimN(t, b, 1, time.Minute, "q")[0]
	if res, err := b.JobCancel(t.Context(), []int64{a.ID}); err != nil || res[0].Outcome != backend.CancelRequested {
		t.Fatalf("JobCancel(a) = %+v, %v; want its cancel requested", res, err)
	}
	drain(ch)
	start = time.Now()
	if res, err := b.JobRelease(t.Context(), []backend.JobRef{a.Ref()}); err != nil || len(res.Cancelled) != 1 {
		t.Fatalf("JobRelease(a) = %+v, %v; want a cancelled", res, err)
	}
	wantDue(start, "releasing a, cancelled, which released b")
}

// drain empties a coalesced wake-up channel.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
