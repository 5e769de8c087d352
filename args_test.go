package jobq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/proctest"
)

// thumbnail names its own job type.
type thumbnail struct {
	Image string `json:"image"`
}

func (thumbnail) Kind() string { return "thumbnail" }

// TestArgs: HandleArgs and EnqueueArgs take the type from Kind, and the
// string API refuses a type that contradicts the payload's.
func TestArgs(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var got []string
	jobq.HandleArgs(reg, func(_ context.Context, a thumbnail) error {
		got = append(got, a.Image)
		return nil
	})
	if types := reg.Types(); len(types) != 1 || types[0] != "thumbnail" {
		t.Fatalf("registered types %v, want [thumbnail]", types)
	}
	client := mustClient(t, b, jobq.ClientConfig{})
	ctx := t.Context()
	id, err := client.EnqueueArgs(ctx, thumbnail{Image: "cat.png"})
	if err != nil {
		t.Fatal(err)
	}
	if row, err := b.JobGet(ctx, id); err != nil || row.Type != "thumbnail" || string(row.Payload) != `{"image":"cat.png"}` {
		t.Fatalf("stored %+v, %v", row, err)
	}
	// A batch may leave Type empty when the payload names it.
	if _, err := client.EnqueueMany(ctx, []jobq.JobSpec{{Payload: thumbnail{Image: "dog.png"}}}); err != nil {
		t.Fatal(err)
	}
	// The string API with a type the payload contradicts writes nothing.
	_, err = client.Enqueue(ctx, "thumbnails", thumbnail{Image: "typo.png"})
	var ie *backend.InputError
	if !errors.Is(err, jobq.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "type" || !strings.Contains(err.Error(), `kind "thumbnail"`) {
		t.Fatalf("enqueue as thumbnails: %v, want a refusal naming the payload's kind", err)
	}
	w, err := jobq.NewWorker(b, reg, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := w.RunOne(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "cat.png,dog.png" {
		t.Fatalf("handled %v, want cat.png and dog.png only", got)
	}

	// Registering a payload type under another name is a start-up panic.
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), `kind "thumbnail"`) {
			t.Fatalf("Handle under another type: %v, want a panic naming the kind", p)
		}
	}()
	jobq.Handle(jobq.NewRegistry(), "thumbs", func(context.Context, thumbnail) error { return nil })
}

// TestTypeMaxAttemptsHolds: a type's declared MaxAttempts applies to a
// job enqueued without the registry (as jobq enqueue and the HTTP API
// enqueue) with the client's default of 3, with one warning; a client
// with the registry stores it and refuses a contradicting one; the type's
// Timeout and Retry apply to such a job too.
func TestTypeMaxAttemptsHolds(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
		<-ctx.Done() // always runs into the type's timeout
		return ctx.Err()
	}, jobq.HandlerOptions{MaxAttempts: 5, Timeout: 20 * time.Millisecond, Retry: jobq.RetryPolicy{Base: time.Second, Max: time.Second, NoJitter: true}})
	ctx := t.Context()
	plain := mustClient(t, b, jobq.ClientConfig{}) // no registry: stores 3
	id, err := plain.Enqueue(ctx, "flaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &proctest.Buffer{}
	cfg := fastConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for attempt := 1; ; attempt++ {
		ev, ok, err := w.RunOne(ctx)
		if err != nil || !ok {
			t.Fatalf("attempt %d: %v %v", attempt, ok, err)
		}
		if ev.Job.MaxAttempts != 5 || !errors.Is(ev.Err, context.DeadlineExceeded) {
			t.Fatalf("attempt %d: the handler saw MaxAttempts %d, error %v; want 5 and the type's timeout", attempt, ev.Job.MaxAttempts, ev.Err)
		}
		kinds = append(kinds, ev.Kind.String())
		if ev.Kind != jobq.EventRetry {
			break
		}
		if ev.RetryDelay != time.Second {
			t.Fatalf("attempt %d: retry delay %s, want the type's 1s", attempt, ev.RetryDelay)
		}
		clock.Advance(time.Second)
	}
	if len(kinds) != 5 || kinds[4] != jobq.EventFailed.String() {
		t.Fatalf("attempts %v, want 4 retries then failed", kinds)
	}
	fj, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(fj) != 1 || fj[0].JobID != id || fj[0].Attempts != 5 {
		t.Fatalf("failed list %+v, %v: want job %d after 5 attempts", fj, err, id)
	}
	if n := strings.Count(logs.String(), "another attempt limit than its type declares"); n != 1 {
		t.Fatalf("warned %d times about the stored limit, want once:\n%s", n, logs.String())
	}

	withReg := mustClient(t, b, jobq.ClientConfig{Registry: reg})
	id, err = withReg.Enqueue(ctx, "flaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	if row, err := b.JobGet(ctx, id); err != nil || row.MaxAttempts != 5 {
		t.Fatalf("stored through the registry: %+v, %v; want MaxAttempts 5", row, err)
	}
	if _, err := withReg.Enqueue(ctx, "flaky", nil, jobq.MaxAttempts(2)); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "contradicts the 5") {
		t.Fatalf("a job's own MaxAttempts 2 against the type's 5: %v, want refused", err)
	}
	if _, err := withReg.Enqueue(ctx, "flaky", nil, jobq.MaxAttempts(5)); err != nil {
		t.Fatalf("a job's own MaxAttempts equal to the type's: %v", err)
	}
}

// thumbnailPtr names its own type on a pointer receiver that reads the
// value, so calling it on a nil pointer dereferences nil too.
type thumbnailPtr struct {
	Kinds string
}

func (t *thumbnailPtr) Kind() string { return t.Kinds }

// TestEnqueueArgsNilPointer: a nil pointer given to EnqueueArgs, whose
// Kind cannot be called (a value receiver, or a pointer receiver that
// reads the value), is refused as invalid input, without a panic and
// without writing a job, as a nil Args is.
func TestEnqueueArgsNilPointer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args jobq.Args
	}{
		{"nil interface", nil},
		{"nil pointer, value receiver", (*thumbnail)(nil)},
		{"nil pointer, pointer receiver", (*thumbnailPtr)(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newMemory(t, nil)
			client := mustClient(t, b, jobq.ClientConfig{})
			ctx := t.Context()
			var (
				id  int64
				err error
			)
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("EnqueueArgs(%#v) panicked: %v", tc.args, p)
					}
				}()
				id, err = client.EnqueueArgs(ctx, tc.args)
			}()
			var ie *backend.InputError
			if !errors.Is(err, jobq.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "type" || id != 0 {
				t.Fatalf("EnqueueArgs(%#v) = %d, %v; want an invalid-input error on the type", tc.args, id, err)
			}
			if tc.args != nil && !strings.Contains(err.Error(), "non-nil pointer") {
				t.Fatalf("EnqueueArgs(%#v): %v; want the error to say to pass the value or a non-nil pointer", tc.args, err)
			}
			// Workflow.Add, the other entry point that takes an Args,
			// refuses it the same way at enqueue.
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Workflow.Add(%#v) panicked: %v", tc.args, p)
					}
				}()
				_, err = client.EnqueueWorkflow(ctx, jobq.NewWorkflow("w").Add("a", tc.args))
			}()
			if !errors.Is(err, jobq.ErrInvalidInput) {
				t.Fatalf("EnqueueWorkflow with Add(%#v): %v; want an invalid-input error", tc.args, err)
			}
			if stats, err := b.QueueStats(ctx); err != nil || len(stats) != 0 {
				t.Fatalf("queue stats after the refusals: %+v, %v; want no job stored", stats, err)
			}
		})
	}
}
