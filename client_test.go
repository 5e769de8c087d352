package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
)

func TestEnqueueRefusesBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{MaxPayloadBytes: 64})
	ctx := context.Background()
	cases := []struct {
		name, typ string
		payload   any
		opts      []jobq.EnqueueOption
		field     string
	}{
		{"empty type", "", nil, nil, "type"},
		{"queue with a space", "t", nil, []jobq.EnqueueOption{jobq.Queue("two words")}, "queue"},
		{"empty queue", "t", nil, []jobq.EnqueueOption{jobq.Queue("")}, "queue"},
		{"queue too long", "t", nil, []jobq.EnqueueOption{jobq.Queue(strings.Repeat("q", 129))}, "queue"},
		{"payload not JSON", "t", json.RawMessage(`{"a":`), nil, "payload"},
		{"payload over the limit", "t", map[string]string{"x": strings.Repeat("y", 100)}, nil, "payload"},
		{"payload that cannot marshal", "t", map[string]any{"f": func() {}}, nil, "payload"},
		{"priority out of range", "t", nil, []jobq.EnqueueOption{jobq.Priority(5000)}, "priority"},
		{"negative max attempts", "t", nil, []jobq.EnqueueOption{jobq.MaxAttempts(-1)}, "max attempts"},
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, tc.typ, tc.payload, tc.opts...)
		var in *backend.InputError
		if !errors.Is(err, jobq.ErrInvalidInput) || !errors.As(err, &in) || in.Field != tc.field {
			t.Errorf("%s: err = %v, want an invalid %s error", tc.name, err, tc.field)
		}
	}
	_, err := c.EnqueueMany(ctx, []jobq.JobSpec{{Type: "ok"}, {Type: "ok"}, {Type: ""}})
	if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "job 3 of 3") {
		t.Errorf("batch with a bad third job: err = %v, want ErrInvalidInput naming job 3", err)
	}
	if s, _ := b.QueueStats(ctx); len(s) != 0 {
		t.Fatalf("bad input wrote jobs: %+v", s)
	}
}

func TestEnqueueUniqueKey(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	ctx := context.Background()
	first, err := c.Enqueue(ctx, "report", map[string]int{"day": 1}, jobq.UniqueKey("report:day1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(ctx, "report", map[string]int{"day": 1}, jobq.UniqueKey("report:day1"))
	if !errors.Is(err, jobq.ErrDuplicate) || again != first {
		t.Fatalf("second enqueue = %d, %v; want %d and ErrDuplicate", again, err, first)
	}
	s, _ := b.QueueStats(ctx)
	if len(s) != 1 || s[0].Pending != 1 {
		t.Fatalf("stats %+v, want exactly one pending job", s)
	}
}

func TestEnqueueDefaults(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("five", func(context.Context, *jobq.Job) error { return nil }, jobq.HandlerOptions{MaxAttempts: 5})
	c := mustClient(t, b, jobq.ClientConfig{Registry: reg})
	ctx := context.Background()
	plain, _ := c.Enqueue(ctx, "other", struct{ A int }{7})
	typed, _ := c.Enqueue(ctx, "five", nil)
	// A type that declares no limit takes a job's own (one that declares
	// one refuses another: TestTypeMaxAttemptsHolds).
	explicit, _ := c.Enqueue(ctx, "other", nil, jobq.MaxAttempts(2), jobq.Queue("mail"), jobq.Priority(9))
	for _, tc := range []struct {
		id       int64
		attempts int
		queue    string
		prio     int
		payload  string
	}{{plain, 3, "default", 0, `{"A":7}`}, {typed, 5, "default", 0, `{}`}, {explicit, 2, "mail", 9, `{}`}} {
		row, err := b.JobGet(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if row.MaxAttempts != tc.attempts || row.Queue != tc.queue || row.Priority != tc.prio || string(row.Payload) != tc.payload {
			t.Errorf("job %d = %+v; want max attempts %d, queue %s, priority %d, payload %s", tc.id, row, tc.attempts, tc.queue, tc.prio, tc.payload)
		}
	}
}

func TestSyncBackendRunsInline(t *testing.T) {
	t.Parallel()
	reg := jobq.NewRegistry()
	var got []string
	type args struct{ Name string }
	jobq.Handle(reg, "greet", func(ctx context.Context, a args) error {
		if a.Name == "" {
			return errors.New("no name")
		}
		got = append(got, a.Name)
		return nil
	})
	b := inline.New()
	defer b.Close()
	if _, err := jobq.NewClient(b, jobq.ClientConfig{}); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("sync client without a registry: err = %v, want ErrInvalidInput", err)
	}
	c := mustClient(t, b, jobq.ClientConfig{Registry: reg})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, "greet", args{Name: "ada"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "ada" {
		t.Fatalf("handler effects %v, want [ada] before Enqueue returned", got)
	}
	if _, err := c.Enqueue(ctx, "greet", args{}); err == nil || !strings.Contains(err.Error(), "no name") {
		t.Fatalf("err = %v, want the handler's error", err)
	}
	if _, err := c.Enqueue(ctx, "greet", json.RawMessage(`nope`)); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("bad payload: err = %v, want ErrInvalidInput", err)
	}
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("sync backend stored failed jobs: %+v", f)
	}
	if _, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{}); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("worker on sync: err = %v, want ErrInvalidInput", err)
	}
}

func TestEnqueueTxUnsupported(t *testing.T) {
	t.Parallel()
	c := mustClient(t, newMemory(t, nil), jobq.ClientConfig{})
	if _, err := c.EnqueueTx(context.Background(), nil, "t", nil); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("err = %v, want ErrNotSupported", err)
	}
	if err := jobq.CompleteTx(context.Background(), nil); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("CompleteTx outside a handler: err = %v, want ErrInvalidInput", err)
	}
}

// TestSyncBackendBindsOneRegistry: a second client on one sync backend
// with another registry is refused, and the first client's jobs keep
// running its own handlers; the same registry again is fine.
func TestSyncBackendBindsOneRegistry(t *testing.T) {
	t.Parallel()
	var ran []string
	regA, regB := jobq.NewRegistry(), jobq.NewRegistry()
	regA.HandleFunc("greet", func(ctx context.Context, j *jobq.Job) error { ran = append(ran, "A"); return nil })
	regB.HandleFunc("greet", func(ctx context.Context, j *jobq.Job) error { ran = append(ran, "B"); return nil })
	b := inline.New()
	defer b.Close()
	a := mustClient(t, b, jobq.ClientConfig{Registry: regA})
	_, err := jobq.NewClient(b, jobq.ClientConfig{Registry: regB})
	if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "another") {
		t.Fatalf("second client with another registry: err = %v; want ErrInvalidInput naming the other registry", err)
	}
	mustClient(t, b, jobq.ClientConfig{Registry: regA}) // the same registry: fine
	if _, err := a.Enqueue(context.Background(), "greet", nil); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != "A" {
		t.Fatalf("the first client's job ran %v; want its own handler [A]", ran)
	}
	// Through a wrapper that forwards SetRunner only (as jobqtest's
	// recorder does), the backend it wraps still refuses.
	wrapped := inlineWrapper{Backend: b, inner: b}
	if _, err := jobq.NewClient(wrapped, jobq.ClientConfig{Registry: regB}); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("another registry through a wrapper: err = %v; want ErrInvalidInput", err)
	}
	mustClient(t, wrapped, jobq.ClientConfig{Registry: regA})
}

// inlineWrapper wraps a sync backend, forwarding SetRunner and nothing
// else of its own.
type inlineWrapper struct {
	backend.Backend
	inner *inline.Backend
}

func (w inlineWrapper) SetRunner(run func(ctx context.Context, job *backend.JobRow) error) {
	w.inner.SetRunner(run)
}

func (w inlineWrapper) Unwrap() backend.Backend { return w.inner }
