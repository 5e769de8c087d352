package backendtest

import (
	"testing"

	"github.com/jobq/jobq/backend"
)

// testWorkflowNames: a task's job names its workflow and task
// (JobRow.WorkflowID, Task) wherever it is read: in a claim, of a free or
// a limited queue, in JobGet and JobList, whether released at insert or
// by its dependency's end, and after its failure was replayed; a plain
// job beside it names none.
func testWorkflowNames(t *testing.T, h Harness) {
	parallel(t, h, "RowsNameTask", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		plain := insertOne(t, b, job("w", "plain"))
		got := claimTasks(t, b)
		if len(got) != 2 || got["a"] == nil || got["plain"] == nil {
			t.Fatalf("claimed %d jobs, want task a's and the plain job", len(got))
		}
		wantNamed(t, "claimed", got["a"], id, "a")
		wantNamed(t, "claimed", got["plain"], 0, "")
		wantNamed(t, "JobGet", get(t, b, got["a"].ID), id, "a")
		wantNamed(t, "JobGet", get(t, b, plain), 0, "")
		if r, ok := b.(backend.Retainer); ok {
			rows, err := r.JobList(t.Context(), backend.JobListParams{State: backend.StateReserved, Filter: backend.JobFilter{Queue: "w"}})
			if err != nil || len(rows) != 2 {
				t.Fatalf("JobList(reserved) = %d rows, %v; want 2", len(rows), err)
			}
			for _, row := range rows {
				if row.ID == plain {
					wantNamed(t, "JobList", row, 0, "")
				} else {
					wantNamed(t, "JobList", row, id, "a")
				}
			}
		}
		completeFresh(t, b, done(got["a"].Ref()), done(got["plain"].Ref()))
		// b's job, released by a's end, is claimed from a limited queue
		// (a claim path of its own on some backends).
		if c, ok := b.(backend.QueueController); ok {
			if err := c.QueueSetLimits(t.Context(), "w", backend.QueueLimits{Concurrency: 10}); err != nil {
				t.Fatalf("QueueSetLimits: %v", err)
			}
		}
		insertOne(t, b, job("w", "plain"))
		got = wantClaimed(t, b, "b", "plain")
		wantNamed(t, "claimed from a limited queue", got["b"], id, "b")
		wantNamed(t, "claimed from a limited queue", got["plain"], 0, "")
		wantNamed(t, "JobGet", get(t, b, got["b"].ID), id, "b")
		completeFresh(t, b, done(got["b"].Ref()), done(got["plain"].Ref()))
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReplayKeepsNames", func(t *testing.T, b backend.Backend) {
		// The replayed job is the same job again: it still names its task,
		// and a retry in between changes nothing.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		a := claimOne(t, b, "w")
		completeFresh(t, b, retry(a.Ref(), 0, "a stumbled"))
		a = claimOne(t, b, "w")
		wantNamed(t, "claimed after a retry", a, id, "a")
		completeFresh(t, b, fail(a.Ref(), "a broke"))
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled})
		if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{a.ID}}); err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of a = %+v, %v; want 1 replayed", res, err)
		}
		wantNamed(t, "JobGet after the replay", get(t, b, a.ID), id, "a")
		a = claimOne(t, b, "w")
		wantNamed(t, "claimed after the replay", a, id, "a")
		completeFresh(t, b, done(a.Ref()))
		got := wantClaimed(t, b, "b")
		wantNamed(t, "claimed after the replay", got["b"], id, "b")
	})
}

// testWorkflowFailedNames: a task's job that fails for good names its
// workflow and task in failed_jobs (FailedJob.WorkflowID, Task), read by
// FailedGet and FailedList, so that whoever looks at the failed job finds
// the workflow it stopped; a plain job failed in the same batch names none.
func testWorkflowFailedNames(t *testing.T, h Harness) {
	parallel(t, h, "FailedNamesTask", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		insertOne(t, b, job("w", "plain"))
		got := wantClaimed(t, b, "a", "plain")
		completeFresh(t, b, fail(got["a"].Ref(), "a broke"), fail(got["plain"].Ref(), "plain broke"))
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled})
		wantFailedNamed(t, b, got["a"].ID, id, "a")
		wantFailedNamed(t, b, got["plain"].ID, 0, "")
	})
}

// wantFailedNamed asserts the workflow and task that job jobID's failed
// row names in FailedGet and in FailedList (0 and "": none).
func wantFailedNamed(t *testing.T, b backend.Backend, jobID, workflow int64, task string) {
	t.Helper()
	listed := failedByJob(t, b, jobID)
	got, err := b.FailedGet(t.Context(), jobID)
	if err != nil {
		t.Fatalf("FailedGet(%d): %v", jobID, err)
	}
	for what, f := range map[string]*backend.FailedJob{"FailedList": listed, "FailedGet": got} {
		if f.WorkflowID != workflow || f.Task != task {
			t.Errorf("%s: failed job %d (%s) names workflow %d task %q, want workflow %d task %q", what, jobID, f.Type, f.WorkflowID, f.Task, workflow, task)
		}
	}
}

// wantNamed asserts the workflow and task a row names (0 and "": none).
func wantNamed(t *testing.T, what string, row *backend.JobRow, workflow int64, task string) {
	t.Helper()
	if row.WorkflowID != workflow || row.Task != task {
		t.Errorf("%s job %d (%s) names workflow %d task %q, want workflow %d task %q", what, row.ID, row.Type, row.WorkflowID, row.Task, workflow, task)
	}
}
