package backendtest

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// testWorkflowReplayMore: a replay recounts every dependant it brings
// back, DepContinue edges from tasks it restores included; a workflow
// with two failures is replayed one failure at a time; a replay by filter
// restores like one by ID and recomputes the reasons of what stays
// cancelled.
func testWorkflowReplayMore(t *testing.T, h Harness) {
	parallel(t, h, "ReplayRecountsRestored", func(t *testing.T, b backend.Backend) {
		// e waits on slow, and continues on a and on b, which a's failure
		// cancelled: both counted e down. The replay of a brings a and b
		// back, so e waits on all three again, and d on b and c.
		w := workflower(t, b)
		id := wfInsert(t, w,
			task("a"), task("slow"),
			task("b", "a"), task("c", "a"), task("d", "b", "c"),
			continueOn(task("e", "slow"), "a", "b"),
		)
		got := wantClaimed(t, b, "a", "slow")
		completeFresh(t, b, fail(got["a"].Ref(), "a broke"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{
			"a": backend.TaskFailed, "slow": backend.TaskActive, "b": backend.TaskCancelled,
			"c": backend.TaskCancelled, "d": backend.TaskCancelled, "e": backend.TaskWaiting,
		})
		if e := taskNamed(t, wf, "e"); strings.Join(e.WaitingOn, ",") != "slow" {
			t.Fatalf("e waits on %v, want slow (a and b ended)", e.WaitingOn)
		}
		if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{got["a"].ID}}); err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of a = %+v, %v; want 1 replayed", res, err)
		}
		wf = wantTasks(t, w, id, map[string]backend.TaskState{
			"a": backend.TaskActive, "slow": backend.TaskActive, "b": backend.TaskWaiting,
			"c": backend.TaskWaiting, "d": backend.TaskWaiting, "e": backend.TaskWaiting,
		})
		if e := taskNamed(t, wf, "e"); strings.Join(e.WaitingOn, ",") != "slow,a,b" {
			t.Fatalf("e waits on %v after the replay, want slow,a,b", e.WaitingOn)
		}
		if d := taskNamed(t, wf, "d"); strings.Join(d.WaitingOn, ",") != "b,c" || d.Reason != "" || !d.FinishedAt.IsZero() {
			t.Fatalf("d after the replay = %+v, want waiting on b and c, no reason, not finished", d)
		}
		// slow ends first: e still waits for a and b.
		completeFresh(t, b, done(got["slow"].Ref()))
		wantTasks(t, w, id, map[string]backend.TaskState{"slow": backend.TaskSucceeded, "e": backend.TaskWaiting})
		runTasks(t, b, "a")
		runTasks(t, b, "b", "c")
		runTasks(t, b, "d", "e")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReplayOneOfTwoFailures", func(t *testing.T, b backend.Backend) {
		// a and x fail: b is cancelled because of a; c continues on b, so
		// b's cancel counts c down, and x's failure cancels it. Replaying
		// x runs the ended workflow again and brings c back waiting on x
		// alone (b stays cancelled, done for c); it ends failed again,
		// then a's replay brings b back and it succeeds.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("x"), task("b", "a"), continueOn(task("c", "x"), "b"))
		got := wantClaimed(t, b, "a", "x")
		completeFresh(t, b, fail(got["a"].Ref(), "a broke"))
		completeFresh(t, b, fail(got["x"].Ref(), "x broke"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "x": backend.TaskFailed, "b": backend.TaskCancelled, "c": backend.TaskCancelled})
		wantWorkflow(t, w, id, backend.WorkflowFailed)
		if r := taskNamed(t, wf, "c").Reason; r != backend.DepCancelReason("x", backend.TaskFailed) {
			t.Errorf("c's reason %q, want %q", r, backend.DepCancelReason("x", backend.TaskFailed))
		}
		replay := func(jobID int64) {
			t.Helper()
			res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{jobID}})
			if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
				t.Fatalf("replay of job %d = %+v, %v; want 1 replayed", jobID, res, err)
			}
		}
		replay(got["x"].ID)
		wf = wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "x": backend.TaskActive, "b": backend.TaskCancelled, "c": backend.TaskWaiting})
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		if c := taskNamed(t, wf, "c"); strings.Join(c.WaitingOn, ",") != "x" {
			t.Fatalf("c waits on %v, want x", c.WaitingOn)
		}
		runTasks(t, b, "x")
		runTasks(t, b, "c")
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "x": backend.TaskSucceeded, "b": backend.TaskCancelled, "c": backend.TaskSucceeded})
		wantWorkflow(t, w, id, backend.WorkflowFailed)
		replay(got["a"].ID)
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "c": backend.TaskSucceeded})
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		runTasks(t, b, "a")
		runTasks(t, b, "b")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReplayByFilter", func(t *testing.T, b backend.Backend) {
		// A replay by filter (whose chunks commit alone) brings a failed
		// task back with the tasks its failure cancelled, recomputed: one
		// whose other dependency also failed stays cancelled, naming it
		// now, and so do its own dependants. A cancelled workflow's failed
		// task is skipped.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("x"), task("b", "a"), task("c", "b", "x"), task("d", "c"), continueOn(task("e"), "b"))
		roots := wantClaimed(t, b, "a", "x")
		completeFresh(t, b, fail(roots["a"].Ref(), "a broke"))
		completeFresh(t, b, fail(roots["x"].Ref(), "x broke"))
		wantReasons := func(want map[string]string) *backend.Workflow {
			t.Helper()
			wf := wfGet(t, w, id)
			for name, r := range want {
				if got := taskNamed(t, wf, name); got.State != backend.TaskCancelled || got.Reason != r {
					t.Errorf("task %s is %s (%q), want cancelled (%q)", name, got.State, got.Reason, r)
				}
			}
			noDrift(t, w)
			return wf
		}
		wantReasons(map[string]string{
			"b": backend.DepCancelReason("a", backend.TaskFailed),
			"c": backend.DepCancelReason("b", backend.TaskCancelled),
			"d": backend.DepCancelReason("c", backend.TaskCancelled),
		})
		runTasks(t, b, "e")
		wantWorkflow(t, w, id, backend.WorkflowFailed)

		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "w", Type: "a"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) || len(res.ByType) != 1 || res.ByType[0] != (backend.TypeCount{Queue: "w", Type: "a", Count: 1}) {
			t.Fatalf("replay of a by filter = %+v, %v; want 1 replayed, of w/a", res, err)
		}
		wf := wantReasons(map[string]string{
			"c": backend.DepCancelReason("x", backend.TaskFailed),
			"d": backend.DepCancelReason("c", backend.TaskCancelled),
		})
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "e": backend.TaskSucceeded})
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		if tb := taskNamed(t, wf, "b"); strings.Join(tb.WaitingOn, ",") != "a" || !tb.FinishedAt.IsZero() || tb.Reason != "" {
			t.Fatalf("b after the replay = %+v, want waiting on a, no reason, not finished", tb)
		}

		// x's replay by filter brings c and d back too.
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "w"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of x by filter = %+v, %v; want 1 replayed", res, err)
		}
		wantTasks(t, w, id, map[string]backend.TaskState{"x": backend.TaskActive, "c": backend.TaskWaiting, "d": backend.TaskWaiting})
		runTasks(t, b, "a", "x")
		runTasks(t, b, "b")
		runTasks(t, b, "c")
		runTasks(t, b, "d")
		wf = wantWorkflow(t, w, id, backend.WorkflowSucceeded)
		if wf.Counts != (backend.TaskCounts{Succeeded: 6}) {
			t.Fatalf("Counts = %+v, want 6 succeeded", wf.Counts)
		}

		// A cancelled workflow's failed task stays in failed_jobs.
		cancelled := wfInsert(t, w, task("f"), task("g"))
		fg := wantClaimed(t, b, "f", "g")
		completeFresh(t, b, fail(fg["f"].Ref(), "f broke"))
		if _, err := w.WorkflowCancel(t.Context(), cancelled); err != nil {
			t.Fatal(err)
		}
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "w"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("replay by filter in a cancelled workflow = %+v, %v; want 1 skipped", res, err)
		}
		failedByJob(t, b, fg["f"].ID)
		wantTasks(t, w, cancelled, map[string]backend.TaskState{"f": backend.TaskFailed, "g": backend.TaskCancelled})
		wantCancelledOutcome(t, b, done(fg["g"].Ref()))
		claimNone(t, b, "w")
	})
}
