package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// testWorker runs the real jobq runtime over the backend: the lifecycle as a
// user sees it, which a backend can still get wrong through the calls the
// worker makes (batched outcomes, releases on shutdown, notifications).
func testWorker(t *testing.T, h Harness) {
	parallel(t, h, "ExactAttempts", func(t *testing.T, b backend.Backend) {
		var runs atomic.Int32
		reg := jobq.NewRegistry()
		reg.HandleFunc("boom", func(ctx context.Context, j *jobq.Job) error {
			runs.Add(1)
			return fmt.Errorf("boom %d", j.Attempt)
		})
		id := enqueue(t, b, "boom", jobq.MaxAttempts(3))
		stop := runWorker(t, b, reg)
		eventually(t, waitLimit, "the job to fail", func() bool { return len(failedList(t, b, backend.FailedListParams{})) == 1 })
		stop()
		f := failedByJob(t, b, id)
		if runs.Load() != 3 || f.Attempts != 3 || f.Error != "boom 3" {
			t.Fatalf("ran %d times, failed row %+v; want 3 runs and one row with attempts 3, error \"boom 3\"", runs.Load(), f)
		}
		gone(t, b, id)
	})

	parallel(t, h, "RetryThenSucceed", func(t *testing.T, b backend.Backend) {
		var runs atomic.Int32
		reg := jobq.NewRegistry()
		reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
			runs.Add(1)
			if j.Attempt == 1 {
				return errors.New("flaky")
			}
			return nil
		})
		id := enqueue(t, b, "flaky")
		stop := runWorker(t, b, reg)
		eventually(t, waitLimit, "the job to finish", func() bool {
			_, err := b.JobGet(t.Context(), id)
			return errors.Is(err, backend.ErrNotFound)
		})
		stop()
		if runs.Load() != 2 || len(failedList(t, b, backend.FailedListParams{})) != 0 {
			t.Fatalf("ran %d times and left failed rows; want 2 runs and none", runs.Load())
		}
	})

	parallel(t, h, "PermanentError", func(t *testing.T, b backend.Backend) {
		var runs atomic.Int32
		reg := jobq.NewRegistry()
		reg.HandleFunc("bad", func(ctx context.Context, j *jobq.Job) error {
			runs.Add(1)
			return jobq.Permanent(errors.New("malformed"))
		})
		id := enqueue(t, b, "bad", jobq.MaxAttempts(5))
		stop := runWorker(t, b, reg)
		eventually(t, waitLimit, "the job to fail", func() bool { return len(failedList(t, b, backend.FailedListParams{})) == 1 })
		stop()
		if f := failedByJob(t, b, id); runs.Load() != 1 || f.Attempts != 1 || !strings.Contains(f.Error, "malformed") {
			t.Fatalf("ran %d times, failed row %+v; want one run", runs.Load(), f)
		}
	})

	parallel(t, h, "ShutdownReleases", func(t *testing.T, b backend.Backend) {
		started := make(chan struct{}, 1)
		reg := jobq.NewRegistry()
		reg.HandleFunc("stuck", func(ctx context.Context, j *jobq.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		id := enqueue(t, b, "stuck")
		stop := runWorker(t, b, reg)
		<-started
		stop()
		wantPendingNow(t, b, id, 0)
	})

	parallel(t, h, "ManyJobsEachOnce", func(t *testing.T, b backend.Backend) {
		var mu sync.Mutex
		seen := map[int64]int{}
		reg := jobq.NewRegistry()
		reg.HandleFunc("n", func(ctx context.Context, j *jobq.Job) error {
			mu.Lock()
			seen[j.ID]++
			mu.Unlock()
			return nil
		})
		const n = 500
		ps := make([]backend.InsertParams, n)
		for i := range ps {
			ps[i] = job("default", "n")
		}
		insert(t, b, ps...)
		stop := runWorker(t, b, reg)
		eventually(t, waitLimit, "all jobs to finish", func() bool { return len(stats(t, b)) == 0 })
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != n {
			t.Fatalf("%d jobs ran, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("job %d ran %d times", id, c)
			}
		}
	})
}

func enqueue(t *testing.T, b backend.Backend, typ string, opts ...jobq.EnqueueOption) int64 {
	t.Helper()
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	id, err := c.Enqueue(t.Context(), typ, nil, opts...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", typ, err)
	}
	return id
}

// runWorker runs a worker with instant retries and a short shutdown timeout
// until stop is called (or the test ends).
func runWorker(t *testing.T, b backend.Backend, reg *jobq.Registry) (stop func()) {
	t.Helper()
	return runWorkerPoll(t, b, reg, 10*time.Millisecond)
}

// runWorkerPoll is runWorker with the given poll interval.
func runWorkerPoll(t *testing.T, b backend.Backend, reg *jobq.Registry, poll time.Duration) (stop func()) {
	t.Helper()
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Concurrency:     8,
		PollInterval:    poll,
		Retry:           jobq.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		ShutdownTimeout: 100 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("new worker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
