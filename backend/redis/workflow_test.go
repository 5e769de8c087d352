package redis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// Focused tests of workflows on Redis; backendtest's area Workflow runs
// the contract (conformance_test.go, cluster_test.go).

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

// TestWorkflowChainOptions: a chain releases each task's job with its
// options (priority, metadata, delay counted from the release), carrying
// its task; a dependency's result reaches its dependant; a name Go's %q
// escapes is quoted alike in a dependant's reason.
func TestWorkflowChainOptions(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	second := wtask("q", "b", "a")
	second.Job.Priority = 3
	second.Job.Metadata = map[string]string{"trace": "x"}
	third := wtask("q", "c", "b")
	third.Job.Delay = time.Hour
	ins := wfInsertT(t, b, third, second, wtask("q", "a"))
	if len(ins.Jobs) != 1 || ins.Jobs["a"] == 0 {
		t.Fatalf("released at insert: %v, want a", ins.Jobs)
	}
	if h := jobHash(t, b, "q", ins.Jobs["a"]); h["w"] == "" {
		t.Fatalf("task a's job %v does not name its task", h)
	}
	a := claimN(t, b, 1, time.Minute, "q")[0]
	doneRows(t, b, []byte(`{"n":1}`), a)
	tasks := wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive, "c": backend.TaskWaiting})
	row, err := b.JobGet(ctx, tasks["b"].JobID)
	if err != nil || row.Priority != 3 || row.Metadata["trace"] != "x" || row.Type != "b" || row.Status != backend.StatusPending {
		t.Fatalf("released job of b = %+v, %v; want pending, priority 3, its metadata", row, err)
	}
	if tasks["b"].Priority != 3 || tasks["b"].Type != "b" || tasks["b"].Queue != "q" {
		t.Errorf("task b = %+v, want priority 3, type b, queue q", tasks["b"])
	}
	deps, err := b.WorkflowDeps(ctx, tasks["b"].JobID)
	if err != nil || len(deps) != 1 || deps[0].Name != "a" || string(deps[0].Result) != `{"n":1}` {
		t.Fatalf("WorkflowDeps(b) = %+v, %v; want a's result", deps, err)
	}
	doneRows(t, b, nil, claimN(t, b, 1, time.Minute, "q")[0])
	tasks = wfStates(t, b, ins.ID, map[string]backend.TaskState{"b": backend.TaskSucceeded, "c": backend.TaskActive})
	row, err = b.JobGet(ctx, tasks["c"].JobID)
	if err != nil || row.Status != backend.StatusPending || row.AvailableAt.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("released job of c = %+v, %v; want pending, due an hour from its release", row, err)
	}

	// A name that %q escapes.
	odd := "n\"é\u00ad"
	ins = wfInsertT(t, b, wtask("q2", odd), wtask("q2", "d", odd))
	r := claimN(t, b, 1, time.Minute, "q2")[0]
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	tasks = wfStates(t, b, ins.ID, map[string]backend.TaskState{odd: backend.TaskFailed, "d": backend.TaskCancelled})
	if want := backend.DepCancelReason(odd, backend.TaskFailed); tasks["d"].Reason != want || tasks[odd].Reason != "boom" {
		t.Fatalf("reasons %q and %q, want %q and boom", tasks["d"].Reason, tasks[odd].Reason, want)
	}
}

// TestWorkflowFanIn1000: 8 workers complete 1,000 parts one by one,
// concurrently: the join is released exactly once, after the last.
func TestWorkflowFanIn1000(t *testing.T) {
	b := openTest(t, Options{})
	const n = 1000
	tasks := make([]backend.TaskParams, 0, n+1)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("p%d", i)
		tasks = append(tasks, wtask("fan", names[i]))
	}
	tasks = append(tasks, wtask("fan", "join", names...))
	ins := wfInsertT(t, b, tasks...)
	if len(ins.Jobs) != n {
		t.Fatalf("%d jobs released at insert, want %d", len(ins.Jobs), n)
	}
	var parts, joins atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for joins.Load() == 0 && !t.Failed() {
				rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"fan"}, Max: 1, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(rows) == 0 {
					if parts.Load() == n {
						time.Sleep(time.Millisecond)
					}
					continue
				}
				if rows[0].Type == "join" {
					joins.Add(1)
				} else {
					parts.Add(1)
				}
				if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if joins.Load() != 1 || parts.Load() != n {
		t.Fatalf("join claimed %d times after %d parts, want once after %d", joins.Load(), parts.Load(), n)
	}
	wf, _ := wfTasks(t, b, ins.ID)
	if wf.State != backend.WorkflowSucceeded || wf.Counts != (backend.TaskCounts{Succeeded: n + 1}) {
		t.Fatalf("workflow %s %+v, want succeeded with %d tasks", wf.State, wf.Counts, n+1)
	}
}

// TestWorkflowFanOut1000: one completion releases 1,000 dependants inside
// its script, well within a script's time (it costs the edges it touches).
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

// TestWorkflowCancelCascade: a task's pending job cancelled cancels its
// DepCancel dependants transitively and releases its DepContinue ones; a
// WorkflowCancel cancels waiting and pending tasks at once, asks running
// ones to stop, and their late ends release nothing.
func TestWorkflowCancelCascade(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	cont := wtask("cc", "d")
	cont.Deps = []backend.Dep{{Task: "a", Policy: backend.DepContinue}}
	ins := wfInsertT(t, b, wtask("cc", "a"), wtask("cc", "b", "a"), wtask("cc", "c", "b"), cont)
	if _, err := b.JobCancel(ctx, []int64{ins.Jobs["a"]}); err != nil {
		t.Fatal(err)
	}
	tasks := wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskCancelled, "b": backend.TaskCancelled, "c": backend.TaskCancelled, "d": backend.TaskActive})
	if tasks["a"].Reason != "cancelled" || tasks["c"].Reason != backend.DepCancelReason("b", backend.TaskCancelled) {
		t.Fatalf("reasons %q, %q", tasks["a"].Reason, tasks["c"].Reason)
	}
	doneRows(t, b, nil, claimN(t, b, 1, time.Minute, "cc")[0])
	if wf, _ := wfTasks(t, b, ins.ID); wf.State != backend.WorkflowFailed {
		t.Fatalf("workflow %s, want failed", wf.State)
	}

	ins = wfInsertT(t, b, wtask("cc", "r"), wtask("cc", "p"), wtask("cc", "w", "r", "p"))
	held := claimN(t, b, 1, time.Minute, "cc")[0] // r: inserted first
	res, err := b.WorkflowCancel(ctx, ins.ID)
	if err != nil || !res.Changed || res.State != backend.WorkflowCancelled || res.Cancelled != 2 || res.Requested != 1 {
		t.Fatalf("WorkflowCancel = %+v, %v; want 2 cancelled (p, w), 1 requested (r)", res, err)
	}
	tasks = wfStates(t, b, ins.ID, map[string]backend.TaskState{"r": backend.TaskCancelled, "p": backend.TaskCancelled, "w": backend.TaskCancelled})
	for _, tk := range tasks {
		if tk.Reason != backend.CancelReasonWorkflow {
			t.Errorf("task %s reason %q, want %q", tk.Name, tk.Reason, backend.CancelReasonWorkflow)
		}
	}
	if refs, err := b.JobCancelling(ctx); err != nil || len(refs) != 1 || refs[0].ID != held.ID {
		t.Fatalf("JobCancelling = %v, %v; want the held job", refs, err)
	}
	cres, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: held.Ref(), Kind: backend.OutcomeDone}}})
	if err != nil || len(cres.Cancelled) != 1 {
		t.Fatalf("late done = %+v, %v; want it cancelled", cres, err)
	}
	if rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"cc"}, Max: 10, Lease: time.Minute}); err != nil || len(rows) != 0 {
		t.Fatalf("claimed %d after the cancel, %v; want none", len(rows), err)
	}
	st, err := b.WorkflowStats(ctx)
	if err != nil || st != (backend.WorkflowStats{Failed: 1, Cancelled: 1}) {
		t.Fatalf("WorkflowStats = %+v, %v", st, err)
	}
}

// TestWorkflowReplayRestore: replaying a failed task (by ID and by filter)
// brings back what its failure cancelled, recounts DepContinue
// dependants, and the workflow can still succeed.
func TestWorkflowReplayRestore(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	e := wtask("rr", "e", "x")
	e.Deps = append(e.Deps, backend.Dep{Task: "a", Policy: backend.DepContinue})
	ins := wfInsertT(t, b, wtask("rr", "a"), wtask("rr", "x"), wtask("rr", "b", "a"), wtask("rr", "c", "b"), e)
	held := claimN(t, b, 2, time.Minute, "rr") // a and x, x held till the end
	a, x := held[0], held[1]
	if a.Type != "a" {
		a, x = x, a
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: a.Ref(), Kind: backend.OutcomeFail, Error: "broke"}}}); err != nil {
		t.Fatal(err)
	}
	tasks := wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled, "c": backend.TaskCancelled, "e": backend.TaskWaiting})
	if strings.Join(tasks["e"].WaitingOn, ",") != "x" {
		t.Fatalf("e waits on %v, want x", tasks["e"].WaitingOn)
	}
	replay := func(params backend.FailedReplayParams) {
		t.Helper()
		res, err := b.FailedReplay(ctx, params)
		if err != nil || res.Replayed != 1 {
			t.Fatalf("FailedReplay = %+v, %v; want 1 replayed", res, err)
		}
	}
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(failed) != 1 {
		t.Fatalf("FailedList = %v, %v", failed, err)
	}
	replay(backend.FailedReplayParams{IDs: []int64{failed[0].ID}})
	tasks = wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "c": backend.TaskWaiting, "e": backend.TaskWaiting})
	if strings.Join(tasks["e"].WaitingOn, ",") != "x,a" || tasks["a"].JobID != a.ID || tasks["b"].Reason != "" {
		t.Fatalf("after the replay: e waits on %v, a's job %d (want %d), b's reason %q", tasks["e"].WaitingOn, tasks["a"].JobID, a.ID, tasks["b"].Reason)
	}
	if wf, _ := wfTasks(t, b, ins.ID); wf.State != backend.WorkflowRunning || !wf.FinishedAt.IsZero() {
		t.Fatalf("workflow after the replay %s (finished %v), want running", wf.State, wf.FinishedAt)
	}
	// It fails again, by a lease sweep this time; then a replay by filter.
	a = claimN(t, b, 1, time.Millisecond, "rr")[0]
	if a.Type != "a" {
		t.Fatalf("claimed %s, want a", a.Type)
	}
	a2 := a
	for a2.Attempts < 3 {
		time.Sleep(2 * time.Millisecond)
		if _, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil {
			t.Fatal(err)
		}
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"rr"}, Max: 1, Lease: time.Millisecond})
		if err != nil || len(rows) != 1 || rows[0].Type != "a" {
			t.Fatalf("claim again: %v, %v", rows, err)
		}
		a2 = rows[0]
	}
	time.Sleep(2 * time.Millisecond)
	if res, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil || res.Failed != 1 {
		t.Fatalf("the last sweep = %+v, %v; want a failed", res, err)
	}
	wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled, "c": backend.TaskCancelled, "e": backend.TaskWaiting})
	replay(backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "rr"}})
	wfStates(t, b, ins.ID, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "c": backend.TaskWaiting, "e": backend.TaskWaiting})
	for i, want := range [][]string{{"a"}, {"b", "e"}, {"c"}} {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"rr"}, Max: 10, Lease: time.Minute})
		var got []string
		for _, r := range rows {
			got = append(got, r.Type)
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("claimed %v, %v; want %v", got, err, want)
		}
		if i == 0 {
			rows = append(rows, x)
		}
		doneRows(t, b, nil, rows...)
	}
	if wf, _ := wfTasks(t, b, ins.ID); wf.State != backend.WorkflowSucceeded || wf.Counts != (backend.TaskCounts{Succeeded: 5}) {
		t.Fatalf("workflow %s %+v, want succeeded", wf.State, wf.Counts)
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

// TestWorkflowLargest: a workflow of MaxWorkflowTasks tasks (half free,
// half each waiting on one of them) is inserted, read and cancelled, each
// in one script.
func TestWorkflowLargest(t *testing.T) {
	b := openTest(t, Options{})
	const n = backend.MaxWorkflowTasks
	tasks := make([]backend.TaskParams, 0, n)
	for i := range n / 2 {
		tasks = append(tasks, wtask("big", fmt.Sprintf("f%d", i)))
	}
	for i := range n / 2 {
		tasks = append(tasks, wtask("big", fmt.Sprintf("w%d", i), fmt.Sprintf("f%d", i)))
	}
	start := time.Now()
	ins := wfInsertT(t, b, tasks...)
	t.Logf("insert of %d tasks: %s", n, time.Since(start))
	if len(ins.Jobs) != n/2 {
		t.Fatalf("%d jobs released at insert, want %d", len(ins.Jobs), n/2)
	}
	start = time.Now()
	wf, _ := wfTasks(t, b, ins.ID)
	t.Logf("get of %d tasks: %s", n, time.Since(start))
	if len(wf.Tasks) != n || wf.Counts != (backend.TaskCounts{Active: n / 2, Waiting: n / 2}) {
		t.Fatalf("workflow of %d tasks, counts %+v", len(wf.Tasks), wf.Counts)
	}
	start = time.Now()
	res, err := b.WorkflowCancel(t.Context(), ins.ID)
	t.Logf("cancel of %d tasks: %s", n, time.Since(start))
	if err != nil || res.Cancelled != n {
		t.Fatalf("WorkflowCancel = %+v, %v; want %d cancelled", res, err, n)
	}
	if st := pendingIn(t, b); st["big"] != 0 {
		t.Fatalf("%d jobs pending after the cancel, want none", st["big"])
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
		if n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{f.ID}}); err != nil || n != 1 {
			t.Fatalf("FailedPurge(%d) = %d, %v", f.ID, n, err)
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
