package memory_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

// The workflow tests of this backend: that every time a workflow stores or
// compares comes from Options.Now. What any backend must do with
// workflows is the conformance suite's (backendtest, area Workflow).

// wfh drives one memory backend on a fake clock through workflows: tasks
// run in queue "w", each job's type is its task's name.
type wfh struct {
	t     *testing.T
	b     *memory.Backend
	clock *fakeClock
}

func newWF(t *testing.T) *wfh {
	t.Helper()
	b, clock := newFakeClocked(t)
	return &wfh{t: t, b: b, clock: clock}
}

// wfTask is a task of queue "w" typed by its name, depending on deps with
// DepCancel.
func wfTask(name string, deps ...string) backend.TaskParams {
	p := backend.TaskParams{Name: name, Job: backend.InsertParams{Queue: "w", Type: name, Payload: []byte(`{}`), MaxAttempts: 3}}
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d})
	}
	return p
}

func (h *wfh) insert(tasks ...backend.TaskParams) int64 {
	h.t.Helper()
	res, err := h.b.WorkflowInsert(h.t.Context(), backend.WorkflowParams{Name: "wf", Tasks: tasks})
	if err != nil {
		h.t.Fatalf("WorkflowInsert: %v", err)
	}
	return res.ID
}

func (h *wfh) get(id int64) *backend.Workflow {
	h.t.Helper()
	wf, err := h.b.WorkflowGet(h.t.Context(), id)
	if err != nil {
		h.t.Fatalf("WorkflowGet(%d): %v", id, err)
	}
	return wf
}

// want asserts the workflow's state and its tasks' states, given as
// "name=state ..." in task order, and that no count drifted.
func (h *wfh) want(id int64, state backend.WorkflowState, tasks string) *backend.Workflow {
	h.t.Helper()
	wf := h.get(id)
	var got []string
	for _, tk := range wf.Tasks {
		got = append(got, tk.Name+"="+string(tk.State))
	}
	if wf.State != state || strings.Join(got, " ") != tasks {
		h.t.Fatalf("workflow %d is %s with %s; want %s with %s", id, wf.State, strings.Join(got, " "), state, tasks)
	}
	if (state == backend.WorkflowRunning) != wf.FinishedAt.IsZero() {
		h.t.Fatalf("workflow %d is %s with FinishedAt %v", id, state, wf.FinishedAt)
	}
	h.noDrift()
	return wf
}

func (h *wfh) noDrift() {
	h.t.Helper()
	drift, err := h.b.WorkflowCheck(h.t.Context())
	if err != nil || len(drift) != 0 {
		h.t.Fatalf("WorkflowCheck = %v, %v; want no drift", drift, err)
	}
}

// claim claims every due job of "w", by task name.
func (h *wfh) claim() map[string]*backend.JobRow {
	h.t.Helper()
	rows, err := h.b.JobClaim(h.t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 10000, Lease: time.Minute})
	if err != nil {
		h.t.Fatal(err)
	}
	got := map[string]*backend.JobRow{}
	for _, r := range rows {
		got[r.Type] = r
	}
	return got
}

// claimExactly claims "w" and asserts exactly names came.
func (h *wfh) claimExactly(names ...string) map[string]*backend.JobRow {
	h.t.Helper()
	got := h.claim()
	var have []string
	for n := range got {
		have = append(have, n)
	}
	slices.Sort(have)
	names = slices.Clone(names)
	slices.Sort(names)
	if !slices.Equal(have, names) {
		h.t.Fatalf("claimed %q, want %q", have, names)
	}
	return got
}

func (h *wfh) complete(outs ...backend.Outcome) backend.CompleteResult {
	h.t.Helper()
	res, err := h.b.JobComplete(h.t.Context(), backend.CompleteParams{Outcomes: outs})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// run claims exactly names and completes them done.
func (h *wfh) run(names ...string) {
	h.t.Helper()
	for _, r := range h.claimExactly(names...) {
		if res := h.complete(backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}); len(res.Stale)+len(res.Cancelled) != 0 {
			h.t.Fatalf("done of %s = %+v", r.Type, res)
		}
	}
}

// fail claims exactly names and fails each with "<name> broke".
func (h *wfh) fail(names ...string) {
	h.t.Helper()
	for _, r := range h.claimExactly(names...) {
		h.complete(backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: r.Type + " broke"})
	}
}

// TestWorkflowChainClock runs a chain whose middle task has a delay: the
// times of the workflow, of its tasks, of a released job (its delay
// counted from the release) and of a cancel all come from Options.Now.
func TestWorkflowChainClock(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	mid := wfTask("b", "a")
	mid.Job.Delay = time.Hour
	start := h.clock.Now()
	id := h.insert(wfTask("c", "b"), mid, wfTask("a"))
	wf := h.want(id, backend.WorkflowRunning, "a=active b=waiting c=waiting")
	if !wf.CreatedAt.Equal(start) {
		t.Fatalf("workflow created at %v, want the clock's %v", wf.CreatedAt, start)
	}

	h.clock.Add(time.Minute)
	h.run("a")
	wf = h.want(id, backend.WorkflowRunning, "a=succeeded b=active c=waiting")
	if !wf.Tasks[0].FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("a finished at %v, want the clock's %v", wf.Tasks[0].FinishedAt, h.clock.Now())
	}
	j, err := h.b.JobGet(ctx, wf.Tasks[1].JobID)
	if err != nil || !j.AvailableAt.Equal(h.clock.Now().Add(time.Hour)) || !j.CreatedAt.Equal(h.clock.Now()) {
		t.Fatalf("b's job = %+v, %v; want created now, due an hour after the release", j, err)
	}
	h.claimExactly()
	h.clock.Add(time.Hour)
	h.run("b")
	h.run("c")
	wf = h.want(id, backend.WorkflowSucceeded, "a=succeeded b=succeeded c=succeeded")
	if !wf.FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("workflow finished at %v, want %v", wf.FinishedAt, h.clock.Now())
	}

	// A cancel, and the failure a cascade follows, at the clock's time.
	id = h.insert(wfTask("x"), wfTask("y", "x"), wfTask("z"))
	h.clock.Add(time.Minute)
	h.fail("x", "z")
	for _, tk := range h.want(id, backend.WorkflowFailed, "x=failed z=failed y=cancelled").Tasks {
		if !tk.FinishedAt.Equal(h.clock.Now()) {
			t.Errorf("%s finished at %v, want the clock's %v", tk.Name, tk.FinishedAt, h.clock.Now())
		}
	}
	id = h.insert(wfTask("p"))
	h.clock.Add(time.Second)
	if _, err := h.b.WorkflowCancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if wf := h.want(id, backend.WorkflowCancelled, "p=cancelled"); !wf.FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("cancelled at %v, want %v", wf.FinishedAt, h.clock.Now())
	}
}

// TestWorkflowPrune: WorkflowPrune's age is measured on Options.Now: a
// workflow that ended exactly olderThan ago stays, one nanosecond later
// it goes.
func TestWorkflowPrune(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	ok := h.insert(wfTask("ok"))
	h.run("ok")
	gone := h.insert(wfTask("gone", "never"), wfTask("never"))
	if _, err := h.b.WorkflowCancel(ctx, gone); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Hour)
	late := h.insert(wfTask("late"))
	h.run("late")

	if n, err := h.b.WorkflowPrune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("prune at exactly an hour = %d, %v; want 0", n, err)
	}
	h.clock.Add(time.Nanosecond)
	if n, err := h.b.WorkflowPrune(ctx, time.Hour); err != nil || n != 2 {
		t.Fatalf("prune = %d, %v; want ok and gone", n, err)
	}
	for _, id := range []int64{ok, gone} {
		if _, err := h.b.WorkflowGet(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("pruned %d: %v", id, err)
		}
	}
	h.want(late, backend.WorkflowSucceeded, "late=succeeded")
}
