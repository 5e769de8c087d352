package memory_test

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
	"github.com/jobq/jobq/backend/memory"
)

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

// withContinue adds dependencies with DepContinue.
func withContinue(p backend.TaskParams, deps ...string) backend.TaskParams {
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d, Policy: backend.DepContinue})
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

func (h *wfh) task(id int64, name string) *backend.WorkflowTask {
	h.t.Helper()
	for _, tk := range h.get(id).Tasks {
		if tk.Name == name {
			return tk
		}
	}
	h.t.Fatalf("workflow %d has no task %q", id, name)
	return nil
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

// replay replays the failed row of the job of task name.
func (h *wfh) replay(id int64, name string) backend.ReplayResult {
	h.t.Helper()
	return h.replayJob(h.task(id, name).JobID)
}

// replayJob replays the failed row of job jobID.
func (h *wfh) replayJob(jobID int64) backend.ReplayResult {
	h.t.Helper()
	rows, err := h.b.FailedList(h.t.Context(), backend.FailedListParams{Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range rows {
		if f.JobID == jobID {
			res, err := h.b.FailedReplay(h.t.Context(), backend.FailedReplayParams{IDs: []int64{f.ID}})
			if err != nil {
				h.t.Fatal(err)
			}
			return res
		}
	}
	h.t.Fatalf("job %d is not in failed_jobs", jobID)
	return backend.ReplayResult{}
}

// TestWorkflowChainClock runs a chain whose middle task has a delay: the
// delay counts from the release, every time comes from Options.Now, a
// release counts as an insert and wakes the queue's subscribers.
func TestWorkflowChainClock(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	wake, cancel := h.b.Subscribe([]string{"w"})
	defer cancel()
	mid := wfTask("b", "a")
	mid.Job.Delay = time.Hour
	start := h.clock.Now()
	id := h.insert(wfTask("c", "b"), mid, wfTask("a"))
	woken(t, wake)
	wf := h.want(id, backend.WorkflowRunning, "a=active b=waiting c=waiting")
	if !wf.CreatedAt.Equal(start) || wf.Counts != (backend.TaskCounts{Active: 1, Waiting: 2}) {
		t.Fatalf("workflow = %+v, want created at the clock's time, 1 active 2 waiting", wf)
	}
	if n, _ := h.b.JobsInserted(ctx); n != 1 {
		t.Fatalf("JobsInserted after insert = %d, want 1 (a's job)", n)
	}
	if c := wf.Tasks[2]; c.JobID != 0 || !slices.Equal(c.WaitingOn, []string{"b"}) || !slices.Equal(c.Deps, []backend.Dep{{Task: "b"}}) {
		t.Fatalf("c = %+v, want no job, waiting on b", c)
	}

	h.clock.Add(time.Minute)
	h.run("a")
	woken(t, wake)
	wf = h.want(id, backend.WorkflowRunning, "a=succeeded b=active c=waiting")
	if !wf.Tasks[0].FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("a finished at %v, want the clock's %v", wf.Tasks[0].FinishedAt, h.clock.Now())
	}
	j, err := h.b.JobGet(ctx, wf.Tasks[1].JobID)
	if err != nil || !j.AvailableAt.Equal(h.clock.Now().Add(time.Hour)) || !j.CreatedAt.Equal(h.clock.Now()) {
		t.Fatalf("b's job = %+v, %v; want created now, due an hour after the release", j, err)
	}
	if n, _ := h.b.JobsInserted(ctx); n != 2 {
		t.Fatalf("JobsInserted after the release = %d, want 2", n)
	}
	h.claimExactly()
	h.clock.Add(time.Hour)
	h.run("b")
	h.run("c")
	wf = h.want(id, backend.WorkflowSucceeded, "a=succeeded b=succeeded c=succeeded")
	if !wf.FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("workflow finished at %v, want %v", wf.FinishedAt, h.clock.Now())
	}
	if st, _ := h.b.WorkflowStats(ctx); st != (backend.WorkflowStats{Succeeded: 1}) {
		t.Fatalf("WorkflowStats = %+v", st)
	}
}

// woken waits for a wake-up on ch.
func woken(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
	}
}

// TestWorkflowDiamondResults: results travel to WorkflowDeps in Deps
// order, a Keep completion counts as done, and the caller's buffers are
// not kept.
func TestWorkflowDiamondResults(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	top := wfTask("top")
	payload := []byte(`{"x":1}`)
	top.Job.Payload = payload
	id := h.insert(top, wfTask("left", "top"), wfTask("right", "top"), wfTask("join", "right", "left"))
	payload[2] = 'y' // the stored payload is a copy
	r := h.claimExactly("top")["top"]
	if string(r.Payload) != `{"x":1}` {
		t.Fatalf("top's payload %s, want the inserted one", r.Payload)
	}
	h.complete(backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
	got := h.claimExactly("left", "right")
	res := []byte(`{"side":"l"}`)
	h.complete(backend.Outcome{Ref: got["left"].Ref(), Kind: backend.OutcomeDone, Result: res, Keep: true})
	res[0] = 'X' // the stored result is a copy
	h.want(id, backend.WorkflowRunning, "top=succeeded left=succeeded right=active join=waiting")
	if j := h.task(id, "join"); !slices.Equal(j.WaitingOn, []string{"right"}) {
		t.Fatalf("join waits on %v, want right", j.WaitingOn)
	}
	h.complete(backend.Outcome{Ref: got["right"].Ref(), Kind: backend.OutcomeDone, Result: []byte(`2`)})
	join := h.claimExactly("join")["join"]
	deps, err := h.b.WorkflowDeps(ctx, join.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.TaskOutcome{
		{Name: "right", State: backend.TaskSucceeded, Result: []byte(`2`)},
		{Name: "left", State: backend.TaskSucceeded, Result: []byte(`{"side":"l"}`)},
	}
	if fmt.Sprint(deps) != fmt.Sprint(want) {
		t.Fatalf("WorkflowDeps = %s, want %s", deps, want)
	}
	if deps, err := h.b.WorkflowDeps(ctx, r.ID); err != nil || len(deps) != 0 {
		t.Fatalf("WorkflowDeps of a root = %v, %v; want none", deps, err)
	}
	h.complete(backend.Outcome{Ref: join.Ref(), Kind: backend.OutcomeDone})
	h.want(id, backend.WorkflowSucceeded, "top=succeeded left=succeeded right=succeeded join=succeeded")
	if _, err := h.b.WorkflowDeps(ctx, join.ID+100); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("WorkflowDeps of no task: %v, want ErrNotFound", err)
	}
}

// TestWorkflowFanIn1000 completes 1,000 parts from 4 goroutines at once,
// with WorkflowCheck sampling throughout: the join is released once,
// after the last part.
func TestWorkflowFanIn1000(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	const n = 1000
	var tasks []backend.TaskParams
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("p%d", i))
		tasks = append(tasks, wfTask(names[i]))
	}
	id := h.insert(append(tasks, wfTask("join", names...))...)
	var parts, joins atomic.Int64
	var early atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if d, err := h.b.WorkflowCheck(ctx); err != nil || len(d) != 0 {
				t.Errorf("WorkflowCheck during the fan-in = %v, %v", d, err)
				return
			}
		}
	})
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for joins.Load() == 0 && !t.Failed() {
				rows, err := h.b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 7, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rows {
					if r.Type == "join" {
						joins.Add(1)
						if wf, err := h.b.WorkflowGet(ctx, id); err != nil || wf.Counts.Succeeded != n {
							early.Store(true)
						}
					} else {
						parts.Add(1)
					}
					// One call per outcome: the completions interleave.
					if _, err := h.b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeDone}}}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if early.Load() || joins.Load() != 1 || parts.Load() != n {
		t.Fatalf("join claimed %d times (early: %v) after %d parts, want once after %d", joins.Load(), early.Load(), parts.Load(), n)
	}
	wf := h.get(id)
	if wf.State != backend.WorkflowSucceeded || wf.Counts != (backend.TaskCounts{Succeeded: n + 1}) {
		t.Fatalf("workflow %s with %+v, want succeeded", wf.State, wf.Counts)
	}
	h.noDrift()
}

// TestWorkflowFanOut1000: one completion releases 1,000 tasks, one
// failure cancels 1,000, and either is quick.
func TestWorkflowFanOut1000(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	const n = 1000
	for _, fail := range []bool{false, true} {
		tasks := []backend.TaskParams{wfTask("root")}
		for i := range n {
			tasks = append(tasks, wfTask(fmt.Sprintf("leaf%d", i), "root"))
		}
		id := h.insert(tasks...)
		start := time.Now()
		if fail {
			h.fail("root")
		} else {
			h.run("root")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ending the root of %d took %v", n, d)
		}
		wf := h.get(id)
		if fail {
			if wf.State != backend.WorkflowFailed || wf.Counts != (backend.TaskCounts{Failed: 1, Cancelled: n}) {
				t.Fatalf("after the root failed: %s %+v", wf.State, wf.Counts)
			}
			continue
		}
		if wf.Counts != (backend.TaskCounts{Succeeded: 1, Active: n}) || len(h.claim()) != n {
			t.Fatalf("after the root: %+v, want %d leaves active and claimable", wf.Counts, n)
		}
	}
}

// TestWorkflowCancelCascade: a failure cancels its DepCancel dependants
// transitively, each naming its cause; DepContinue dependants run.
func TestWorkflowCancelCascade(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	id := h.insert(
		wfTask("a"), wfTask("b", "a"), wfTask("c", "b"),
		withContinue(wfTask("d"), "a"), wfTask("e", "d"),
		withContinue(wfTask("f"), "c"), wfTask("g", "f", "b"),
	)
	h.fail("a")
	wf := h.want(id, backend.WorkflowRunning, "a=failed b=cancelled d=active c=cancelled e=waiting f=active g=cancelled")
	reasons := map[string]string{}
	for _, tk := range wf.Tasks {
		reasons[tk.Name] = tk.Reason
		if tk.State.Ended() && !tk.FinishedAt.Equal(h.clock.Now()) {
			t.Errorf("%s finished at %v, want the clock's time", tk.Name, tk.FinishedAt)
		}
	}
	want := map[string]string{
		"a": "a broke",
		"b": backend.DepCancelReason("a", backend.TaskFailed),
		"c": backend.DepCancelReason("b", backend.TaskCancelled),
		"g": backend.DepCancelReason("b", backend.TaskCancelled),
		"d": "", "e": "", "f": "",
	}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	// d read a's failure; f runs though c never did.
	got := h.claimExactly("d", "f")
	deps, err := h.b.WorkflowDeps(t.Context(), got["d"].ID)
	if err != nil || len(deps) != 1 || deps[0].State != backend.TaskFailed || deps[0].Reason != "a broke" || deps[0].Policy != backend.DepContinue {
		t.Fatalf("WorkflowDeps(d) = %+v, %v", deps, err)
	}
	for _, r := range got {
		h.complete(backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
	}
	h.run("e")
	h.want(id, backend.WorkflowFailed, "a=failed b=cancelled d=succeeded c=cancelled e=succeeded f=succeeded g=cancelled")
}

// TestWorkflowContinuePolicy: with DepContinue everywhere, a failed and a
// cancelled dependency both count as done, and the workflow still ends
// failed.
func TestWorkflowContinuePolicy(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	id := h.insert(wfTask("ok"), wfTask("bad"), wfTask("gone"), withContinue(wfTask("join"), "ok", "bad", "gone"))
	got := h.claimExactly("ok", "bad", "gone")
	if res, err := h.b.JobCancel(t.Context(), []int64{got["gone"].ID}); err != nil || res[0].Outcome != backend.CancelRequested {
		t.Fatalf("JobCancel = %v, %v", res, err)
	}
	h.complete(backend.Outcome{Ref: got["ok"].Ref(), Kind: backend.OutcomeDone, Result: []byte(`true`)})
	h.complete(backend.Outcome{Ref: got["bad"].Ref(), Kind: backend.OutcomeFail, Error: "no"})
	h.want(id, backend.WorkflowRunning, "ok=succeeded bad=failed gone=active join=waiting")
	// The cancelled job's holder reports done: the task ends cancelled.
	if res := h.complete(backend.Outcome{Ref: got["gone"].Ref(), Kind: backend.OutcomeDone}); len(res.Cancelled) != 1 {
		t.Fatalf("done of a cancelling job = %+v, want it cancelled", res)
	}
	wf := h.want(id, backend.WorkflowRunning, "ok=succeeded bad=failed gone=cancelled join=active")
	if r := wf.Tasks[2].Reason; r != "cancelled" {
		t.Fatalf("gone's reason %q, want cancelled", r)
	}
	h.run("join")
	h.want(id, backend.WorkflowFailed, "ok=succeeded bad=failed gone=cancelled join=succeeded")
}

// TestWorkflowReplayRestore: a replay brings back what the failure
// cancelled, in the same step, and a DepContinue dependant still waiting
// waits for the replayed task's new end rather than counting it twice.
func TestWorkflowReplayRestore(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	id := h.insert(
		wfTask("a"), wfTask("slow"),
		wfTask("b", "a"), wfTask("c", "a"), wfTask("d", "b", "c"),
		withContinue(wfTask("e", "slow"), "a", "b"),
	)
	got := h.claimExactly("a", "slow")
	h.complete(backend.Outcome{Ref: got["a"].Ref(), Kind: backend.OutcomeFail, Error: "a broke"})
	wf := h.want(id, backend.WorkflowRunning, "a=failed slow=active b=cancelled c=cancelled e=waiting d=cancelled")
	if e := wf.Tasks[4]; !slices.Equal(e.WaitingOn, []string{"slow"}) {
		t.Fatalf("e waits on %v, want slow (a and b ended)", e.WaitingOn)
	}

	if res := h.replay(id, "a"); res.Replayed != 1 || res.Skipped != 0 {
		t.Fatalf("replay = %+v", res)
	}
	wf = h.want(id, backend.WorkflowRunning, "a=active slow=active b=waiting c=waiting e=waiting d=waiting")
	if e := wf.Tasks[4]; !slices.Equal(e.WaitingOn, []string{"slow", "a", "b"}) {
		t.Fatalf("e waits on %v after the replay, want slow, a, b", e.WaitingOn)
	}
	if d := wf.Tasks[5]; !slices.Equal(d.WaitingOn, []string{"b", "c"}) || d.Reason != "" || !d.FinishedAt.IsZero() {
		t.Fatalf("d after the replay = %+v, want waiting on b and c", d)
	}
	// slow ends first: e still waits for a and b.
	h.complete(backend.Outcome{Ref: got["slow"].Ref(), Kind: backend.OutcomeDone})
	h.want(id, backend.WorkflowRunning, "a=active slow=succeeded b=waiting c=waiting e=waiting d=waiting")
	h.run("a")
	h.run("b", "c")
	h.run("e", "d")
	h.want(id, backend.WorkflowSucceeded, "a=succeeded slow=succeeded b=succeeded c=succeeded e=succeeded d=succeeded")
}

// TestWorkflowReplayFailedWorkflow: replaying the only failure of an
// ended workflow runs it again; a task the replay finds nothing to wait
// for is released at once.
func TestWorkflowReplayFailedWorkflow(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	id := h.insert(wfTask("a"), wfTask("x"), wfTask("b", "a"), withContinue(wfTask("c", "x"), "b"))
	// a and x fail, in either order: b is cancelled because of a, c
	// because of x (b, its DepContinue dependency, does not cancel it).
	h.fail("a", "x")
	h.want(id, backend.WorkflowFailed, "a=failed x=failed b=cancelled c=cancelled")
	if res := h.replay(id, "x"); res.Replayed != 1 {
		t.Fatalf("replay = %+v", res)
	}
	// c comes back (cancelled because of x); b is cancelled and counts
	// as done for c (DepContinue): c waits on x only.
	wf := h.want(id, backend.WorkflowRunning, "a=failed x=active b=cancelled c=waiting")
	if c := wf.Tasks[3]; !slices.Equal(c.WaitingOn, []string{"x"}) {
		t.Fatalf("c waits on %v, want x", c.WaitingOn)
	}
	h.run("x")
	h.run("c")
	h.want(id, backend.WorkflowFailed, "a=failed x=succeeded b=cancelled c=succeeded")
	h.replay(id, "a")
	h.want(id, backend.WorkflowRunning, "a=active x=succeeded b=waiting c=succeeded")
	h.run("a")
	h.run("b")
	h.want(id, backend.WorkflowSucceeded, "a=succeeded x=succeeded b=succeeded c=succeeded")
}

// TestWorkflowCancel: waiting tasks and pending jobs end at once, reserved
// ones are told to stop, late ends release nothing, and a replay of the
// cancelled workflow's failure is skipped.
func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	// Claimed in ID order: bad and run1..3; pend stays pending.
	id := h.insert(wfTask("bad"), wfTask("run1"), wfTask("run2"), wfTask("run3"), wfTask("pend"), wfTask("after", "run1"))
	rows, err := h.b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 4, Lease: time.Minute})
	if err != nil || len(rows) != 4 {
		t.Fatalf("claim = %d, %v", len(rows), err)
	}
	held := map[string]*backend.JobRow{}
	for _, r := range rows {
		held[r.Type] = r
	}
	h.complete(backend.Outcome{Ref: held["bad"].Ref(), Kind: backend.OutcomeFail, Error: "no"})
	// run3's job was cancelled on its own before: still active.
	if res, _ := h.b.JobCancel(ctx, []int64{held["run3"].ID}); res[0].Outcome != backend.CancelRequested {
		t.Fatalf("JobCancel(run3) = %v", res)
	}
	h.clock.Add(time.Second)
	res, err := h.b.WorkflowCancel(ctx, id)
	if err != nil || res != (backend.WorkflowCancelResult{Changed: true, State: backend.WorkflowCancelled, Cancelled: 2, Requested: 3}) {
		t.Fatalf("WorkflowCancel = %+v, %v; want pend and after cancelled, run1..3 requested", res, err)
	}
	wf := h.want(id, backend.WorkflowCancelled, "bad=failed run1=cancelled run2=cancelled run3=cancelled pend=cancelled after=cancelled")
	if !wf.FinishedAt.Equal(h.clock.Now()) {
		t.Fatalf("cancelled at %v, want %v", wf.FinishedAt, h.clock.Now())
	}
	for _, tk := range wf.Tasks {
		if tk.State == backend.TaskCancelled && tk.Reason != backend.CancelReasonWorkflow {
			t.Errorf("%s's reason %q, want %q", tk.Name, tk.Reason, backend.CancelReasonWorkflow)
		}
	}
	if refs, _ := h.b.JobCancelling(ctx); len(refs) != 3 {
		t.Fatalf("JobCancelling = %v, want run1..3", refs)
	}
	if kept, _ := h.b.FinishedList(ctx, backend.FinishedListParams{State: backend.FinishedCancelled}); len(kept) != 1 || kept[0].Type != "pend" {
		t.Fatalf("finished cancelled jobs = %v, want pend's", kept)
	}
	h.claimExactly()
	// run1 ends done, run2 by a release, run3 by the sweep: each ends
	// cancelled and releases nothing.
	if r := h.complete(backend.Outcome{Ref: held["run1"].Ref(), Kind: backend.OutcomeDone}); len(r.Cancelled) != 1 {
		t.Fatalf("late done = %+v", r)
	}
	if r, _ := h.b.JobRelease(ctx, []backend.JobRef{held["run2"].Ref()}); len(r.Cancelled) != 1 {
		t.Fatalf("late release = %+v", r)
	}
	h.clock.Add(2 * time.Minute)
	if r, _ := h.b.LeaseSweep(ctx, backend.SweepParams{}); r.Cancelled != 1 {
		t.Fatalf("sweep = %+v", r)
	}
	h.claimExactly()
	h.want(id, backend.WorkflowCancelled, "bad=failed run1=cancelled run2=cancelled run3=cancelled pend=cancelled after=cancelled")
	if r := h.replay(id, "bad"); r.Replayed != 0 || r.Skipped != 1 {
		t.Fatalf("replay in a cancelled workflow = %+v, want skipped", r)
	}
	h.claimExactly()
	if again, err := h.b.WorkflowCancel(ctx, id); err != nil || again != (backend.WorkflowCancelResult{State: backend.WorkflowCancelled}) {
		t.Fatalf("second cancel = %+v, %v", again, err)
	}
	if _, err := h.b.WorkflowCancel(ctx, id+1); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("cancel of no workflow: %v", err)
	}
}

// TestWorkflowPrune: only succeeded and cancelled workflows older than
// the cutoff by the backend's clock go, with their tasks (a failed one
// whose failed job is still there stays; see the conformance suite for
// the rest).
func TestWorkflowPrune(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	ok := h.insert(wfTask("ok"))
	okJob := h.task(ok, "ok").JobID
	h.run("ok")
	bad := h.insert(wfTask("bad"))
	h.fail("bad")
	gone := h.insert(wfTask("gone", "never"), wfTask("never"))
	if _, err := h.b.WorkflowCancel(ctx, gone); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Hour)
	late := h.insert(wfTask("late"))
	h.run("late")
	running := h.insert(wfTask("r"))

	if _, err := h.b.WorkflowPrune(ctx, 0); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("prune 0: %v, want ErrInvalidInput", err)
	}
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
	if _, err := h.b.WorkflowDeps(ctx, okJob); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("deps of a pruned task's job: %v", err)
	}
	list, err := h.b.WorkflowList(ctx, backend.WorkflowListParams{})
	var ids []int64
	for _, w := range list {
		ids = append(ids, w.ID)
	}
	if err != nil || !slices.Equal(ids, []int64{running, late, bad}) {
		t.Fatalf("left %v, %v; want %v", ids, err, []int64{running, late, bad})
	}
	if page, _ := h.b.WorkflowList(ctx, backend.WorkflowListParams{BeforeID: running, Limit: 1}); len(page) != 1 || page[0].ID != late || page[0].Tasks != nil {
		t.Fatalf("page = %v", page)
	}
	if _, err := h.b.WorkflowList(ctx, backend.WorkflowListParams{State: "done"}); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("list of an unknown state: %v", err)
	}
	if st, _ := h.b.WorkflowStats(ctx); st != (backend.WorkflowStats{Running: 1, Succeeded: 1, Failed: 1}) {
		t.Fatalf("stats = %+v", st)
	}
	h.run("r")
}

// TestWorkflowClosed: every method refuses after Close.
func TestWorkflowClosed(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.Options{})
	ctx := t.Context()
	res, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{wfTask("a")}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	_, e1 := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{wfTask("a")}})
	_, e2 := b.WorkflowGet(ctx, res.ID)
	_, e3 := b.WorkflowList(ctx, backend.WorkflowListParams{})
	_, e4 := b.WorkflowCancel(ctx, res.ID)
	_, e5 := b.WorkflowDeps(ctx, res.Jobs["a"])
	_, e6 := b.WorkflowStats(ctx)
	_, e7 := b.WorkflowCheck(ctx)
	_, e8 := b.WorkflowPrune(ctx, time.Hour)
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7, e8} {
		if !errors.Is(err, backend.ErrClosed) {
			t.Errorf("call %d after Close: %v, want ErrClosed", i+1, err)
		}
	}
}

// TestWorkflowPrunedFailedTask: a cancelled workflow with a failed task,
// pruned. The failed task's job no longer reads as a task's (its
// workflow is gone), and its failed row still replays as skipped.
func TestWorkflowPrunedFailedTask(t *testing.T) {
	t.Parallel()
	h := newWF(t)
	ctx := t.Context()
	id := h.insert(wfTask("x"), wfTask("y"))
	rows := h.claimExactly("x", "y")
	h.complete(backend.Outcome{Ref: rows["x"].Ref(), Kind: backend.OutcomeFail, Error: "x broke"})
	if _, err := h.b.WorkflowCancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.complete(backend.Outcome{Ref: rows["y"].Ref(), Kind: backend.OutcomeDone})
	h.want(id, backend.WorkflowCancelled, "x=failed y=cancelled")
	if _, err := h.b.WorkflowDeps(ctx, rows["x"].ID); err != nil {
		t.Fatalf("deps of the failed task's job before the prune: %v", err)
	}
	h.clock.Add(2 * time.Hour)
	if n, err := h.b.WorkflowPrune(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if _, err := h.b.WorkflowDeps(ctx, rows["x"].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("deps of a pruned workflow's failed task: %v, want ErrNotFound", err)
	}
	if res := h.replayJob(rows["x"].ID); res.Skipped != 1 || res.Replayed != 0 {
		t.Fatalf("replay of a pruned cancelled workflow's failed task = %+v, want skipped", res)
	}
}
