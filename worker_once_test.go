package jobq_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestRunOne: one attempt runs in the caller's goroutine with the worker's
// hooks and retry policy, and its outcome is written before RunOne returns.
func TestRunOne(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
		if j.Attempt == 1 {
			return errors.New("first try fails")
		}
		return nil
	})
	var seen []string
	cfg := fastConfig()
	cfg.Retry = jobq.RetryPolicy{Base: time.Minute, Max: time.Hour, NoJitter: true}
	cfg.Hooks = []jobq.WorkerHooks{{
		Claimed:  func(e jobq.ClaimedEvent) { seen = append(seen, "claimed") },
		Started:  func(ctx context.Context, j *jobq.Job) { seen = append(seen, "started") },
		Finished: func(e jobq.Event) { seen = append(seen, "finished "+e.Kind.String()) },
		Written:  func(e jobq.Event) { seen = append(seen, "written "+e.Kind.String()) },
	}}
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ev, ok, err := w.RunOne(ctx); ok || err != nil || ev.Job != nil {
		t.Fatalf("empty queue: %+v, %v, %v", ev, ok, err)
	}
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(ctx, "flaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, ok, err := w.RunOne(ctx)
	if !ok || err != nil || ev.Kind != jobq.EventRetry || ev.RetryDelay != time.Minute || ev.Job.ID != id || ev.Job.Attempt != 1 {
		t.Fatalf("first attempt: %+v, %v, %v", ev, ok, err)
	}
	row, err := b.JobGet(ctx, id)
	if err != nil || row.Status != "pending" || !row.AvailableAt.Equal(clock.Now().Add(time.Minute)) || row.LastError != "first try fails" {
		t.Fatalf("after the retry: %+v, %v", row, err)
	}
	if _, ok, _ := w.RunOne(ctx); ok {
		t.Fatal("ran a job backing off")
	}
	clock.Advance(time.Minute)
	if ev, ok, err := w.RunOne(ctx); !ok || err != nil || ev.Kind != jobq.EventDone || ev.Job.Attempt != 2 {
		t.Fatalf("second attempt: %+v, %v, %v", ev, ok, err)
	}
	if !jobGone(b, id) {
		t.Fatal("done job still live")
	}
	// RunOne writes the outcome before it returns, so Written comes first.
	want := []string{"claimed", "started", "written retry", "finished retry", "claimed", "started", "written done", "finished done"}
	if len(seen) != len(want) {
		t.Fatalf("hooks %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("hooks %v, want %v", seen, want)
		}
	}
}

// TestRunOneCancelledWhileRunning: a job cancelled while its handler ran
// ends cancelled even when the handler returns nil without hearing of it,
// and RunOne and the hooks say so.
func TestRunOneCancelledWhileRunning(t *testing.T) {
	t.Parallel()
	b := newMemory(t, time.Now)
	insp := jobq.NewInspector(b)
	reg := jobq.NewRegistry()
	var id int64
	reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
		if res, err := insp.Cancel(ctx, j.ID); err != nil || res[0].Outcome != jobq.CancelRequested {
			t.Errorf("cancel from inside the handler: %+v, %v", res, err)
		}
		return nil // returns before any watcher could tell it
	})
	var finished, written []jobq.EventKind
	cfg := fastConfig()
	cfg.Hooks = []jobq.WorkerHooks{{
		Finished: func(e jobq.Event) { finished = append(finished, e.Kind) },
		Written:  func(e jobq.Event) { written = append(written, e.Kind) },
	}}
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if id, err = mustClient(t, b, jobq.ClientConfig{}).Enqueue(t.Context(), "slow", nil); err != nil {
		t.Fatal(err)
	}
	ev, ok, err := w.RunOne(t.Context())
	if !ok || err != nil || ev.Kind != jobq.EventCancelled {
		t.Fatalf("RunOne: %+v, %v, %v; want EventCancelled", ev, ok, err)
	}
	if len(finished) != 1 || finished[0] != jobq.EventCancelled {
		t.Errorf("Finished hooks heard %v, want [cancelled]", finished)
	}
	if len(written) != 1 || written[0] != jobq.EventCancelled {
		t.Errorf("Written hooks heard %v, want [cancelled]", written)
	}
	if !jobGone(b, id) {
		t.Error("the cancelled job is still live")
	}
}

// TestRunOneRefusedWhileRunning: RunOne and Run do not mix on one Worker.
func TestRunOneRefusedWhileRunning(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	w, err := jobq.NewWorker(b, jobq.NewRegistry(), fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, settle, "RunOne to be refused", func() bool {
		_, _, err := w.RunOne(context.Background())
		return err != nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.RunOne(context.Background()); err != nil {
		t.Fatalf("after Run returned: %v", err)
	}
}

// TestClientSkip: Skip reaches the Skipped hooks with the queue and
// metadata, stores nothing and runs no enqueue hook.
func TestClientSkip(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	var mu sync.Mutex
	var got []string
	c := mustClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{{
		BeforeEnqueue: func(ctx context.Context, job *jobq.EnqueueInfo) error {
			t.Error("BeforeEnqueue ran for a skip")
			return nil
		},
		Skipped: func(ctx context.Context, job jobq.EnqueueInfo, reason string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, job.Type+" "+job.Queue+" "+job.Metadata["why"]+" "+reason)
		},
	}}})
	c.Skip(context.Background(), "thumbnail", "image already small", jobq.Queue("media"), jobq.Metadata(map[string]string{"why": "size"}))
	if len(got) != 1 || got[0] != "thumbnail media size image already small" {
		t.Fatalf("Skipped hooks saw %q", got)
	}
	stats, err := b.QueueStats(context.Background())
	if err != nil || len(stats) != 0 {
		t.Fatalf("a skip stored something: %+v, %v", stats, err)
	}
}

// TestRunOneHandlerGoexit: a handler that calls runtime.Goexit ends
// RunOne's goroutine (as t.FailNow ends a test), but its attempt is still
// written, as a failure saying so, and the worker is not left busy.
func TestRunOneHandlerGoexit(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("exits", func(ctx context.Context, j *jobq.Job) error {
		runtime.Goexit()
		return nil
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "exits", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobq.NewWorker(b, reg, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan bool, 1)
	go func() {
		defer func() { returned <- false }()
		w.RunOne(context.Background())
		returned <- true
	}()
	if <-returned {
		t.Fatal("RunOne returned; want its goroutine ended by the handler's Goexit")
	}
	row, err := b.JobGet(context.Background(), id)
	if err != nil || row.Status != backend.StatePending || row.Attempts != 1 || !strings.Contains(row.LastError, "runtime.Goexit") {
		t.Fatalf("job = %+v, %v; want pending again after attempt 1, its error naming runtime.Goexit", row, err)
	}
	if w.Busy() != 0 {
		t.Fatalf("busy %d; want 0", w.Busy())
	}
}
