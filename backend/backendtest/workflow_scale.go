package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testWorkflowScale: one task's end releases, cancels and (by its replay)
// brings back thousands of tasks in one step; a workflow of
// MaxWorkflowTasks tasks is inserted, read and cancelled.
func testWorkflowScale(t *testing.T, h Harness) {
	parallel(t, h, "FanOut1000", func(t *testing.T, b backend.Backend) {
		// root, 1,000 l waiting on it and 1,000 m each waiting on its l:
		// root's done releases the 1,000 l in its step; root's failure
		// cancels the 2,000, each naming its cause, and its replay brings
		// all of them back.
		w := workflower(t, b)
		const n = 1000
		shape := func() []backend.TaskParams {
			tasks := []backend.TaskParams{task("root")}
			for i := range n {
				tasks = append(tasks, task(fmt.Sprintf("l%04d", i), "root"), task(fmt.Sprintf("m%04d", i), fmt.Sprintf("l%04d", i)))
			}
			return tasks
		}

		ok := wfInsert(t, w, shape()...)
		root := wantClaimed(t, b, "root")["root"]
		start := time.Now()
		completeFresh(t, b, done(root.Ref()))
		t.Logf("the done releasing %d tasks took %s", n, time.Since(start))
		if wf := wfGet(t, w, ok); wf.Counts != (backend.TaskCounts{Succeeded: 1, Active: n, Waiting: n}) {
			t.Fatalf("after root's done: Counts = %+v, want %d active and %d waiting", wf.Counts, n, n)
		}
		if rows := claim(t, b, 2*n, longLease, "w"); len(rows) != n {
			t.Fatalf("claimed %d released tasks, want %d", len(rows), n)
		}
		if res, err := w.WorkflowCancel(t.Context(), ok); err != nil || res.Requested != n || res.Cancelled != n {
			t.Fatalf("WorkflowCancel = %+v, %v; want %d requested and %d cancelled", res, err, n, n)
		}
		noDrift(t, w)

		failed := wfInsert(t, w, shape()...)
		root = wantClaimed(t, b, "root")["root"]
		start = time.Now()
		completeFresh(t, b, fail(root.Ref(), "broke"))
		t.Logf("the failure cancelling %d tasks took %s", 2*n, time.Since(start))
		wf := wantWorkflow(t, w, failed, backend.WorkflowFailed)
		if wf.Counts != (backend.TaskCounts{Failed: 1, Cancelled: 2 * n}) {
			t.Fatalf("after root's failure: Counts = %+v, want 1 failed and %d cancelled", wf.Counts, 2*n)
		}
		for name, want := range map[string]string{
			"l0007": backend.DepCancelReason("root", backend.TaskFailed),
			"m0007": backend.DepCancelReason("l0007", backend.TaskCancelled),
		} {
			if r := taskNamed(t, wf, name).Reason; r != want {
				t.Errorf("task %s: reason %q, want %q", name, r, want)
			}
		}
		noDrift(t, w)
		start = time.Now()
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "w"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of root = %+v, %v; want 1 replayed", res, err)
		}
		t.Logf("the replay bringing back %d tasks took %s", 2*n, time.Since(start))
		wf = wantTasks(t, w, failed, map[string]backend.TaskState{"root": backend.TaskActive, "l0007": backend.TaskWaiting, "m0007": backend.TaskWaiting})
		wantWorkflow(t, w, failed, backend.WorkflowRunning)
		if wf.Counts != (backend.TaskCounts{Active: 1, Waiting: 2 * n}) {
			t.Fatalf("after the replay: Counts = %+v, want 1 active and %d waiting", wf.Counts, 2*n)
		}
	})

	parallel(t, h, "Largest", func(t *testing.T, b backend.Backend) {
		// MaxWorkflowTasks tasks, half free and half each waiting on one
		// of them: inserted, read and cancelled whole.
		w := workflower(t, b)
		const n = backend.MaxWorkflowTasks
		tasks := make([]backend.TaskParams, 0, n)
		for i := range n / 2 {
			tasks = append(tasks, task(fmt.Sprintf("f%d", i)))
		}
		for i := range n / 2 {
			tasks = append(tasks, task(fmt.Sprintf("w%d", i), fmt.Sprintf("f%d", i)))
		}
		start := time.Now()
		res, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "largest", Tasks: tasks})
		if err != nil {
			t.Fatalf("WorkflowInsert of %d tasks: %v", n, err)
		}
		t.Logf("insert of %d tasks: %s", n, time.Since(start))
		if len(res.Jobs) != n/2 {
			t.Fatalf("%d jobs released at insert, want %d", len(res.Jobs), n/2)
		}
		wantStats(t, b, backend.QueueStats{Queue: "w", Pending: n / 2})
		start = time.Now()
		wf := wfGet(t, w, res.ID)
		t.Logf("get of %d tasks: %s", n, time.Since(start))
		if len(wf.Tasks) != n || wf.Counts != (backend.TaskCounts{Active: n / 2, Waiting: n / 2}) {
			t.Fatalf("workflow of %d tasks, Counts %+v; want %d, half active", len(wf.Tasks), wf.Counts, n)
		}
		start = time.Now()
		cres, err := w.WorkflowCancel(t.Context(), res.ID)
		t.Logf("cancel of %d tasks: %s", n, time.Since(start))
		if err != nil || cres.Cancelled != n || cres.Requested != 0 {
			t.Fatalf("WorkflowCancel = %+v, %v; want %d cancelled", cres, err, n)
		}
		wantNoStats(t, b)
		claimNone(t, b, "w")
		noDrift(t, w)
	})
}
