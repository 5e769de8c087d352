package jobq_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestRunRefusedWhileRunOneRuns: Run called while a RunOne's handler runs
// is refused, like RunOne while Run runs. A check of the flag that RunOne
// does not hold let Run start beside it, two claimers on one Worker.
func TestRunRefusedWhileRunOneRuns(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var w *jobq.Worker
	var runErr error
	reg.HandleFunc("probe", func(ctx context.Context, j *jobq.Job) error {
		// A cancelled context: a Run that starts returns at once, nil.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		runErr = w.Run(cctx)
		return nil
	})
	var err error
	if w, err = jobq.NewWorker(b, reg, fastConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(t.Context(), "probe", nil); err != nil {
		t.Fatal(err)
	}
	if ev, ok, err := w.RunOne(t.Context()); !ok || err != nil || ev.Kind != jobq.EventDone {
		t.Fatalf("RunOne: %+v, %v, %v", ev, ok, err)
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "already running") {
		t.Fatalf("Run inside RunOne's handler returned %v; want the already-running error", runErr)
	}
	// Released on return: Run works again (and returns at once).
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run after RunOne returned: %v", err)
	}
}

// TestWorkerHeldByOneCallAtATime: many goroutines calling RunOne and Run
// on one Worker never run two of its handlers at once (Run with
// Concurrency 1 runs one at a time itself): whichever call holds the
// worker excludes every other until it returns.
func TestWorkerHeldByOneCallAtATime(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var active atomic.Int32
	var overlaps, ran atomic.Int64
	reg.HandleFunc("n", func(ctx context.Context, j *jobq.Job) error {
		if active.Add(1) > 1 {
			overlaps.Add(1)
		}
		// Stay a while, without sleeping, so that another holder
		// would be caught here.
		for range 20 {
			runtime.Gosched()
		}
		active.Add(-1)
		ran.Add(1)
		return nil
	})
	cfg := fastConfig()
	cfg.Concurrency = 1
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := mustClient(t, b, jobq.ClientConfig{})
	specs := make([]jobq.JobSpec, 5000)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "n"}
	}
	if _, err := c.EnqueueMany(t.Context(), specs); err != nil {
		t.Fatal(err)
	}
	// RunOne's callers take turns with Run's: each Run waits for some
	// RunOnes to have held the worker since the last, so neither kind
	// starves the other.
	var ones, runs, refused atomic.Int64
	var onesDone atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ones.Load() < 400 {
				if _, _, err := w.RunOne(t.Context()); err != nil {
					refused.Add(1)
					runtime.Gosched()
					continue
				}
				ones.Add(1)
				runtime.Gosched()
			}
			onesDone.Store(true)
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 5 {
				for seen := ones.Load(); ones.Load() < seen+20 && !onesDone.Load(); {
					runtime.Gosched()
				}
				// Retry until this Run has the worker: the RunOnes give
				// it back between calls.
				for !onesDone.Load() {
					ctx, cancel := context.WithTimeout(t.Context(), 2*time.Millisecond)
					err := w.Run(ctx)
					cancel()
					if err == nil {
						runs.Add(1)
						break
					}
					refused.Add(1)
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("RunOne held it %d times, Run %d times, %d calls refused, %d jobs ran", ones.Load(), runs.Load(), refused.Load(), ran.Load())
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d handlers started while another call held the worker", n)
	}
	if ones.Load() == 0 || runs.Load() == 0 {
		t.Fatalf("RunOne held the worker %d times, Run %d times; want both", ones.Load(), runs.Load())
	}
}
