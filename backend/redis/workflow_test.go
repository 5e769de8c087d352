package redis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// Focused tests of workflows on Redis: what the conformance suite
// (backendtest's area Workflow, run by conformance_test.go and
// cluster_test.go) does not reach: the one queue of a workflow, the keys
// and fields it writes, the cost of one script, and Cluster slots.

// wtask is a task of queue q whose type is its name, depending on deps
// with DepCancel.
func wtask(q, name string, deps ...string) backend.TaskParams {
	p := backend.TaskParams{Name: name, Job: backend.InsertParams{Queue: q, Type: name, Payload: []byte(`{}`), MaxAttempts: 3}}
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d})
	}
	return p
}

func wfInsertT(t *testing.T, b *Backend, tasks ...backend.TaskParams) *backend.WorkflowInserted {
	t.Helper()
	res, err := b.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "t", Tasks: tasks})
	if err != nil {
		t.Fatalf("WorkflowInsert: %v", err)
	}
	return res
}

// wfTasks returns the workflow's tasks by name.
func wfTasks(t *testing.T, b *Backend, id int64) (*backend.Workflow, map[string]*backend.WorkflowTask) {
	t.Helper()
	wf, err := b.WorkflowGet(t.Context(), id)
	if err != nil {
		t.Fatalf("WorkflowGet(%d): %v", id, err)
	}
	m := map[string]*backend.WorkflowTask{}
	for _, tk := range wf.Tasks {
		m[tk.Name] = tk
	}
	return wf, m
}

// wfStates asserts task states (name=state) and that no count drifted.
func wfStates(t *testing.T, b *Backend, id int64, want map[string]backend.TaskState) map[string]*backend.WorkflowTask {
	t.Helper()
	_, tasks := wfTasks(t, b, id)
	for name, st := range want {
		if tasks[name] == nil || tasks[name].State != st {
			t.Errorf("task %q = %+v, want %s", name, tasks[name], st)
		}
	}
	if drift, err := b.WorkflowCheck(t.Context()); err != nil || len(drift) != 0 {
		t.Fatalf("WorkflowCheck = %v, %v; want no drift", drift, err)
	}
	return tasks
}

// done completes rows done (with result, when given).
func doneRows(t *testing.T, b *Backend, result []byte, rows ...*backend.JobRow) {
	t.Helper()
	outs := make([]backend.Outcome, len(rows))
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone, Result: result}
	}
	res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
	if err != nil || len(res.Stale) != 0 {
		t.Fatalf("JobComplete = %+v, %v", res, err)
	}
}

// TestWorkflowOneQueue: a workflow whose tasks name two queues is refused
// before anything is written, saying why and naming both queues.
func TestWorkflowOneQueue(t *testing.T) {
	b := openTest(t, Options{})
	_, err := b.WorkflowInsert(t.Context(), backend.WorkflowParams{Tasks: []backend.TaskParams{
		wtask("mail", "a"), wtask("mail", "b", "a"), wtask("sms", "c", "b"),
	}})
	var ie *backend.InputError
	if !errors.Is(err, backend.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "workflow" {
		t.Fatalf("two queues: %v, want an InputError of field workflow", err)
	}
	for _, s := range []string{`"mail"`, `"sms"`, "one queue", "atomic"} {
		if !strings.Contains(ie.Reason, s) {
			t.Errorf("reason %q does not say %s", ie.Reason, s)
		}
	}
	if keys := keysUnder(t, testURL(t), b.KeyPrefix()); !slices.Equal(keys, []string{b.keys.schema}) {
		t.Fatalf("a refused workflow left keys %v", keys)
	}
}

// TestWorkflowJobNamesTask: a task's job, released at insert or by its
// dependency's end, names its task in its hash (field w), which is how a
// job's end finds the task it ends. What a released job carries is the
// conformance suite's (area Workflow, ReleasedJobKeepsOptions).
func TestWorkflowJobNamesTask(t *testing.T) {
	b := openTest(t, Options{})
	ins := wfInsertT(t, b, wtask("q", "b", "a"), wtask("q", "a"))
	ha := jobHash(t, b, "q", ins.Jobs["a"])
	if ha["w"] == "" {
		t.Fatalf("task a's job %v does not name its task", ha)
	}
	doneRows(t, b, nil, claimN(t, b, 1, time.Minute, "q")[0])
	tasks := wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive})
	if hb := jobHash(t, b, "q", tasks["b"].JobID); hb["w"] == "" || hb["w"] == ha["w"] {
		t.Fatalf("released task b's job %v does not name its own task (a's job named %q)", hb, ha["w"])
	}
}

// TestWorkflowFanOut1000: one completion releases 1,000 dependants inside
// its script, well within a script's time (it costs the edges it touches):
// a script blocks the whole server while it runs. That the release
// happens is the conformance suite's (area Workflow, FanOut1000); here is
// its cost.
func TestWorkflowFanOut1000(t *testing.T) {
	b := openTest(t, Options{})
	const n = 1000
	tasks := []backend.TaskParams{wtask("out", "root")}
	for i := range n {
		tasks = append(tasks, wtask("out", fmt.Sprintf("leaf%d", i), "root"))
	}
	ins := wfInsertT(t, b, tasks...)
	root := claimN(t, b, 1, time.Minute, "out")[0]
	start := time.Now()
	doneRows(t, b, nil, root)
	took := time.Since(start)
	t.Logf("the completion releasing %d tasks took %s", n, took)
	if took > 2*time.Second {
		t.Errorf("the completion releasing %d tasks took %s", n, took)
	}
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"out"}, Max: 2 * n, Lease: time.Minute})
	if err != nil || len(rows) != n {
		t.Fatalf("claimed %d leaves, %v; want %d", len(rows), err, n)
	}
	doneRows(t, b, nil, rows...)
	wf, _ := wfTasks(t, b, ins.ID)
	if wf.State != backend.WorkflowSucceeded {
		t.Fatalf("workflow %s, want succeeded", wf.State)
	}
}

// TestWorkflowScriptsOneSlot: every workflow script runs with keys of one
// Cluster slot (openTest checks each call), and every one is run.
func TestWorkflowScriptsOneSlot(t *testing.T) {
	b := openTest(t, Options{})
	exerciseWorkflows(t, b)
	calls := b.c.slots.called()
	for _, s := range []*luaScript{scriptWfInsert, scriptWfCancel, scriptWfGet, scriptWfList, scriptWfDeps, scriptWfStats, scriptWfCheck, scriptWfPrune} {
		if calls[s.name] == 0 {
			t.Errorf("script %s was not run", s.name)
		}
	}
}

// exerciseWorkflows runs every workflow script once (TestScriptKeysOneSlot
// calls it too).
func exerciseWorkflows(t *testing.T, b *Backend) {
	t.Helper()
	ctx := t.Context()
	ins := wfInsertT(t, b, wtask("wq", "a"), wtask("wq", "b", "a"))
	if _, err := b.WorkflowGet(ctx, ins.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WorkflowList(ctx, backend.WorkflowListParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WorkflowDeps(ctx, ins.Jobs["a"]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WorkflowStats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WorkflowCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WorkflowCancel(ctx, ins.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if n, err := b.WorkflowPrune(ctx, time.Millisecond); err != nil || n != 1 {
		t.Fatalf("WorkflowPrune = %d, %v; want 1", n, err)
	}
}

// TestWorkflowPruneFailedCount: the count of a workflow's failed jobs
// (field fj) behind WorkflowPrune. A purge of the failed job of a
// cancelled workflow already pruned does not bring the workflow back; a
// workflow from before fj existed starts it at its failed tasks, so that
// it is pruned once it surely has no failed job left, and never before.
func TestWorkflowPruneFailedCount(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	const q = "pf"
	k := b.keys.queue(q)
	wfKey := func(id int64) string { return k.base() + "wf:" + tsHex(id) }
	// failBoth fails the jobs of a workflow's two independent tasks a and
	// b, a first, and returns the failed records by type; with
	// cancelBetween the workflow is cancelled after a failed, so b's job
	// ends cancelled.
	failBoth := func(id int64, cancelBetween bool) map[string]*backend.FailedJob {
		t.Helper()
		rows := claimN(t, b, 2, time.Minute, q)
		for i, r := range rows {
			if i == 1 && cancelBetween {
				if res, err := b.WorkflowCancel(ctx, id); err != nil || !res.Changed {
					t.Fatalf("WorkflowCancel = %+v, %v", res, err)
				}
			}
			res, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "broke"}}})
			if err != nil || len(res.Stale) != 0 || (len(res.Cancelled) == 1) != (i == 1 && cancelBetween) {
				t.Fatalf("fail %s = %+v, %v", r.Type, res, err)
			}
		}
		failed, err := b.FailedList(ctx, backend.FailedListParams{Filter: backend.FailedFilter{Queue: q}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*backend.FailedJob{}
		for _, f := range failed {
			out[f.Type] = f
		}
		return out
	}
	purge := func(f *backend.FailedJob) {
		t.Helper()
		if n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{f.JobID}}); err != nil || n != 1 {
			t.Fatalf("FailedPurge(%d) = %d, %v", f.JobID, n, err)
		}
	}
	prune := func(want int) {
		t.Helper()
		time.Sleep(3 * time.Millisecond)
		if n, err := b.WorkflowPrune(ctx, time.Millisecond); err != nil || n != want {
			t.Fatalf("WorkflowPrune = %d, %v; want %d", n, err, want)
		}
	}
	field := func(id int64, f string) string {
		t.Helper()
		h, err := b.c.hgetAll(ctx, wfKey(id))
		if err != nil {
			t.Fatal(err)
		}
		return h[f]
	}

	// Cancelled with a failed task (fj 1): pruned; its failed job then
	// purges to nothing.
	ins := wfInsertT(t, b, wtask(q, "a"), wtask(q, "b"))
	failed := failBoth(ins.ID, true)
	if got := field(ins.ID, "fj"); got != "1" {
		t.Fatalf("cancelled workflow's fj = %q, want 1", got)
	}
	prune(1)
	purge(failed["a"])
	for _, h := range []string{"wf", "wt"} {
		if keys := keysUnder(t, testURL(t), k.base()+h); len(keys) != 0 {
			t.Fatalf("the purge after the prune left %v", keys)
		}
	}

	// From before fj: both failed jobs there, fj absent. One purge leaves
	// one (kept), the next none (pruned).
	ins = wfInsertT(t, b, wtask(q, "a"), wtask(q, "b"))
	failed = failBoth(ins.ID, false)
	if err := b.c.do(ctx, b.c.rdb.B().Hdel().Key(wfKey(ins.ID)).Field("fj").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	purge(failed["a"])
	prune(0)
	if got := field(ins.ID, "fj"); got != "1" {
		t.Fatalf("fj from the failed tasks = %q, want 1", got)
	}
	purge(failed["b"])
	prune(1)

	// From before fj, one failed job purged before it: both failed tasks
	// count, so the last purge leaves it kept rather than risk pruning a
	// workflow that can be replayed.
	ins = wfInsertT(t, b, wtask(q, "a"), wtask(q, "b"))
	failed = failBoth(ins.ID, false)
	purge(failed["a"])
	if err := b.c.do(ctx, b.c.rdb.B().Hdel().Key(wfKey(ins.ID)).Field("fj").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	purge(failed["b"])
	prune(0)
	if st, err := b.WorkflowStats(ctx); err != nil || st.Failed != 1 || st.Cancelled != 0 {
		t.Fatalf("WorkflowStats = %+v, %v; want the one failed left", st, err)
	}
}
