package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

func TestWorkerExactAttempts(t *testing.T) {
	t.Parallel()
	t.Run("always failing job runs exactly max attempts and leaves one failed row", func(t *testing.T) {
		t.Parallel()
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		var runs atomic.Int32
		reg.HandleFunc("boom", func(ctx context.Context, j *jobq.Job) error {
			runs.Add(1)
			return fmt.Errorf("boom on attempt %d", j.Attempt)
		})
		id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "boom", nil, jobq.MaxAttempts(3))
		if err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, b, reg, fastConfig())
		eventually(t, settle, "the job to fail", func() bool { return len(failedJobs(t, b)) == 1 })
		stop()
		if got := runs.Load(); got != 3 {
			t.Fatalf("handler ran %d times, want 3", got)
		}
		f := failedJobs(t, b)
		if len(f) != 1 || f[0].JobID != id || f[0].Attempts != 3 || f[0].Error != "boom on attempt 3" {
			t.Fatalf("failed_jobs = %+v, want one row for job %d with 3 attempts and the last error", f, id)
		}
		if !jobGone(b, id) {
			t.Fatal("failed job is still in the jobs table")
		}
	})
	t.Run("job failing only its first attempt succeeds on the second", func(t *testing.T) {
		t.Parallel()
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		var runs atomic.Int32
		done := make(chan int, 1)
		reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
			runs.Add(1)
			if j.Attempt == 1 {
				return errors.New("flaky")
			}
			if j.LastError != "flaky" {
				return jobq.Permanent(fmt.Errorf("LastError = %q, want flaky", j.LastError))
			}
			done <- j.Attempt
			return nil
		})
		id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "flaky", nil)
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, b, reg, fastConfig())
		if a := <-done; a != 2 {
			t.Fatalf("succeeded on attempt %d, want 2", a)
		}
		eventually(t, settle, "the job to be deleted", func() bool { return jobGone(b, id) })
		if runs.Load() != 2 || len(failedJobs(t, b)) != 0 {
			t.Fatalf("runs = %d, failed = %d; want 2 runs and no failed job", runs.Load(), len(failedJobs(t, b)))
		}
	})
}

func TestWorkerFailureKinds(t *testing.T) {
	t.Parallel()
	type args struct {
		Amount int `json:"amount"`
	}
	cases := []struct {
		name     string
		typ      string
		payload  any
		wantRuns int32
		wantErr  string
	}{
		{"permanent error skips retries", "perm", nil, 1, "permanent: card declined"},
		{"undecodable payload fails permanently", "typed", map[string]string{"amount": "lots"}, 0, "decode typed payload"},
		{"panic is recovered with its stack", "panics", nil, 3, "panic: kaboom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newMemory(t, nil)
			reg := jobq.NewRegistry()
			var runs atomic.Int32
			reg.HandleFunc("perm", func(ctx context.Context, j *jobq.Job) error {
				runs.Add(1)
				return jobq.Permanent(errors.New("card declined"))
			})
			jobq.Handle(reg, "typed", func(ctx context.Context, a args) error { runs.Add(1); return nil })
			reg.HandleFunc("panics", func(ctx context.Context, j *jobq.Job) error { runs.Add(1); panic("kaboom") })
			id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), tc.typ, tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			stop := startWorker(t, b, reg, fastConfig())
			eventually(t, settle, "the job to fail", func() bool { return len(failedJobs(t, b)) == 1 })
			stop()
			f := failedJobs(t, b)[0]
			if f.JobID != id || !strings.Contains(f.Error, tc.wantErr) || runs.Load() != tc.wantRuns {
				t.Fatalf("failed job %+v after %d runs; want job %d, error containing %q, %d runs", f, runs.Load(), id, tc.wantErr, tc.wantRuns)
			}
			if tc.typ == "panics" && !strings.Contains(f.Error, "goroutine") {
				t.Fatalf("panic error has no stack: %q", f.Error)
			}
		})
	}
}

// TestWorkerBackoff shows the retry schedule with a fake clock: each
// available_at is now + base × 2^(n−1) within the jitter band.
func TestWorkerBackoff(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	attempts := make(chan int, 10)
	reg.HandleFunc("fails", func(ctx context.Context, j *jobq.Job) error {
		attempts <- j.Attempt
		return errors.New("try later")
	})
	const maxAttempts = 6
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "fails", nil, jobq.MaxAttempts(maxAttempts))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Retry = jobq.RetryPolicy{Base: 10 * time.Second, Max: time.Hour, Jitter: 0.2}
	startWorker(t, b, reg, cfg)
	for n := 1; n < maxAttempts; n++ {
		if got := <-attempts; got != n {
			t.Fatalf("attempt %d ran as attempt %d", n, got)
		}
		var row *backend.JobRow
		eventually(t, settle, "the retry to be scheduled", func() bool {
			row, err = b.JobGet(context.Background(), id)
			return err == nil && row.Status == backend.StatePending && row.Attempts == n
		})
		gap := row.AvailableAt.Sub(clock.Now())
		nominal := 10 * time.Second << (n - 1)
		lo, hi := time.Duration(float64(nominal)*0.8), time.Duration(float64(nominal)*1.2)
		if gap < lo || gap > hi {
			t.Fatalf("after attempt %d the job waits %s, want %s..%s", n, gap, lo, hi)
		}
		select {
		case a := <-attempts:
			t.Fatalf("attempt %d ran before its backoff elapsed", a)
		default:
		}
		clock.Advance(gap)
	}
	<-attempts
	eventually(t, settle, "the last attempt to fail the job", func() bool { return len(failedJobs(t, b)) == 1 })
}

func TestWorkerRetryAfter(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("limited", func(ctx context.Context, j *jobq.Job) error {
		return jobq.RetryAfter(42*time.Second, errors.New("429 too many requests"))
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "limited", nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, fastConfig())
	eventually(t, settle, "the retry to be scheduled", func() bool {
		row, err := b.JobGet(context.Background(), id)
		return err == nil && row.Attempts == 1 && row.Status == backend.StatePending
	})
	row, _ := b.JobGet(context.Background(), id)
	if gap := row.AvailableAt.Sub(clock.Now()); gap != 42*time.Second {
		t.Fatalf("retry scheduled after %s, want exactly the 42s asked for", gap)
	}
	if !strings.Contains(row.LastError, "429") {
		t.Fatalf("last error %q does not carry the handler's error", row.LastError)
	}
}

func TestWorkerJobTimeout(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
		<-ctx.Done()
		return ctx.Err()
	}, jobq.HandlerOptions{Timeout: 20 * time.Millisecond})
	if _, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "slow", nil, jobq.MaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, fastConfig())
	eventually(t, settle, "the timed-out job to fail", func() bool { return len(failedJobs(t, b)) == 1 })
	if e := failedJobs(t, b)[0].Error; !strings.Contains(e, "deadline exceeded") {
		t.Fatalf("error %q, want a deadline", e)
	}
}

// TestWorkerShutdown: in-flight jobs finish, nothing new is claimed; past
// the shutdown timeout the handler is cancelled and the job released with
// its attempt un-counted.
func TestWorkerShutdown(t *testing.T) {
	t.Parallel()
	t.Run("in-flight job finishes and nothing new is claimed", func(t *testing.T) {
		t.Parallel()
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		started, finish := make(chan int64, 10), make(chan struct{})
		reg.HandleFunc("job", func(ctx context.Context, j *jobq.Job) error {
			started <- j.ID
			<-finish
			return nil
		})
		c := mustClient(t, b, jobq.ClientConfig{})
		first, _ := c.Enqueue(context.Background(), "job", nil)
		cfg := fastConfig()
		cfg.Concurrency = 1
		w, err := jobq.NewWorker(b, reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx) }()
		<-started
		second, _ := c.Enqueue(context.Background(), "job", nil)
		cancel() // before the in-flight job frees its slot
		close(finish)
		if err := <-ran; err != nil {
			t.Fatalf("worker run: %v", err)
		}
		if !jobGone(b, first) {
			t.Fatal("in-flight job was not completed before the worker stopped")
		}
		row, err := b.JobGet(context.Background(), second)
		if err != nil || row.Status != backend.StatePending || row.Attempts != 0 {
			t.Fatalf("second job = %+v, %v; want pending and never claimed", row, err)
		}
	})
	t.Run("past the timeout the job is cancelled and released", func(t *testing.T) {
		t.Parallel()
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		started := make(chan struct{}, 1)
		var cause atomic.Value
		reg.HandleFunc("stuck", func(ctx context.Context, j *jobq.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			cause.Store(context.Cause(ctx).Error())
			return ctx.Err()
		})
		id, _ := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "stuck", nil)
		cfg := fastConfig()
		cfg.ShutdownTimeout = 50 * time.Millisecond
		stop := startWorker(t, b, reg, cfg)
		<-started
		stop()
		row, err := b.JobGet(context.Background(), id)
		if err != nil || row.Status != backend.StatePending || row.Attempts != 0 {
			t.Fatalf("job after shutdown = %+v, %v; want pending with the attempt un-counted", row, err)
		}
		if c, _ := cause.Load().(string); c != "worker shutting down" {
			t.Fatalf("handler context cause %q, want the shutdown", c)
		}
	})
}

// TestWorkerConcurrencyBound: never more handlers at once than Concurrency,
// and every job runs exactly once.
func TestWorkerConcurrencyBound(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var running, peak atomic.Int32
	var mu sync.Mutex
	seen := map[int64]int{}
	reg.HandleFunc("n", func(ctx context.Context, j *jobq.Job) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		mu.Lock()
		seen[j.ID]++
		mu.Unlock()
		return nil
	})
	specs := make([]jobq.JobSpec, 300)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "n"}
	}
	if _, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Concurrency = 7
	stop := startWorker(t, b, reg, cfg)
	eventually(t, settle, "all jobs to finish", func() bool {
		s, _ := b.QueueStats(context.Background())
		return len(s) == 0
	})
	stop()
	if p := peak.Load(); p > 7 {
		t.Fatalf("%d handlers ran at once, Concurrency is 7", p)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %d ran %d times", id, n)
		}
	}
	if len(seen) != 300 {
		t.Fatalf("%d jobs ran, want 300", len(seen))
	}
}

func TestNewWorkerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	for name, cfg := range map[string]jobq.WorkerConfig{
		"negative concurrency": {Concurrency: -1},
		"bad queue":            {Queues: []string{"no spaces"}},
		"heartbeat >= lease":   {Lease: time.Second, HeartbeatInterval: time.Second},
		"negative timeout":     {JobTimeout: -time.Second},
		"jitter above 1":       {Retry: jobq.RetryPolicy{Jitter: 2}},
	} {
		if _, err := jobq.NewWorker(b, reg, cfg); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
}
