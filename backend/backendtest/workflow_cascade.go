package backendtest

import (
	"maps"
	"slices"
	"testing"

	"github.com/jobq/jobq/backend"
)

// testWorkflowCascade: how a task's end travels along its edges (the
// reasons naming each cause, DepContinue counting every end as done), what
// a released job carries, in what order a task reads its dependencies, and
// that a release is an insert (it wakes the queue, it is counted).
func testWorkflowCascade(t *testing.T, h Harness) {
	parallel(t, h, "CascadeReasons", func(t *testing.T, b backend.Backend) {
		// A failure cancels its DepCancel dependants down the graph, each
		// naming the task that caused it, at once: also a task with a
		// DepContinue dependency still to end (h), and one whose other
		// dependency is still running (g). A name that %q escapes is
		// quoted alike on every store.
		w := workflower(t, b)
		const odd = "n\"é\u00ad"
		id := wfInsert(t, w,
			task(odd), task("b", odd), task("c", "b"),
			continueOn(task("d"), odd), task("e", "d"),
			continueOn(task("f"), "c"), task("g", "f", "b"),
			continueOn(task("h", "c"), "d"),
		)
		completeFresh(t, b, fail(wantClaimed(t, b, odd)[odd].Ref(), "broke"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{
			odd: backend.TaskFailed, "b": backend.TaskCancelled, "c": backend.TaskCancelled,
			"d": backend.TaskActive, "e": backend.TaskWaiting, "f": backend.TaskActive,
			"g": backend.TaskCancelled, "h": backend.TaskCancelled,
		})
		reasons := map[string]string{
			odd: "broke",
			"b": backend.DepCancelReason(odd, backend.TaskFailed),
			"c": backend.DepCancelReason("b", backend.TaskCancelled),
			"g": backend.DepCancelReason("b", backend.TaskCancelled),
			"h": backend.DepCancelReason("c", backend.TaskCancelled),
			"d": "", "e": "", "f": "",
		}
		for _, tk := range wf.Tasks {
			if tk.Reason != reasons[tk.Name] {
				t.Errorf("task %q: reason %q, want %q", tk.Name, tk.Reason, reasons[tk.Name])
			}
			if tk.State.Ended() == tk.FinishedAt.IsZero() {
				t.Errorf("task %q is %s with FinishedAt %v", tk.Name, tk.State, tk.FinishedAt)
			}
		}
		// d reads its dependency's failure; f runs though c never did.
		got := wantClaimed(t, b, "d", "f")
		deps, err := w.WorkflowDeps(t.Context(), got["d"].ID)
		if err != nil || len(deps) != 1 || deps[0].Name != odd || deps[0].State != backend.TaskFailed || deps[0].Reason != "broke" || deps[0].Policy != backend.DepContinue {
			t.Fatalf("WorkflowDeps(d) = %+v, %v; want %q failed (broke), continue", deps, err, odd)
		}
		deps, err = w.WorkflowDeps(t.Context(), got["f"].ID)
		if err != nil || len(deps) != 1 || deps[0].State != backend.TaskCancelled || deps[0].Reason != reasons["c"] {
			t.Fatalf("WorkflowDeps(f) = %+v, %v; want c cancelled (%s)", deps, err, reasons["c"])
		}
		completeFresh(t, b, done(got["d"].Ref()), done(got["f"].Ref()))
		runTasks(t, b, "e")
		wf = wantWorkflow(t, w, id, backend.WorkflowFailed)
		if wf.Counts != (backend.TaskCounts{Succeeded: 3, Failed: 1, Cancelled: 4}) {
			t.Errorf("Counts = %+v, want 3 succeeded, 1 failed, 4 cancelled", wf.Counts)
		}
	})

	parallel(t, h, "CancelledDependency", func(t *testing.T, b backend.Backend) {
		// A cancelled job ends its task cancelled ("cancelled"), which
		// cancels its DepCancel dependants transitively and counts as done
		// for its DepContinue ones; a join continuing on a success, a
		// failure and a cancel runs once all three ended, reads all three,
		// and the workflow still ends failed.
		w := workflower(t, b)
		c, _ := canceller(t, b)
		id := wfInsert(t, w, task("x"), task("y", "x"), task("z", "y"), continueOn(task("v"), "x"))
		wantCancel(t, c, []int64{taskNamed(t, wfGet(t, w, id), "x").JobID}, backend.CancelCancelled)
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"x": backend.TaskCancelled, "y": backend.TaskCancelled, "z": backend.TaskCancelled, "v": backend.TaskActive})
		for name, want := range map[string]string{
			"x": backend.CancelledError,
			"y": backend.DepCancelReason("x", backend.TaskCancelled),
			"z": backend.DepCancelReason("y", backend.TaskCancelled),
		} {
			if r := taskNamed(t, wf, name).Reason; r != want {
				t.Errorf("task %s: reason %q, want %q", name, r, want)
			}
		}
		runTasks(t, b, "v")
		wantWorkflow(t, w, id, backend.WorkflowFailed)

		id = wfInsert(t, w, task("ok"), task("bad"), task("gone"), continueOn(task("join"), "ok", "bad", "gone"))
		got := wantClaimed(t, b, "ok", "bad", "gone")
		wantCancel(t, c, []int64{got["gone"].ID}, backend.CancelRequested)
		completeFresh(t, b, backend.Outcome{Ref: got["ok"].Ref(), Kind: backend.OutcomeDone, Result: []byte(`true`)})
		completeFresh(t, b, fail(got["bad"].Ref(), "no"))
		wantTasks(t, w, id, map[string]backend.TaskState{"ok": backend.TaskSucceeded, "bad": backend.TaskFailed, "gone": backend.TaskActive, "join": backend.TaskWaiting})
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		// The cancelled job's holder reports done: the task ends cancelled.
		wantCancelledOutcome(t, b, done(got["gone"].Ref()))
		wf = wantTasks(t, w, id, map[string]backend.TaskState{"gone": backend.TaskCancelled, "join": backend.TaskActive})
		if r := taskNamed(t, wf, "gone").Reason; r != backend.CancelledError {
			t.Errorf("gone's reason %q, want %q", r, backend.CancelledError)
		}
		join := wantClaimed(t, b, "join")["join"]
		deps, err := w.WorkflowDeps(t.Context(), join.ID)
		if err != nil || len(deps) != 3 ||
			deps[0].State != backend.TaskSucceeded || !jsonEqual(deps[0].Result, []byte(`true`)) ||
			deps[1].State != backend.TaskFailed || deps[1].Reason != "no" ||
			deps[2].State != backend.TaskCancelled || deps[2].Reason != backend.CancelledError {
			t.Fatalf("WorkflowDeps(join) = %+v, %v; want ok succeeded (true), bad failed (no), gone cancelled", deps, err)
		}
		completeFresh(t, b, done(join.Ref()))
		wantWorkflow(t, w, id, backend.WorkflowFailed)
	})

	parallel(t, h, "ReleasedJobKeepsOptions", func(t *testing.T, b backend.Backend) {
		// A released task's job carries the options it was given: type,
		// queue, payload, priority, max attempts and metadata; the task
		// shows them too.
		w := workflower(t, b)
		second := task("b", "a")
		second.Job.Priority = 3
		second.Job.MaxAttempts = 5
		second.Job.Payload = []byte(`{"k":2}`)
		second.Job.Metadata = map[string]string{"trace": "x"}
		id := wfInsert(t, w, second, task("a"))
		runTasks(t, b, "a")
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive})
		tb := taskNamed(t, wf, "b")
		if tb.Priority != 3 || tb.Type != "b" || tb.Queue != "w" {
			t.Errorf("task b = %+v, want priority 3, type b, queue w", tb)
		}
		row := wantPendingNow(t, b, tb.JobID, 0)
		if row.Priority != 3 || row.MaxAttempts != 5 || row.Type != "b" || row.Queue != "w" ||
			!jsonEqual(row.Payload, second.Job.Payload) || !maps.Equal(row.Metadata, second.Job.Metadata) {
			t.Fatalf("released job of b = %+v, want priority 3, 5 attempts, its payload and metadata", row)
		}
		r := wantClaimed(t, b, "b")["b"]
		if r.ID != tb.JobID || !maps.Equal(r.Metadata, second.Job.Metadata) {
			t.Fatalf("claimed b = %+v, want job %d with its metadata", r, tb.JobID)
		}
		completeFresh(t, b, done(r.Ref()))
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "DepsOrderAndKeep", func(t *testing.T, b backend.Backend) {
		// WorkflowDeps lists a task's dependencies in its Deps order (not
		// the order they ended or were inserted in); a root has none; a
		// done kept by retention counts as done; the caller's payload and
		// result buffers are not kept.
		w := workflower(t, b)
		top := task("top")
		payload := []byte(`{"x":1}`)
		top.Job.Payload = payload
		id := wfInsert(t, w, top, task("left", "top"), task("right", "top"), task("join", "right", "left"))
		payload[2] = 'y'
		r := wantClaimed(t, b, "top")["top"]
		if !jsonEqual(r.Payload, []byte(`{"x":1}`)) {
			t.Fatalf("top's payload %s, want the inserted one", r.Payload)
		}
		if deps, err := w.WorkflowDeps(t.Context(), r.ID); err != nil || len(deps) != 0 {
			t.Fatalf("WorkflowDeps of a root = %+v, %v; want none", deps, err)
		}
		completeFresh(t, b, done(r.Ref()))
		got := wantClaimed(t, b, "left", "right")
		res := []byte(`{"side":"l"}`)
		kept := backend.Outcome{Ref: got["left"].Ref(), Kind: backend.OutcomeDone, Result: res, Keep: true}
		completeFresh(t, b, kept)
		res[0] = 'X'
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"left": backend.TaskSucceeded, "right": backend.TaskActive, "join": backend.TaskWaiting})
		if j := taskNamed(t, wf, "join"); !slices.Equal(j.WaitingOn, []string{"right"}) {
			t.Fatalf("join waits on %v, want right", j.WaitingOn)
		}
		completeFresh(t, b, backend.Outcome{Ref: got["right"].Ref(), Kind: backend.OutcomeDone, Result: []byte(`2`)})
		join := wantClaimed(t, b, "join")["join"]
		deps, err := w.WorkflowDeps(t.Context(), join.ID)
		if err != nil || len(deps) != 2 ||
			deps[0].Name != "right" || deps[0].State != backend.TaskSucceeded || !jsonEqual(deps[0].Result, []byte(`2`)) ||
			deps[1].Name != "left" || deps[1].State != backend.TaskSucceeded || !jsonEqual(deps[1].Result, []byte(`{"side":"l"}`)) {
			t.Fatalf("WorkflowDeps(join) = %+v, %v; want right (2) then left ({\"side\":\"l\"})", deps, err)
		}
		completeFresh(t, b, done(join.Ref()))
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReleaseIsAnInsert", func(t *testing.T, b backend.Backend) {
		// The job of a task released by its dependency's end wakes the
		// subscribers of its queue (Notifier) and counts as an inserted
		// job (InsertCounter), as an enqueue would.
		w := workflower(t, b)
		n, notifies := backend.As[backend.Notifier](b)
		c, counts := backend.As[backend.InsertCounter](b)
		if !notifies && !counts {
			t.Skip("backend implements neither backend.Notifier nor backend.InsertCounter")
		}
		var ch <-chan struct{}
		if notifies {
			var cancel func()
			ch, cancel = n.Subscribe([]string{"w"})
			t.Cleanup(cancel)
		}
		var before int64
		if counts {
			before = inserted(t, c)
		}
		id := wfInsert(t, w, task("a"), task("b", "a"))
		if notifies {
			wantWake(t, ch, "the insert of a workflow")
		}
		if counts {
			if now := inserted(t, c); now < before+1 {
				t.Fatalf("JobsInserted after a workflow's insert = %d, want at least %d + 1 (a's job)", now, before)
			}
		}
		a := wantClaimed(t, b, "a")["a"]
		if notifies {
			drain(ch)
		}
		completeFresh(t, b, done(a.Ref()))
		if notifies {
			wantWake(t, ch, "a's done releasing b")
		}
		if counts {
			if now := inserted(t, c); now < before+2 {
				t.Fatalf("JobsInserted after b's release = %d, want at least %d + 2 (a's job and b's)", now, before)
			}
		}
		runTasks(t, b, "b")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})
}
