package jobqtest_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/jobqtest"
)

// album is a fan-out of two thumbnails and a join that waits for both, in
// queue "images" (on Redis a workflow's tasks share one queue).
func album() *jobq.Workflow {
	return jobq.NewWorkflow("album").
		AddJob("thumb-a", "thumbnail", map[string]string{"image": "a.png"}, jobq.Queue("images")).
		AddJob("thumb-b", "thumbnail", map[string]string{"image": "b.png"}, jobq.Queue("images")).
		AddJob("album", "album", nil, jobq.Queue("images"), jobq.After("thumb-a", "thumb-b"))
}

// TestRecorderWorkflow: a workflow enqueued through the recorder is
// recorded task by task (the waiting join without a job ID), its types
// are deferred, and RunQueue works its queue without being told it:
// the thumbnails, then the join they released.
func TestRecorderWorkflow(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		id, err := client.EnqueueWorkflow(t.Context(), album())
		if err != nil {
			t.Fatal(err)
		}
		es := rec.Enqueues()
		if len(es) != 3 {
			t.Fatalf("recorded %d enqueues, want 3: %+v", len(es), es)
		}
		for i, want := range []struct {
			task, typ, queue string
			waiting          bool
		}{{"thumb-a", "thumbnail", "images", false}, {"thumb-b", "thumbnail", "images", false}, {"album", "album", "images", true}} {
			e := es[i]
			if e.Task != want.task || e.Type != want.typ || e.Queue != want.queue || e.Waiting != want.waiting || e.Workflow != id || !e.Stored() {
				t.Errorf("enqueue %d: %+v, want task %s of workflow %d", i, e, want.task, id)
			}
			if (e.ID == 0) != want.waiting {
				t.Errorf("task %s: job ID %d (waiting %v)", e.Task, e.ID, want.waiting)
			}
		}
		rec.AssertEnqueued(t, "thumbnail", jobqtest.EqualJSON(`{"image":"a.png"}`))
		rec.AssertClass(t, "thumbnail", jobqtest.Deferred)
		rec.AssertClass(t, "album", jobqtest.Deferred)

		as := rec.RunQueue(t, noop("thumbnail", "album"), jobq.WorkerConfig{})
		if len(as) != 3 || as.Count(jobqtest.StateDone) != 3 || as[2].Type != "album" {
			t.Fatalf("attempts:\n%s", as)
		}
		rec.AssertClass(t, "album", jobqtest.Ran)
		wf, _ := backend.As[backend.Workflower](rec.Backend())
		got, err := wf.WorkflowGet(t.Context(), id)
		if err != nil || got.State != backend.WorkflowSucceeded {
			t.Fatalf("workflow %d: %+v, %v", id, got, err)
		}
	})
}

// TestRecorderWorkflowOnSync: the sync backend runs no workflows, and
// the recorder over it does not pretend to.
func TestRecorderWorkflowOnSync(t *testing.T) {
	rec := jobqtest.NewRecorder(inline.New())
	client := rec.NewClient(t, jobq.ClientConfig{Registry: noop("thumbnail", "album")})
	if _, err := client.EnqueueWorkflow(t.Context(), album()); !errors.Is(err, jobq.ErrNoWorkflows) {
		t.Fatalf("EnqueueWorkflow on sync: %v, want ErrNoWorkflows", err)
	}
	if es := rec.Enqueues(); len(es) != 0 {
		t.Fatalf("recorded %+v", es)
	}
}

// TestSQLiteWorkflowRollback: the tasks of a workflow enqueued in a
// transaction that rolled back were never stored (skipped, not
// deferred), though SQLite gives the next workflow, committed, the same
// ID; RunQueue runs the committed one's tasks only.
func TestSQLiteWorkflowRollback(t *testing.T) {
	t.Parallel()
	b, db := sqliteAndDB(t)
	rec := jobqtest.NewRecorder(b)
	client := rec.NewClient(t, jobq.ClientConfig{})
	var ids []int64
	for _, typ := range []string{"rolled-back", "committed"} {
		inTx(t, db, typ == "committed", func(tx *sql.Tx) {
			wf := jobq.NewWorkflow(typ).AddJob("first", typ, nil).AddJob("second", typ, nil, jobq.After("first"))
			id, err := client.EnqueueWorkflowTx(t.Context(), tx, wf)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		})
	}
	o := rec.Observe("rolled-back")
	if o.Class != jobqtest.Skipped || len(o.Enqueues) != 2 || !o.Enqueues[0].NotCommitted || !o.Enqueues[1].NotCommitted {
		t.Fatalf("%s", o)
	}
	rec.AssertNotEnqueued(t, "rolled-back")
	o = rec.Observe("committed")
	if o.Class != jobqtest.Deferred || len(o.Enqueues) != 2 || o.Enqueues[0].NotCommitted || o.Enqueues[1].NotCommitted || !o.Enqueues[0].InTx {
		t.Fatalf("%s", o)
	}
	as := rec.RunQueue(t, noop("committed", "rolled-back"), jobq.WorkerConfig{})
	if len(as) != 2 || as.OfType("committed").Count(jobqtest.StateDone) != 2 {
		t.Fatalf("attempts:\n%s", as)
	}
	t.Logf("workflow IDs: rolled back %d, committed %d", ids[0], ids[1])
}
