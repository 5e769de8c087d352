package jobq_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/internal/proctest"
	"github.com/jobq/jobq/internal/storetest"
)

// durableStores makes a fresh store of each durable backend, for the tests
// that run worker processes against one.
var durableStores = storetest.Durable

// everyStore is memory and the durable stores: the backends a test of the
// runtime across backends runs on.
var everyStore = append([]storetest.Store{{Name: "memory", URL: func(testing.TB) string { return "memory:" }}}, durableStores...)

// fakeClock is a settable clock for backends, so time-based behaviour is
// shown by moving the clock, not by sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fastConfig is a worker configuration for tests: quick polls, instant
// retries.
func fastConfig() jobq.WorkerConfig {
	return jobq.WorkerConfig{
		Concurrency:     4,
		PollInterval:    5 * time.Millisecond,
		Retry:           jobq.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		Lease:           30 * time.Second, // long: a loaded machine must not lose a claim; tests of rescue set their own
		SweepInterval:   50 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          quietLog,
	}
}

func newMemory(t *testing.T, now func() time.Time) backend.Backend {
	t.Helper()
	b := memory.New(memory.Options{Now: now})
	t.Cleanup(func() { b.Close() })
	return b
}

// startWorker runs a worker until the test ends (or stop is called) and
// checks that it returned nil.
func startWorker(t *testing.T, b backend.Backend, reg *jobq.Registry, cfg jobq.WorkerConfig) (stop func()) {
	t.Helper()
	w, err := jobq.NewWorker(b, reg, cfg)
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

// settle is the failure deadline of a wait for an event that takes
// milliseconds on a quiet machine (a job to end, a row to appear, a hook
// to fire). It is no bound on how fast the event comes, so it is
// generous: under -race, -cpu 1 and a CPU hog such events can take
// seconds, and a 5s deadline made the suite fail for a busy machine
// rather than a bug (issue 27).
const settle = time.Minute

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func mustClient(t *testing.T, b backend.Backend, cfg jobq.ClientConfig) *jobq.Client {
	t.Helper()
	c, err := jobq.NewClient(b, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func failedJobs(t *testing.T, b backend.Backend) []*backend.FailedJob {
	t.Helper()
	f, err := b.FailedList(context.Background(), backend.FailedListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("list failed: %v", err)
	}
	return f
}

func jobGone(b backend.Backend, id int64) bool {
	_, err := b.JobGet(context.Background(), id)
	return errors.Is(err, backend.ErrNotFound)
}

// logBuffer collects a logger's lines for a test to read.
type logBuffer struct{ proctest.Buffer }

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// jsonLines decodes each line of a JSON log (runLogged's) into a T.
func jsonLines[T any](t *testing.T, log string) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}

// runLogged runs a worker of cfg, logging JSON at debug level, until it
// has written outcomes attempts' outcomes and more (nil: nothing more)
// holds of its log, then stops it and returns the log.
func runLogged(t *testing.T, b backend.Backend, reg *jobq.Registry, cfg jobq.WorkerConfig, outcomes int64, more func(log string) bool) *logBuffer {
	t.Helper()
	var buf logBuffer
	var written atomic.Int64
	cfg.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Hooks = append(cfg.Hooks, jobq.WorkerHooks{Written: func(jobq.Event) { written.Add(1) }})
	stop := startWorker(t, b, reg, cfg)
	eventually(t, settle, fmt.Sprintf("%d outcomes written", outcomes), func() bool {
		return written.Load() == outcomes && (more == nil || more(buf.String()))
	})
	stop()
	return &buf
}

// childFailed is a worker process's exit code when its start-up failed
// with err while doing what: 3, said on stderr, unless its stop signal
// (ctx) came first. A loaded machine can start a process so slowly that
// the test is done and stops it while it is still opening its backend:
// that is a clean stop, and the test's own checks say whether the work
// it wanted was done.
func childFailed(ctx context.Context, what string, err error) int {
	if ctx.Err() != nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "child: %s: %v\n", what, err)
	return 3
}

// runChildWorker is the end of every worker process's main (the test
// binary re-executed): it makes a worker with cfg, calls ready (when not
// nil) once the worker is made, and runs it until ctx ends. It returns
// the process's exit code: 3 when the worker cannot be made or ready
// fails (see childFailed), 1 when Run fails, 0 after a clean stop.
func runChildWorker(ctx context.Context, b backend.Backend, reg *jobq.Registry, cfg jobq.WorkerConfig, ready func() error) int {
	w, err := jobq.NewWorker(b, reg, cfg)
	if err == nil && ready != nil {
		err = ready()
	}
	if err != nil {
		return childFailed(ctx, "start", err)
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}
