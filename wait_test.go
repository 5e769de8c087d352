package jobq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestWaitInProcess, on memory: a Wait blocked on a pending job returns
// when the job is cancelled (ErrJobCancelled, state cancelled); a job
// completed without retention is ErrJobGone; an ID below 1 is bad input;
// a Wait already waiting when the job completes returns its result.
func TestWaitInProcess(t *testing.T) {
	b := newMemory(t, nil)
	ctx := context.Background()
	c := mustClient(t, b, jobq.ClientConfig{})
	ins := jobq.NewInspector(b)

	id, err := c.Enqueue(ctx, "w.block", nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res jobq.WaitResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := c.Wait(ctx, id)
		got <- answer{res, err}
	}()
	if _, err := ins.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if !errors.Is(a.err, jobq.ErrJobCancelled) || a.res.State != jobq.StateCancelled || a.res.Error != backend.CancelledError {
			t.Fatalf("Wait on a cancelled job = %+v, %v; want cancelled, ErrJobCancelled", a.res, a.err)
		}
	case <-time.After(settle):
		t.Fatal("Wait did not return after the cancel")
	}

	if _, err := ins.Wait(ctx, 0); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("Wait(0): %v, want ErrInvalidInput", err)
	}

	reg := jobq.NewRegistry()
	reg.HandleFunc("w.ok", func(ctx context.Context, _ *jobq.Job) error { return jobq.SetResult(ctx, "fine") })
	kept, err := c.Enqueue(ctx, "w.ok", nil, jobq.Queue("kept"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		res, err := c.Wait(ctx, kept)
		got <- answer{res, err}
	}()
	cfg := fastConfig()
	cfg.Queues = []string{"kept"}
	cfg.Retention.Completed = time.Hour
	stop := startWorker(t, b, reg, cfg)
	a := <-got
	if a.err != nil || a.res.State != jobq.StateCompleted || string(a.res.Result) != `"fine"` {
		t.Fatalf("Wait on a kept job = %+v, %v; want completed with its result", a.res, a.err)
	}
	stop()

	dropped, err := c.Enqueue(ctx, "w.ok", nil, jobq.Queue("dropped"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = fastConfig()
	cfg.Queues = []string{"dropped"}
	startWorker(t, b, reg, cfg)
	if _, err := c.Wait(ctx, dropped); !errors.Is(err, jobq.ErrJobGone) {
		t.Fatalf("Wait on a job completed without retention: %v, want ErrJobGone", err)
	}
}
