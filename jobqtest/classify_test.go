package jobqtest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/jobqtest"
)

// TestNotWired: a type nothing touched is not wired, whatever happened to
// other types.
func TestNotWired(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		if c := rec.Classify("thumbnail"); c != jobqtest.NotWired {
			t.Fatalf("fresh recorder: %s, want not wired", c)
		}
		client := rec.NewClient(t, jobq.ClientConfig{})
		if _, err := client.Enqueue(t.Context(), "email", nil); err != nil {
			t.Fatal(err)
		}
		client.Skip(t.Context(), "audit", "not configured")
		rec.AssertClass(t, "thumbnail", jobqtest.NotWired)
		rec.AssertClass(t, "email", jobqtest.Deferred)
		rec.AssertClass(t, "audit", jobqtest.Skipped)
	})
}

// TestRanInline: on the sync backend the handler runs inside the enqueue,
// so the type ran, even when the handler failed; nothing is stored.
func TestRanInline(t *testing.T) {
	rec := jobqtest.NewRecorder(inline.New())
	reg := jobq.NewRegistry()
	reg.HandleFunc("thumbnail", func(ctx context.Context, j *jobq.Job) error { return nil })
	reg.HandleFunc("broken", func(ctx context.Context, j *jobq.Job) error { return errors.New("boom") })
	client := rec.NewClient(t, jobq.ClientConfig{Registry: reg})
	if _, err := client.Enqueue(t.Context(), "thumbnail", map[string]string{"image": "a.png"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(t.Context(), "broken", nil); err == nil {
		t.Fatal("enqueue of a failing handler on sync: no error")
	}
	for _, typ := range []string{"thumbnail", "broken"} {
		o := rec.Observe(typ)
		if o.Class != jobqtest.Ran || len(o.Runs) != 1 || !o.Runs[0].Inline || o.Runs[0].Attempt != 1 {
			t.Fatalf("%s", o)
		}
	}
	rec.AssertEnqueued(t, "thumbnail", jobqtest.PartialJSON(`{"image":"a.png"}`))
	rec.AssertNotEnqueued(t, "broken") // its enqueue returned the handler's error
	if as := rec.RunQueue(t, reg, jobq.WorkerConfig{}); len(as) != 0 {
		t.Fatalf("RunQueue on sync ran %d attempts, want none: %s", len(as), as)
	}
}

// TestDeferredThenRan: a stored job is deferred until the test runs the
// queue; then the type ran.
func TestDeferredThenRan(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		id, err := client.Enqueue(t.Context(), "thumbnail", nil, jobq.Queue("media"))
		if err != nil {
			t.Fatal(err)
		}
		o := rec.Observe("thumbnail")
		if o.Class != jobqtest.Deferred || len(o.Enqueues) != 1 || o.Enqueues[0].ID != id || o.Reached != 1 || len(o.Runs) != 0 {
			t.Fatalf("after enqueue: %s", o)
		}
		as := rec.RunQueue(t, noop("thumbnail"), jobq.WorkerConfig{}) // queue "media" found by the recorder
		if len(as) != 1 || as[0].JobID != id || as[0].State != jobqtest.StateDone || as[0].Queue != "media" {
			t.Fatalf("attempts: %s", as)
		}
		o = rec.Observe("thumbnail")
		if o.Class != jobqtest.Ran || len(o.Runs) != 1 || o.Runs[0].JobID != id || o.Runs[0].Inline {
			t.Fatalf("after the queue ran: %s", o)
		}
	})
}

// TestSkipped: each way a request reaches the enqueue point and stores
// nothing reads as skipped.
func TestSkipped(t *testing.T) {
	refuse := jobq.ClientHooks{BeforeEnqueue: func(ctx context.Context, job *jobq.EnqueueInfo) error {
		if job.Type == "refused" {
			return errors.New("tenant over quota")
		}
		return nil
	}}
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{Hooks: []jobq.ClientHooks{refuse}})
		// A job from an earlier request holds the unique key.
		if _, err := client.Enqueue(ctx, "dup", nil, jobq.UniqueKey("k")); err != nil {
			t.Fatal(err)
		}
		rec.Reset()

		if _, err := client.Enqueue(ctx, "dup", nil, jobq.UniqueKey("k")); !errors.Is(err, jobq.ErrDuplicate) {
			t.Fatalf("duplicate enqueue: %v", err)
		}
		if _, err := client.Enqueue(ctx, "refused", nil); err == nil {
			t.Fatal("refusing hook: no error")
		}
		if _, err := client.Enqueue(ctx, "badqueue", nil, jobq.Queue("no spaces allowed")); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Fatalf("bad queue: %v", err)
		}
		client.Skip(ctx, "small", "image already small")
		rec.MarkSkipped("marked", "", "feature flag off")

		for typ, reason := range map[string]string{
			"dup": "duplicate unique key", "refused": "tenant over quota", "badqueue": "refused before the backend",
			"small": "image already small", "marked": "feature flag off",
		} {
			o := rec.Observe(typ)
			if o.Class != jobqtest.Skipped || len(o.Skips) != 1 || !strings.Contains(o.Skips[0].Reason, reason) {
				t.Errorf("%s\nwant skipped once, reason containing %q", o, reason)
			}
		}
		// Nothing of these was stored: the queue has nothing to run.
		if as := rec.RunQueue(t, noop("dup", "refused", "badqueue", "small", "marked"), jobq.WorkerConfig{}); len(as) != 1 || as[0].Type != "dup" {
			t.Fatalf("queue ran %s; want only the earlier request's dup job", as)
		}
	})
}

// TestSkippedNeedsClientHooks: without the recorder's client hooks a
// refusal before the backend is invisible (documented), while a duplicate,
// which the backend answers, is still seen.
func TestSkippedNeedsClientHooks(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client, err := jobq.NewClient(rec.Backend(), jobq.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		client.Enqueue(ctx, "dup", nil, jobq.UniqueKey("k"))
		rec.Reset()
		client.Enqueue(ctx, "dup", nil, jobq.UniqueKey("k"))
		client.Enqueue(ctx, "badqueue", nil, jobq.Queue("no spaces allowed"))
		client.Skip(ctx, "small", "why")
		rec.AssertClass(t, "dup", jobqtest.Skipped)
		rec.AssertClass(t, "badqueue", jobqtest.NotWired)
		rec.AssertClass(t, "small", jobqtest.NotWired)
	})
}

// TestDecisionOrder: when several classes apply, ran beats deferred beats
// skipped.
func TestDecisionOrder(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		mustEnqueue := func(typ string, opts ...jobq.EnqueueOption) {
			t.Helper()
			if _, err := client.Enqueue(ctx, typ, nil, opts...); err != nil {
				t.Fatal(err)
			}
		}
		// ran + deferred (+ skipped): one job runs, one stays stored.
		mustEnqueue("both", jobq.Queue("now"))
		mustEnqueue("both", jobq.Queue("later"), jobq.UniqueKey("u"))
		client.Enqueue(ctx, "both", nil, jobq.Queue("later"), jobq.UniqueKey("u")) // duplicate
		// deferred + skipped: one stored, one skipped.
		mustEnqueue("half")
		client.Skip(ctx, "half", "second image skipped")
		rec.AssertClass(t, "both", jobqtest.Deferred)

		as := rec.RunQueue(t, noop("both", "half"), jobq.WorkerConfig{Queues: []string{"now"}})
		if len(as) != 1 || as[0].Type != "both" || as[0].Queue != "now" {
			t.Fatalf("ran %s, want the one job on queue now", as)
		}
		if o := rec.Observe("both"); o.Class != jobqtest.Ran || len(o.Skips) != 1 {
			t.Fatalf("ran, stored and skipped: %s; want ran", o)
		}
		rec.AssertClass(t, "half", jobqtest.Deferred)
	})
	t.Run("sync", func(t *testing.T) {
		// ran + skipped: one ran inline, another was skipped.
		rec := jobqtest.NewRecorder(inline.New())
		client := rec.NewClient(t, jobq.ClientConfig{Registry: noop("thumb")})
		client.Skip(t.Context(), "thumb", "first image too small")
		if _, err := client.Enqueue(t.Context(), "thumb", nil); err != nil {
			t.Fatal(err)
		}
		rec.AssertClass(t, "thumb", jobqtest.Ran)
	})
}

// TestReset: a reset recorder forgets the earlier request but the backend
// keeps its jobs.
func TestReset(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		if _, err := client.Enqueue(t.Context(), "thumbnail", nil); err != nil {
			t.Fatal(err)
		}
		rec.Reset()
		rec.AssertClass(t, "thumbnail", jobqtest.NotWired)
		rec.AssertNotEnqueued(t, "thumbnail")
		as := rec.RunQueue(t, noop("thumbnail"), jobq.WorkerConfig{})
		if len(as) != 1 {
			t.Fatalf("attempts %s, want the earlier request's job", as)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
	})
}

// TestAssertClassMessage: a wrong class fails with what was recorded.
func TestAssertClassMessage(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		client.Enqueue(t.Context(), "thumbnail", map[string]int{"w": 64})
		msg := capture(t, func(tb testing.TB) { rec.AssertClass(tb, "thumbnail", jobqtest.Ran) })
		for _, want := range []string{`"thumbnail" was deferred, want ran`, `{"w":64}`, "stored as job"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %q", msg, want)
			}
		}
		if msg := capture(t, func(tb testing.TB) { rec.AssertClass(tb, "thumbnail", jobqtest.Deferred) }); msg != "" {
			t.Errorf("right class reported %q", msg)
		}
	})
}

// TestSkipReasonAsGiven: a skip reason, from MarkSkipped or Client.Skip,
// reads back exactly as it was given, with nothing added before it.
func TestSkipReasonAsGiven(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		rec.MarkSkipped("marked", "", "feature flag off")
		client.Skip(t.Context(), "small", "image already small", jobq.Queue("media"))
		for typ, want := range map[string]string{"marked": "feature flag off", "small": "image already small"} {
			o := rec.Observe(typ)
			if len(o.Skips) != 1 || o.Skips[0].Reason != want {
				t.Errorf("%s\nwant one skip with reason exactly %q", o, want)
				continue
			}
			if s := o.String(); !strings.HasSuffix(s, ": "+want) || strings.Contains(s, "skipped: "+want) {
				t.Errorf("Observation.String() = %q; want the reason %q as given", s, want)
			}
		}
	})
}

// TestNoHandlerIsNotWired: a job type with no handler at all never counts
// as ran, though the sync backend made an attempt of it inside the
// enqueue, or a worker claimed it and gave it back: no handler started,
// so the part is not wired.
func TestNoHandlerIsNotWired(t *testing.T) {
	t.Run("sync", func(t *testing.T) {
		rec := jobqtest.NewRecorder(inline.New())
		client := rec.NewClient(t, jobq.ClientConfig{Registry: noop("thumbnail")})
		if _, err := client.Enqueue(t.Context(), "orphan", nil); err == nil || !strings.Contains(err.Error(), "no handler registered") {
			t.Fatalf("enqueue of a type without a handler on sync: %v", err)
		}
		if _, err := client.Enqueue(t.Context(), "thumbnail", nil); err != nil {
			t.Fatal(err)
		}
		o := rec.Observe("orphan")
		if o.Class != jobqtest.NotWired || len(o.Runs) != 0 {
			t.Errorf("%s\nwant not wired, no runs", o)
		}
		if len(o.Unhandled) != 1 || !o.Unhandled[0].Inline || !strings.Contains(o.String(), "no handler registered: job") {
			t.Errorf("%s\nwant the inline attempt listed as unhandled", o)
		}
		if runs := rec.Runs(); len(runs) != 1 || runs[0].Type != "thumbnail" {
			t.Errorf("Runs() = %v, want only the thumbnail's", runs)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
	})
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{MaxAttempts: 3})
		for _, typ := range []string{"orphan", "thumbnail"} {
			if _, err := client.Enqueue(t.Context(), typ, nil); err != nil {
				t.Fatal(err)
			}
		}
		rec.AssertClass(t, "orphan", jobqtest.Deferred) // a worker elsewhere may know it
		// Drained without its handler, the job is given back untouched,
		// once: it stays pending, none of its attempts spent.
		as := rec.RunQueue(t, noop("thumbnail"), jobq.WorkerConfig{})
		u := as.OfType("orphan")
		if len(u) != 1 || u[0].State != jobqtest.StateDeferred || !errors.Is(u[0].Err, jobq.ErrNoHandler) {
			t.Fatalf("attempts of the type without a handler:\n%s", u)
		}
		if n := len(failedJobs(t, b)); n != 0 {
			t.Fatalf("%d failed jobs, want none: a worker without the handler fails nothing", n)
		}
		if o := rec.Observe("orphan"); o.Class != jobqtest.NotWired || len(o.Runs) != 0 || len(o.Unhandled) != 1 {
			t.Errorf("%s\nwant not wired, no runs, 1 unhandled attempt", o)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
		// A worker with the handler runs it, on its first attempt, once
		// it is due (a second at most after it was given back).
		var as2 jobqtest.Attempts
		deadline := time.Now().Add(5 * time.Second)
		for len(as2) == 0 && time.Now().Before(deadline) {
			as2 = rec.RunQueue(t, noop("orphan"), jobq.WorkerConfig{})
			if len(as2) == 0 {
				time.Sleep(50 * time.Millisecond) //nolint:forbidigo // the job is due after the backend's own delay
			}
		}
		if len(as2) != 1 || as2[0].State != jobqtest.StateDone || as2[0].Attempt != 1 {
			t.Fatalf("with the handler: %s; want attempt 1 done", as2)
		}
		if o := rec.Observe("orphan"); o.Class != jobqtest.Ran || len(o.Runs) != 1 || len(o.Unhandled) != 1 {
			t.Errorf("%s\nwant ran: attempt 1 by the worker with the handler, beside the 1 unhandled", o)
		}
	})
	t.Run("worker", func(t *testing.T) {
		b := memory.New(memory.Options{})
		t.Cleanup(func() { b.Close() })
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		id, err := client.Enqueue(t.Context(), "orphan", nil, jobq.MaxAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		w, err := jobq.NewWorker(rec.Backend(), noop("thumbnail"), jobq.WorkerConfig{
			PollInterval: 10 * time.Millisecond, Hooks: []jobq.WorkerHooks{rec.WorkerHooks()},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		runUntil(t, w, func() bool { return len(rec.Observe("orphan").Unhandled) > 0 })
		if n := len(failedJobs(t, b)); n != 0 {
			t.Fatalf("%d failed jobs, want none: the job of 1 attempt is given back, not failed", n)
		}
		if j, err := b.JobGet(t.Context(), id); err != nil || j.Status != backend.StatePending || j.Attempts != 0 {
			t.Fatalf("the job without a handler: %+v, %v; want pending, 0 attempts", j, err)
		}
		if o := rec.Observe("orphan"); o.Class != jobqtest.NotWired || len(o.Runs) != 0 || len(o.Unhandled) != 1 {
			t.Errorf("%s\nwant not wired, no runs, 1 unhandled attempt", o)
		}
	})
}

// TestNamedParts: any named part, not only a job type, is recorded as ran
// (Ran: the controller's own "save" step) or placed on the request's path
// (OnPath), and classified in the same order as a job type: ran, deferred,
// skipped, not wired.
func TestNamedParts(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		rec.OnPath("save", "thumbnail", "validate")
		rec.Ran("save")
		rec.Ran("log") // called, though never placed on the path
		rec.Ran("log")
		rec.Ran("both")
		for _, typ := range []string{"thumbnail", "both"} {
			if _, err := client.Enqueue(ctx, typ, nil); err != nil {
				t.Fatal(err)
			}
		}
		for part, want := range map[string]jobqtest.Class{
			"save":      jobqtest.Ran,      // on the path and called
			"log":       jobqtest.Ran,      // called
			"both":      jobqtest.Ran,      // called, and a job of it stored: ran wins
			"thumbnail": jobqtest.Deferred, // on the path, stored
			"validate":  jobqtest.Skipped,  // on the path, neither called nor deferred
			"cache":     jobqtest.NotWired, // not on the path
		} {
			rec.AssertClass(t, part, want)
		}
		o := rec.Observe("save")
		if len(o.Runs) != 1 || !o.Runs[0].Step || o.Runs[0].JobID != 0 || o.Reached != 1 {
			t.Errorf("%s\nwant one step run, on the path once", o)
		}
		if s := o.String(); !strings.Contains(s, "called within the request") {
			t.Errorf("Observation.String() = %q, want the step described as called within the request", s)
		}
		if o := rec.Observe("log"); len(o.Runs) != 2 || o.Reached != 0 {
			t.Errorf("%s\nwant two step runs, never on the path", o)
		}
		if o := rec.Observe("thumbnail"); o.Reached != 2 {
			t.Errorf("%s\nwant reached twice: OnPath and the client's enqueue", o)
		}
		steps := 0
		for _, run := range rec.Runs() {
			if run.Step {
				steps++
			}
		}
		if steps != 4 {
			t.Errorf("Runs() = %v, want the 4 step runs", rec.Runs())
		}
		// The stored job runs as before; the steps are no jobs.
		if as := rec.RunQueue(t, noop("thumbnail", "both"), jobq.WorkerConfig{}); len(as) != 2 {
			t.Fatalf("attempts %s, want the two stored jobs", as)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
		rec.Reset()
		for _, part := range []string{"save", "log", "validate"} {
			rec.AssertClass(t, part, jobqtest.NotWired)
		}
	})
}
