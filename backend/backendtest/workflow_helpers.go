package backendtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// workflower returns b's Workflower or skips the test.
func workflower(t *testing.T, b backend.Backend) backend.Workflower {
	t.Helper()
	w, ok := b.(backend.Workflower)
	if !ok {
		t.Skip("backend does not implement backend.Workflower")
	}
	return w
}

// task returns a task of queue "w" whose type is its name, depending on
// deps with DepCancel.
func task(name string, deps ...string) backend.TaskParams {
	p := backend.TaskParams{Name: name, Job: job("w", name)}
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d})
	}
	return p
}

// continueOn adds dependencies with DepContinue to p.
func continueOn(p backend.TaskParams, deps ...string) backend.TaskParams {
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d, Policy: backend.DepContinue})
	}
	return p
}

// wfInsert inserts a workflow of tasks and returns its ID.
func wfInsert(t *testing.T, w backend.Workflower, tasks ...backend.TaskParams) int64 {
	t.Helper()
	res, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "wf", Tasks: tasks})
	if err != nil {
		t.Fatalf("WorkflowInsert: %v", err)
	}
	if res.ID <= 0 {
		t.Fatalf("WorkflowInsert returned ID %d", res.ID)
	}
	return res.ID
}

// wfGet returns the workflow id with its tasks.
func wfGet(t *testing.T, w backend.Workflower, id int64) *backend.Workflow {
	t.Helper()
	wf, err := w.WorkflowGet(t.Context(), id)
	if err != nil {
		t.Fatalf("WorkflowGet(%d): %v", id, err)
	}
	return wf
}

// taskNamed returns the task name of wf, failing the test without it.
func taskNamed(t *testing.T, wf *backend.Workflow, name string) *backend.WorkflowTask {
	t.Helper()
	for _, tk := range wf.Tasks {
		if tk.Name == name {
			return tk
		}
	}
	t.Fatalf("workflow %d has no task %q", wf.ID, name)
	return nil
}

// wantTasks asserts the state of each named task (name=state pairs) and
// that no count drifted.
func wantTasks(t *testing.T, w backend.Workflower, id int64, want map[string]backend.TaskState) *backend.Workflow {
	t.Helper()
	wf := wfGet(t, w, id)
	for name, st := range want {
		if got := taskNamed(t, wf, name); got.State != st {
			t.Errorf("workflow %d task %q is %s (reason %q), want %s", id, name, got.State, got.Reason, st)
		}
	}
	noDrift(t, w)
	return wf
}

// wantWorkflow asserts the workflow's state.
func wantWorkflow(t *testing.T, w backend.Workflower, id int64, state backend.WorkflowState) *backend.Workflow {
	t.Helper()
	wf := wfGet(t, w, id)
	if wf.State != state {
		t.Fatalf("workflow %d is %s, want %s (tasks: %s)", id, wf.State, state, describeTasks(wf))
	}
	if state == backend.WorkflowRunning && !wf.FinishedAt.IsZero() {
		t.Errorf("running workflow %d has FinishedAt %v", id, wf.FinishedAt)
	}
	if state != backend.WorkflowRunning && wf.FinishedAt.IsZero() {
		t.Errorf("%s workflow %d has no FinishedAt", state, id)
	}
	return wf
}

func describeTasks(wf *backend.Workflow) string {
	var parts []string
	for _, tk := range wf.Tasks {
		parts = append(parts, tk.Name+"="+string(tk.State))
	}
	return strings.Join(parts, " ")
}

// noDrift asserts WorkflowCheck finds nothing.
func noDrift(t *testing.T, w backend.Workflower) {
	t.Helper()
	drift, err := w.WorkflowCheck(t.Context())
	if err != nil {
		t.Fatalf("WorkflowCheck: %v", err)
	}
	if len(drift) != 0 {
		t.Fatalf("WorkflowCheck found drift: %v", drift)
	}
}

// claimTasks claims every due job of queue "w" and returns them by task
// name (their type).
func claimTasks(t *testing.T, b backend.Backend) map[string]*backend.JobRow {
	t.Helper()
	got := map[string]*backend.JobRow{}
	for _, r := range claim(t, b, 1000, longLease, "w") {
		if got[r.Type] != nil {
			t.Fatalf("task %q claimed twice: jobs %d and %d", r.Type, got[r.Type].ID, r.ID)
		}
		got[r.Type] = r
	}
	return got
}

// wantClaimed claims queue "w" and asserts exactly the named tasks' jobs
// came.
func wantClaimed(t *testing.T, b backend.Backend, names ...string) map[string]*backend.JobRow {
	t.Helper()
	got := claimTasks(t, b)
	var have []string
	for n := range got {
		have = append(have, n)
	}
	slices.Sort(have)
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Fatalf("claimed tasks %q, want %q", have, want)
	}
	return got
}

// runTasks claims and completes (done) exactly the named tasks.
func runTasks(t *testing.T, b backend.Backend, names ...string) {
	t.Helper()
	for _, r := range wantClaimed(t, b, names...) {
		completeFresh(t, b, done(r.Ref()))
	}
}
