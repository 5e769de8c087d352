package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
)

// bareWrapper wraps a backend and implements no capability of its own:
// only Unwrap. It counts the inserts that pass through it, to show which
// calls went through the wrapper and which went past it to the wrapped
// backend's capability.
type bareWrapper struct {
	backend.Backend
	inserts atomic.Int32
}

func (w *bareWrapper) Unwrap() backend.Backend { return w.Backend }

func (w *bareWrapper) JobInsertMany(ctx context.Context, p []backend.InsertParams) ([]backend.InsertResult, error) {
	w.inserts.Add(1)
	return w.Backend.JobInsertMany(ctx, p)
}

// TestCapabilitiesThroughBareWrapper: every capability is found with
// backend.As, so a wrapper that only unwraps keeps them all: Enqueue runs
// the handler inside the insert through a wrapper of the sync backend, and
// EnqueueTx inserts in the caller's transaction through a wrapper of
// SQLite. Before, both were found by type assertion and a wrapper lacking
// them made the sync backend look like a store and EnqueueTx unsupported.
func TestCapabilitiesThroughBareWrapper(t *testing.T) {
	t.Parallel()
	t.Run("sync", func(t *testing.T) {
		t.Parallel()
		w := &bareWrapper{Backend: inline.New()}
		defer w.Close()
		reg := jobq.NewRegistry()
		var ran []int64
		reg.HandleFunc("greet", func(ctx context.Context, j *jobq.Job) error {
			ran = append(ran, j.ID)
			return errors.New("handler error")
		})
		c := mustClient(t, w, jobq.ClientConfig{Registry: reg})
		id, err := c.Enqueue(t.Context(), "greet", nil)
		if err == nil || !strings.Contains(err.Error(), "handler error") || len(ran) != 1 {
			t.Fatalf("Enqueue on a wrapped sync backend: id %d, err %v, ran %v; want the handler run inside it and its error", id, err, ran)
		}
		if w.inserts.Load() != 1 {
			t.Fatalf("%d inserts went through the wrapper, want 1", w.inserts.Load())
		}
		if _, err := jobq.NewWorker(w, reg, jobq.WorkerConfig{}); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Fatalf("NewWorker on a wrapped sync backend: %v, want ErrInvalidInput (it has no workers)", err)
		}
		if _, err := jobq.NewInspector(w).Schedules(t.Context()); !errors.Is(err, jobq.ErrNotSupported) {
			t.Fatalf("Schedules on a wrapped sync backend: %v, want ErrNotSupported", err)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b, db := ledgerStore(t)
		w := &bareWrapper{Backend: b}
		c := mustClient(t, w, jobq.ClientConfig{})
		for _, commit := range []bool{false, true} {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.EnqueueTx(t.Context(), tx, "post", nil)
			if err != nil {
				t.Fatalf("EnqueueTx through a wrapper: %v", err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			row, err := w.JobGet(t.Context(), id)
			switch {
			case commit && (err != nil || row.Type != "post"):
				t.Fatalf("job %d enqueued in a committed transaction: %+v, %v", id, row, err)
			case !commit && err == nil && row.Type == "post":
				t.Fatalf("job %d enqueued in a rolled-back transaction is stored", id)
			}
		}
		if n := w.inserts.Load(); n != 0 {
			t.Fatalf("%d EnqueueTx inserts went through the wrapper's JobInsertMany, want 0: TxInserter is the wrapped backend's", n)
		}
	})
}

// TestHooksSeeCapabilityCalls: what goes to a capability found with
// backend.As bypasses a wrapper, so the client hooks tell a recorder of
// it: the insert itself and whether it reached the backend (Insert), a
// transaction (InTx), a workflow's tasks (Task, Workflow), and the
// handlers the sync backend runs inside the enqueue (InlineStarted,
// InlineFinished), for the client that enqueued the job even after a
// later client replaced the backend's runner.
func TestHooksSeeCapabilityCalls(t *testing.T) {
	t.Parallel()
	type seen struct {
		info jobq.EnqueueInfo
		res  jobq.EnqueueResult
		err  error
	}
	record := func(out *[]seen) jobq.ClientHooks {
		return jobq.ClientHooks{AfterEnqueue: func(ctx context.Context, job jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
			*out = append(*out, seen{job, res, err})
		}}
	}
	t.Run("tx and workflow", func(t *testing.T) {
		t.Parallel()
		b, db := ledgerStore(t)
		var got []seen
		var before []jobq.EnqueueInfo
		hooks := record(&got)
		hooks.BeforeEnqueue = func(ctx context.Context, job *jobq.EnqueueInfo) error {
			before = append(before, *job)
			return nil
		}
		c := mustClient(t, &bareWrapper{Backend: b}, jobq.ClientConfig{Hooks: []jobq.ClientHooks{hooks}})
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		id, err := c.EnqueueTx(t.Context(), tx, "post", map[string]int{"n": 1}, jobq.UniqueKey("k"))
		if err != nil {
			t.Fatal(err)
		}
		wf := jobq.NewWorkflow("w").AddJob("first", "a", nil).AddJob("second", "b", nil, jobq.After("first"))
		wfID, err := c.EnqueueWorkflowTx(t.Context(), tx, wf)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(t.Context(), "refused", nil, jobq.Queue("no spaces")); err == nil {
			t.Fatal("a bad queue name was taken")
		}
		if len(got) != 4 || len(before) != 4 {
			t.Fatalf("AfterEnqueue saw %d jobs, BeforeEnqueue %d; want 4 each", len(got), len(before))
		}
		tx0, first, second, bad := got[0], got[1], got[2], got[3]
		if !tx0.info.InTx || tx0.info.Task != "" || tx0.res.ID != id || tx0.info.Insert == nil ||
			string(tx0.info.Insert.Payload) != `{"n":1}` || tx0.info.Insert.UniqueKey != "k" {
			t.Fatalf("EnqueueTx's AfterEnqueue: %+v %+v", tx0.info, tx0.res)
		}
		if !first.info.InTx || first.info.Task != "first" || first.info.Workflow != wfID || first.res.ID == 0 || first.info.Insert == nil {
			t.Fatalf("first task's AfterEnqueue: %+v %+v", first.info, first.res)
		}
		if second.info.Task != "second" || second.info.Workflow != wfID || second.res.ID != 0 || second.info.Insert == nil {
			t.Fatalf("waiting task's AfterEnqueue: %+v %+v", second.info, second.res)
		}
		if bad.err == nil || bad.info.Insert != nil || bad.info.InTx {
			t.Fatalf("refused job's AfterEnqueue: %+v, %v; want no Insert: it never reached the backend", bad.info, bad.err)
		}
		if !before[0].InTx || before[1].Task != "first" || before[2].Task != "second" || before[0].Insert != nil {
			t.Fatalf("BeforeEnqueue saw %+v", before)
		}
	})
	t.Run("inline", func(t *testing.T) {
		t.Parallel()
		b := inline.New()
		defer b.Close()
		reg := jobq.NewRegistry()
		reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error { return nil })
		var events []string
		hooks := jobq.ClientHooks{
			InlineStarted: func(ctx context.Context, j *jobq.Job) { events = append(events, "start "+j.Type) },
			InlineFinished: func(ctx context.Context, j *jobq.Job, err error) {
				events = append(events, "end "+j.Type+" "+map[bool]string{true: "no handler", false: "ok"}[errors.Is(err, jobq.ErrNoHandler)])
			},
		}
		watched := mustClient(t, &bareWrapper{Backend: b}, jobq.ClientConfig{Registry: reg, Hooks: []jobq.ClientHooks{hooks}})
		// The last client sets the backend's runner; its jobs fire no
		// hooks of the first, and the first's still fire its own.
		other := mustClient(t, b, jobq.ClientConfig{Registry: reg})
		if _, err := other.Enqueue(t.Context(), "ok", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := watched.Enqueue(t.Context(), "ok", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := watched.Enqueue(t.Context(), "unknown", nil); !errors.Is(err, jobq.ErrNoHandler) {
			t.Fatalf("enqueue of a type without a handler on sync: %v", err)
		}
		if got, want := fmt.Sprint(events), "[start ok end ok ok start unknown end unknown no handler]"; got != want {
			t.Fatalf("inline hooks: %s, want %s", got, want)
		}
	})
}
