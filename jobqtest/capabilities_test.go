package jobqtest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/jobqtest"
)

// TestRecorderKeepsCapabilities: what jobq does through an optional
// capability of the wrapped backend works the same through a recorder:
// cancelling and listing jobs, keeping finished ones, pausing a queue,
// listing schedules, migrating. (Before the recorder unwrapped, Cancel and
// the listings said ErrNotSupported.)
func TestRecorderKeepsCapabilities(t *testing.T) {
	eachStoring(t, func(t *testing.T, inner backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(inner)
		client := rec.NewClient(t, jobq.ClientConfig{})
		in := jobq.NewInspector(rec.Backend())

		keep, err := client.Enqueue(ctx, "keep", map[string]int{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		drop, err := client.Enqueue(ctx, "drop", map[string]int{"n": 2})
		if err != nil {
			t.Fatal(err)
		}
		pending, err := in.JobsPage(ctx, jobq.StatePending, jobq.JobFilter{}, 0, 0)
		if err != nil {
			t.Fatalf("JobsPage through the recorder: %v", err)
		}
		if len(pending) != 2 || pending[0].ID != drop || pending[1].ID != keep {
			t.Fatalf("pending jobs through the recorder: %v, want [%d %d]", ids(pending), drop, keep)
		}

		res, err := in.Cancel(ctx, drop)
		if err != nil {
			t.Fatalf("Cancel through the recorder: %v", err)
		}
		if len(res) != 1 || res[0].ID != drop || res[0].Outcome != jobq.CancelCancelled {
			t.Fatalf("Cancel(%d) through the recorder = %+v, want cancelled", drop, res)
		}
		if row, err := inner.JobGet(ctx, drop); err == nil {
			t.Fatalf("cancelled job %d still live in the wrapped backend: %+v", drop, row)
		}
		cancelled, err := in.FinishedPage(ctx, jobq.StateCancelled, jobq.JobFilter{}, 0, 0)
		if err != nil || len(cancelled) != 1 || cancelled[0].ID != drop {
			t.Fatalf("cancelled jobs through the recorder: %v (err %v), want [%d]", len(cancelled), err, drop)
		}

		// Retention asks the worker for a Retainer: the job it runs is
		// kept as completed.
		as := rec.RunQueue(t, noop("keep", "drop"), jobq.WorkerConfig{Retention: jobq.Retention{Completed: time.Hour}})
		if len(as) != 1 || as[0].JobID != keep || as[0].State != jobqtest.StateDone {
			t.Fatalf("RunQueue with retention ran %v, want job %d done", as, keep)
		}
		completed, err := in.FinishedPage(ctx, jobq.StateCompleted, jobq.JobFilter{}, 0, 0)
		if err != nil || len(completed) != 1 || completed[0].ID != keep {
			t.Fatalf("completed jobs through the recorder: %d (err %v), want [%d]", len(completed), err, keep)
		}

		if err := in.PauseQueue(ctx, "mail"); err != nil {
			t.Fatalf("PauseQueue through the recorder: %v", err)
		}
		qc, ok := backend.As[backend.QueueController](inner)
		if !ok {
			t.Fatal("the wrapped backend has no queue control")
		}
		settings, err := qc.QueueSettingsList(ctx)
		if err != nil || len(settings) != 1 || settings[0].Queue != "mail" || !settings[0].Paused {
			t.Fatalf("the wrapped backend's queue settings after PauseQueue: %+v (err %v), want mail paused", settings, err)
		}

		// The schedule is registered by a worker on the recorder (NewWorker
		// refuses schedules where it finds no schedule store).
		if _, err := jobq.NewWorker(rec.Backend(), noop("report"), jobq.WorkerConfig{
			Schedules: []jobq.Schedule{{Name: "nightly", Spec: "@daily", Type: "report"}},
		}); err != nil {
			t.Fatalf("worker with schedules on the recorder: %v", err)
		}
		store, ok := backend.As[backend.ScheduleStore](rec.Backend())
		if !ok {
			t.Fatal("no schedule store through the recorder")
		}
		if _, err := store.ScheduleUpsert(ctx, []backend.ScheduleDef{{Name: "nightly", Spec: "@daily", Queue: "default", Type: "report"}}); err != nil {
			t.Fatal(err)
		}
		scheds, err := in.Schedules(ctx)
		if err != nil || len(scheds) != 1 || scheds[0].Name != "nightly" {
			t.Fatalf("Schedules through the recorder: %+v (err %v), want nightly", scheds, err)
		}

		m, ok := backend.As[backend.Migrator](rec.Backend())
		_, innerHas := inner.(backend.Migrator)
		if ok != innerHas {
			t.Fatalf("Migrator through the recorder: %v, the wrapped backend: %v", ok, innerHas)
		}
		if ok {
			v, err := m.Migrate(ctx)
			if err != nil || v < 1 {
				t.Fatalf("Migrate through the recorder = %d, %v", v, err)
			}
		}
	})
}

func ids(rows []*jobq.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// TestRecorderWorkerCancel: a real Worker on a recorder finds the wrapped
// backend's Canceller, so a running job's handler is told of its cancel
// and the job ends cancelled.
func TestRecorderWorkerCancel(t *testing.T) {
	eachStoring(t, func(t *testing.T, inner backend.Backend) {
		rec := jobqtest.NewRecorder(inner)
		started := make(chan struct{}, 1)
		cause := make(chan error, 1)
		reg := jobq.NewRegistry()
		reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				cause <- context.Cause(ctx)
				return ctx.Err()
			case <-time.After(time.Minute): // a failure deadline, not a bound
				cause <- nil
				return nil
			}
		})
		id, err := rec.NewClient(t, jobq.ClientConfig{}).Enqueue(t.Context(), "slow", struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := jobq.NewWorker(rec.Backend(), reg, jobq.WorkerConfig{
			PollInterval: 10 * time.Millisecond, CancelPollInterval: 20 * time.Millisecond,
			ShutdownTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		select {
		case <-started:
		case <-time.After(time.Minute): // a failure deadline, not a bound
			t.Fatal("the worker did not start the job within a minute")
		}
		in := jobq.NewInspector(rec.Backend())
		res, err := in.Cancel(t.Context(), id)
		if err != nil || len(res) != 1 || res[0].Outcome != jobq.CancelRequested {
			t.Fatalf("Cancel(%d) of a running job through the recorder = %+v, %v; want requested", id, res, err)
		}
		if c := <-cause; !errors.Is(c, jobq.ErrJobCancelled) {
			t.Fatalf("the handler's context ended with %v, want ErrJobCancelled", c)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			fin, err := in.FinishedPage(t.Context(), jobq.StateCancelled, jobq.JobFilter{}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(fin) == 1 && fin[0].ID == id {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d not among the cancelled jobs 10s after its handler stopped", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestRecorderInlineRunsOfItsClient: the recorder hears of the sync
// backend's runs through its client hooks, so a client built later on the
// same backend (which takes over the backend's runner) neither hides the
// recorder's client's runs nor has its own jobs' runs recorded; its inserts
// through Backend() still are.
func TestRecorderInlineRunsOfItsClient(t *testing.T) {
	rec := jobqtest.NewRecorder(inline.New())
	reg := noop("mine", "theirs")
	client := rec.NewClient(t, jobq.ClientConfig{Registry: reg})
	plain, err := jobq.NewClient(rec.Backend(), jobq.ClientConfig{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(t.Context(), "mine", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Enqueue(t.Context(), "theirs", nil); err != nil {
		t.Fatal(err)
	}
	if o := rec.Observe("mine"); o.Class != jobqtest.Ran || len(o.Runs) != 1 || !o.Runs[0].Inline {
		t.Fatalf("%s\nwant ran inline once", o)
	}
	if o := rec.Observe("theirs"); len(o.Runs) != 0 || len(o.Enqueues) != 1 || !o.Enqueues[0].Inline {
		t.Fatalf("%s\nwant its insert recorded, no run: its client has no recorder hooks", o)
	}
}
