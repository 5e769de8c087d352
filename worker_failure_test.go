package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// The runtime's failure paths: each test here reproduces a defect a review
// found in the worker (issue 7) and fails on the commit before its fix.

// refusesBadText wraps a backend the way PostgreSQL behaves: a batch of
// outcomes holding an error text that is not valid UTF-8 or has a NUL
// byte is refused whole, as invalid input.
type refusesBadText struct{ backend.Backend }

func (b refusesBadText) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	for _, o := range p.Outcomes {
		if !utf8.ValidString(o.Error) || strings.ContainsRune(o.Error, 0) {
			return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w: invalid byte sequence for encoding \"UTF8\"", backend.ErrInvalidInput)
		}
	}
	return b.Backend.JobComplete(ctx, p)
}

// TestWorkerSurvivesBadErrorText: one job whose error text is cut inside a
// multi-byte character (as the http job's 512-byte body excerpt can be)
// and one holding a NUL byte no longer stall the worker: every other job
// is done, and the bad ones are failed with their text normalised.
func TestWorkerSurvivesBadErrorText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t, nil)
		b := refusesBadText{mem}
		reg := jobq.NewRegistry()
		cut := "upstream said: price 5 \xe2\x82" // "€" cut after two of its three bytes
		nul := "binary\x00body"
		reg.HandleFunc("bad", func(ctx context.Context, j *jobq.Job) error {
			if j.Priority == 1 {
				return errors.New(cut)
			}
			return errors.New(nul)
		})
		reg.HandleFunc("good", func(ctx context.Context, j *jobq.Job) error { return nil })
		c := mustClient(t, mem, jobq.ClientConfig{})
		specs := []jobq.JobSpec{
			{Type: "bad", Options: []jobq.EnqueueOption{jobq.MaxAttempts(1), jobq.Priority(1)}},
			{Type: "bad", Options: []jobq.EnqueueOption{jobq.MaxAttempts(1), jobq.Priority(1)}},
		}
		specs[1].Options[1] = jobq.Priority(2)
		for range 200 {
			specs = append(specs, jobq.JobSpec{Type: "good"})
		}
		if _, err := c.EnqueueMany(context.Background(), specs); err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, b, reg, fastConfig())
		time.Sleep(time.Minute)
		synctest.Wait()
		stats, _ := mem.QueueStats(context.Background())
		stop()
		if len(stats) != 1 || stats[0].Pending+stats[0].Reserved+stats[0].Scheduled != 0 || stats[0].Failed != 2 {
			t.Fatalf("after a minute: %+v; want every good job done and the two bad ones failed", stats)
		}
		for _, f := range failedJobs(t, mem) {
			if !utf8.ValidString(f.Error) || strings.ContainsRune(f.Error, 0) {
				t.Fatalf("stored error %q is not normalised", f.Error)
			}
			if f.Error != backend.ErrorText(cut) && f.Error != backend.ErrorText(nul) {
				t.Fatalf("stored error %q; want the handler's text normalised (%q or %q)", f.Error, backend.ErrorText(cut), backend.ErrorText(nul))
			}
		}
	})
}

// TestNewWorkerValidatesHandlerOptions: per-type options get the same
// checks as WorkerConfig, with an error naming the type, the field and the
// limit, and no setting is silently changed.
func TestNewWorkerValidatesHandlerOptions(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	nop := func(context.Context, *jobq.Job) error { return nil }
	for _, tc := range []struct {
		opts jobq.HandlerOptions
		want string
	}{
		{jobq.HandlerOptions{Retry: jobq.RetryPolicy{Jitter: 20}}, `type "email": Retry.Jitter 20 is outside [0, 1]`},
		{jobq.HandlerOptions{Retry: jobq.RetryPolicy{Base: -time.Second}}, `type "email": Retry.Base -1s is negative`},
		{jobq.HandlerOptions{Retry: jobq.RetryPolicy{Max: -time.Second}}, `type "email": Retry.Max -1s is negative`},
		{jobq.HandlerOptions{Retry: jobq.RetryPolicy{Base: 2 * time.Hour}}, `type "email": Retry merged with the worker's.Max 1h0m0s is shorter than Base 2h0m0s`},
		{jobq.HandlerOptions{Timeout: -time.Second}, `type "email": Timeout -1s is negative`},
		{jobq.HandlerOptions{MaxAttempts: 1001}, `type "email": MaxAttempts 1001 is outside 1..1000`},
		{jobq.HandlerOptions{MaxAttempts: -1}, `type "email": MaxAttempts -1 is outside 1..1000`},
	} {
		reg := jobq.NewRegistry()
		reg.HandleFunc("email", nop, tc.opts)
		_, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{})
		if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWorker with %+v: %v; want ErrInvalidInput saying %q", tc.opts, err, tc.want)
		}
		if _, err := jobq.NewClient(b, jobq.ClientConfig{Registry: reg}); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Errorf("NewClient with %+v: %v; want ErrInvalidInput", tc.opts, err)
		}
	}
	reg := jobq.NewRegistry()
	if _, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{Concurrency: 4, ClaimBatch: 10}); !errors.Is(err, jobq.ErrInvalidInput) ||
		!strings.Contains(err.Error(), "ClaimBatch 10 is outside 1..Concurrency (4), or 0") {
		t.Errorf("ClaimBatch above Concurrency: %v; want it refused, not clamped", err)
	}
}

// TestWorkerNoPanicAfterRun: a handler that ignores cancellation and
// returns only after Run has returned does not crash the process: its
// late result is dropped and logged, and the job stays reserved for the
// lease sweep.
func TestWorkerNoPanicAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		started, release := make(chan struct{}), make(chan struct{})
		reg.HandleFunc("stubborn", func(ctx context.Context, j *jobq.Job) error {
			close(started)
			<-release // ignores ctx
			return errors.New("finally")
		})
		id, _ := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "stubborn", nil)
		var log logBuffer
		cfg := fastConfig()
		cfg.ShutdownTimeout = 100 * time.Millisecond
		cfg.Logger = log.logger()
		w, err := jobq.NewWorker(b, reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error)
		go func() { ran <- w.Run(ctx) }()
		<-started
		cancel()
		if err := <-ran; err != nil {
			t.Fatalf("run: %v", err)
		}
		close(release) // the handler returns after Run did
		synctest.Wait()
		if !strings.Contains(log.String(), "result is dropped") {
			t.Fatalf("the late result was not logged as dropped:\n%s", log.String())
		}
		row, err := b.JobGet(context.Background(), id)
		if err != nil || row.Status != backend.StateReserved || row.Attempts != 1 {
			t.Fatalf("job = %+v, %v; want still reserved for the lease sweep", row, err)
		}
	})
}

// flakyHeartbeats fails every lease extension while down is set.
type flakyHeartbeats struct {
	backend.Backend
	down atomic.Bool
}

func (b *flakyHeartbeats) JobExtendLease(ctx context.Context, p backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	if b.down.Load() {
		return nil, fmt.Errorf("extend leases: %w", backend.ErrUnavailable)
	}
	return b.Backend.JobExtendLease(ctx, p)
}

// TestWorkerHeartbeatsPerAttempt: heartbeats fail until the lease runs out,
// so the job is rescued and the same worker claims it again while the old
// attempt still runs. The old attempt's context is cancelled with
// ErrLeaseLost; when it ends it must not stop the new attempt's heartbeat,
// or the new attempt is swept too and a third runs beside it.
func TestWorkerHeartbeatsPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t, nil)
		b := &flakyHeartbeats{Backend: mem}
		b.down.Store(true)
		reg := jobq.NewRegistry()
		var mu sync.Mutex
		attempts := map[int]chan struct{}{}
		causes := map[int]error{}
		running := 0
		peak := 0
		reg.HandleFunc("long", func(ctx context.Context, j *jobq.Job) error {
			mu.Lock()
			release := make(chan struct{})
			attempts[j.Attempt] = release
			running++
			peak = max(peak, running)
			mu.Unlock()
			<-release // ignores ctx, like a handler stuck in a call
			mu.Lock()
			running--
			causes[j.Attempt] = context.Cause(ctx)
			mu.Unlock()
			return nil
		})
		id, _ := mustClient(t, mem, jobq.ClientConfig{}).Enqueue(context.Background(), "long", nil, jobq.MaxAttempts(5))
		cfg := fastConfig()
		cfg.Concurrency = 3
		cfg.Lease = 3 * time.Second
		cfg.HeartbeatInterval = time.Second
		cfg.SweepInterval = 500 * time.Millisecond
		stop := startWorker(t, b, reg, cfg)
		attempt := func(n int) chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			return attempts[n]
		}
		// Attempt 1's heartbeats fail; after its lease, it is swept and
		// claimed again.
		time.Sleep(5 * time.Second)
		if attempt(2) == nil {
			t.Fatal("the job was not claimed again after its lease ran out")
		}
		b.down.Store(false)
		close(attempt(1))
		// Attempt 2 heartbeats normally; it must keep its lease however
		// long it runs.
		time.Sleep(20 * time.Second)
		if a3 := attempt(3); a3 != nil {
			close(a3)
			t.Error("a third attempt ran while the second still held the job")
		}
		close(attempt(2))
		synctest.Wait()
		stop()
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(causes[1], jobq.ErrLeaseLost) {
			t.Errorf("attempt 1's context cause = %v; want ErrLeaseLost once its lease ran out", causes[1])
		}
		if peak > 2 {
			t.Errorf("%d attempts of one job ran at once", peak)
		}
		if !jobGone(mem, id) {
			t.Error("the job was not completed by its second attempt")
		}
	})
}

// replyLost models a claim whose reply is lost to a cancellation: the
// server commits the first claim whatever the context, but the caller
// sees only its context's error once that has ended.
type replyLost struct {
	backend.Backend
	once    sync.Once
	started chan struct{}
	proceed chan struct{}
}

func (b *replyLost) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return b.Backend.JobClaim(ctx, p)
	}
	close(b.started)
	<-b.proceed
	rows, err := b.Backend.JobClaim(context.Background(), p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, err
}

// TestWorkerSeesClaimThroughOnShutdown: a claim in flight when the worker
// is told to stop is seen through, and the job it reserved runs, instead
// of staying reserved with its only attempt spent without running.
func TestWorkerSeesClaimThroughOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t, nil)
		b := &replyLost{Backend: mem, started: make(chan struct{}), proceed: make(chan struct{})}
		reg := jobq.NewRegistry()
		var runs atomic.Int32
		reg.HandleFunc("once", func(ctx context.Context, j *jobq.Job) error { runs.Add(1); return nil })
		id, _ := mustClient(t, mem, jobq.ClientConfig{}).Enqueue(context.Background(), "once", nil, jobq.MaxAttempts(1))
		w, err := jobq.NewWorker(b, reg, fastConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error)
		go func() { ran <- w.Run(ctx) }()
		<-b.started
		cancel()
		close(b.proceed)
		if err := <-ran; err != nil {
			t.Fatalf("run: %v", err)
		}
		if runs.Load() != 1 || !jobGone(mem, id) {
			row, _ := mem.JobGet(context.Background(), id)
			t.Fatalf("handler ran %d times, job now %+v; want the claimed job run and done", runs.Load(), row)
		}
	})
}

// TestPurgeOlderThanUsesBackendClock: "older than" is measured on the
// backend's clock, the one that stamped failed_at, so a client whose clock
// runs an hour ahead of the database does not purge jobs that failed a
// minute ago.
func TestPurgeOlderThanUsesBackendClock(t *testing.T) {
	t.Parallel()
	clock := newFakeClock() // the backend's clock, far from this process's
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("x", func(context.Context, *jobq.Job) error { return jobq.Permanent(errors.New("no")) })
	mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "x", nil)
	rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"default"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := b.JobComplete(context.Background(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "no"}}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	insp := jobq.NewInspector(b)
	n, err := insp.PurgeMatching(context.Background(), jobq.FailedFilter{}, 30*time.Minute)
	if err != nil || n != 0 {
		t.Fatalf("purge older than 30m of a job failed 1m ago (backend clock) = %d, %v; want 0", n, err)
	}
	clock.Advance(time.Hour)
	if n, err := insp.PurgeMatching(context.Background(), jobq.FailedFilter{}, 30*time.Minute); err != nil || n != 1 {
		t.Fatalf("purge older than 30m an hour later = %d, %v; want 1", n, err)
	}
}

// TestShutdownReleasesAreBounded: a job that always outlives the shutdown
// grace is given back for free only backend.MaxFreeReleases times; after
// that each interruption counts as an attempt, so it ends in failed jobs
// instead of escaping its attempt limit forever.
func TestShutdownReleasesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		started := make(chan struct{}, 1)
		reg.HandleFunc("endless", func(ctx context.Context, j *jobq.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		id, _ := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "endless", nil, jobq.MaxAttempts(2))
		cfg := fastConfig()
		cfg.ShutdownTimeout = time.Second
		runs := 0
		for !jobGone(b, id) && runs < 10 {
			stop := startWorker(t, b, reg, cfg)
			<-started
			runs++
			stop()
		}
		// 3 free releases, then one counted (attempt 1 of 2), then the
		// last attempt's release fails the job.
		if want := backend.MaxFreeReleases + 2; runs != want {
			t.Fatalf("the job ran %d times before leaving the queue; want %d", runs, want)
		}
		f := failedJobs(t, b)
		if len(f) != 1 || f[0].JobID != id || f[0].Error != backend.ReleasedError || f[0].Attempts != 2 {
			t.Fatalf("failed jobs %+v; want job %d with 2 attempts and %q", f, id, backend.ReleasedError)
		}
	})
}

// TestWorkerHandlerGoexit: a handler that ends its goroutine with
// runtime.Goexit (a t.FailNow inside a handler under test) costs its
// attempt like a panic, with an error saying so, and frees its slot: with
// one slot, the next job still runs, and the worker stops cleanly.
func TestWorkerHandlerGoexit(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var exits atomic.Int32
	var lastErr atomic.Value
	reg.HandleFunc("exits", func(ctx context.Context, j *jobq.Job) error {
		if j.Attempt == 1 {
			exits.Add(1)
			runtime.Goexit()
		}
		lastErr.Store(j.LastError)
		return nil
	})
	reg.HandleFunc("next", func(ctx context.Context, j *jobq.Job) error { return nil })
	c := mustClient(t, b, jobq.ClientConfig{})
	first, err := c.Enqueue(context.Background(), "exits", nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Enqueue(context.Background(), "next", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Concurrency = 1
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	eventually(t, settle, "both jobs to be done", func() bool { return jobGone(b, first) && jobGone(b, second) })
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(settle):
		t.Fatal("Run did not return: the slot of the handler that called Goexit was never freed")
	}
	if got, _ := lastErr.Load().(string); exits.Load() != 1 || !strings.Contains(got, "runtime.Goexit") {
		t.Fatalf("exits %d, the retry saw last error %q; want one Goexit reported as the attempt's error", exits.Load(), got)
	}
	if w.Busy() != 0 {
		t.Fatalf("busy %d after Run; want 0", w.Busy())
	}
}
