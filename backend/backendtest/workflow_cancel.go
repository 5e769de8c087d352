package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testWorkflowCancelEnds: every way a running task's job can end after a
// cancel (its holder's done, a release, the lease sweep) ends it
// cancelled and releases nothing; a cancel under load neither deadlocks
// nor leaves anything waiting or pending; a pruned workflow is forgotten.
func testWorkflowCancelEnds(t *testing.T, h Harness) {
	parallel(t, h, "CancelLateEnds", func(t *testing.T, b backend.Backend) {
		// At the cancel: bad has failed; run1..run3 are running (run3's
		// own job cancel already requested, and its lease short); pend is
		// pending, later backing off, after waiting.
		w := workflower(t, b)
		c, r := canceller(t, b)
		id := wfInsert(t, w, task("bad"), task("run1"), task("run2"), task("run3"), task("pend"), task("later"), task("after", "run1"))
		held := wantClaimed(t, b, "bad", "run1", "run2", "run3", "pend", "later")
		completeFresh(t, b, fail(held["bad"].Ref(), "no"), retry(held["later"].Ref(), time.Hour, "again"))
		if n := release(t, b, held["run3"].Ref()); n != 1 {
			t.Fatalf("JobRelease(run3) gave back %d jobs, want 1", n)
		}
		short := claim(t, b, 1, shortLease, "w")
		if len(short) != 1 || short[0].Type != "run3" {
			t.Fatalf("claim with a short lease = %v, want run3", ids(short))
		}
		held["run3"] = short[0]
		if n := release(t, b, held["pend"].Ref()); n != 1 {
			t.Fatalf("JobRelease(pend) gave back %d jobs, want 1", n)
		}
		wantCancel(t, c, []int64{held["run3"].ID}, backend.CancelRequested)

		res, err := w.WorkflowCancel(t.Context(), id)
		if err != nil || res != (backend.WorkflowCancelResult{Changed: true, State: backend.WorkflowCancelled, Cancelled: 3, Requested: 3}) {
			t.Fatalf("WorkflowCancel = %+v, %v; want pend, later and after cancelled, run1..run3 requested", res, err)
		}
		cancelled := map[string]backend.TaskState{"bad": backend.TaskFailed}
		for _, n := range []string{"run1", "run2", "run3", "pend", "later", "after"} {
			cancelled[n] = backend.TaskCancelled
		}
		wf := wantTasks(t, w, id, cancelled)
		wantWorkflow(t, w, id, backend.WorkflowCancelled)
		for _, tk := range wf.Tasks {
			if tk.State == backend.TaskCancelled && tk.Reason != backend.CancelReasonWorkflow {
				t.Errorf("task %s: reason %q, want %q", tk.Name, tk.Reason, backend.CancelReasonWorkflow)
			}
		}
		if refs := cancelling(t, c); len(refs) != 3 {
			t.Fatalf("JobCancelling = %v, want run1..run3", refs)
		}
		wantFinished(t, r, backend.StateCancelled, held["pend"].ID)
		wantFinished(t, r, backend.StateCancelled, held["later"].ID)
		claimNone(t, b, "w")

		// run1 ends done, run2 by a release, run3 by the sweep: each ends
		// cancelled and releases nothing.
		wantCancelledOutcome(t, b, done(held["run1"].Ref()))
		if res := releaseRes(t, b, held["run2"].Ref()); len(res.Cancelled) != 1 || len(res.Stale) != 0 {
			t.Fatalf("late release of run2 = %+v, want it cancelled", res)
		}
		eventually(t, waitLimit, "the lease sweep to end run3 cancelled", func() bool {
			return sweep(t, b, backend.SweepParams{}).Cancelled == 1
		})
		claimNone(t, b, "w")
		wantTasks(t, w, id, cancelled)
		if refs := cancelling(t, c); len(refs) != 0 {
			t.Fatalf("JobCancelling after every running job ended = %v, want none", refs)
		}
		for _, n := range []string{"run1", "run2", "run3"} {
			gone(t, b, held[n].ID)
		}
		rr, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{held["bad"].ID}})
		if err != nil || !sameReplay(rr, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("replay in a cancelled workflow = %+v, %v; want 1 skipped", rr, err)
		}
		claimNone(t, b, "w")
		if again, err := w.WorkflowCancel(t.Context(), id); err != nil || again != (backend.WorkflowCancelResult{State: backend.WorkflowCancelled}) {
			t.Fatalf("second WorkflowCancel = %+v, %v; want unchanged, cancelled, nothing counted", again, err)
		}
		if st, err := w.WorkflowStats(t.Context()); err != nil || st != (backend.WorkflowStats{Cancelled: 1}) {
			t.Fatalf("WorkflowStats = %+v, %v; want 1 cancelled", st, err)
		}
	})

	parallel(t, h, "CancelledJobSwept", func(t *testing.T, b backend.Backend) {
		// A task whose running job is cancelled ends when the lease sweep
		// ends the job, cancelling its dependants with it; a running job
		// of a cancelled workflow that the sweep ends leaves its task as
		// the cancel left it.
		w := workflower(t, b)
		c, _ := canceller(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"), continueOn(task("c"), "a"))
		a := claim(t, b, 1, shortLease, "w")
		if len(a) != 1 || a[0].Type != "a" {
			t.Fatalf("claimed %v, want a", ids(a))
		}
		wantCancel(t, c, []int64{a[0].ID}, backend.CancelRequested)
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting})
		eventually(t, waitLimit, "the sweep to end the cancelling job", func() bool {
			return sweep(t, b, backend.SweepParams{}).Cancelled == 1
		})
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskCancelled, "b": backend.TaskCancelled, "c": backend.TaskActive})
		if r := taskNamed(t, wf, "a").Reason; r != backend.CancelledError {
			t.Errorf("a's reason %q, want %q", r, backend.CancelledError)
		}
		if r := taskNamed(t, wf, "b").Reason; r != backend.DepCancelReason("a", backend.TaskCancelled) {
			t.Errorf("b's reason %q, want %q", r, backend.DepCancelReason("a", backend.TaskCancelled))
		}
		held := claim(t, b, 1, shortLease, "w")
		if len(held) != 1 || held[0].Type != "c" {
			t.Fatalf("claimed %v, want c", ids(held))
		}
		if res, err := w.WorkflowCancel(t.Context(), id); err != nil || res.Requested != 1 {
			t.Fatalf("WorkflowCancel = %+v, %v; want c requested", res, err)
		}
		eventually(t, waitLimit, "the sweep to end the cancelled workflow's job", func() bool {
			return sweep(t, b, backend.SweepParams{}).Cancelled == 1
		})
		wf = wantTasks(t, w, id, map[string]backend.TaskState{"c": backend.TaskCancelled})
		wantWorkflow(t, w, id, backend.WorkflowCancelled)
		if r := taskNamed(t, wf, "c").Reason; r != backend.CancelReasonWorkflow {
			t.Errorf("c's reason %q, want %q", r, backend.CancelReasonWorkflow)
		}
		if refs := cancelling(t, c); len(refs) != 0 {
			t.Fatalf("JobCancelling = %v, want none", refs)
		}
		gone(t, b, held[0].ID)
	})

	parallel(t, h, "CancelUnderLoad", func(t *testing.T, b backend.Backend) {
		// WorkflowCancel while three workers complete the workflow's
		// tasks (which release others): it neither deadlocks nor leaves a
		// task waiting or a job of it pending; the late completions are
		// cancelled or applied, never lost. The workers hold gate, which
		// the last task waits on, so the workflow is still running at the
		// cancel however fast they are.
		w := workflower(t, b)
		const n = 200
		tasks := []backend.TaskParams{task("gate")}
		for i := range n {
			tasks = append(tasks, task(fmt.Sprintf("a%03d", i)), task(fmt.Sprintf("b%03d", i), fmt.Sprintf("a%03d", i)))
		}
		tasks = append(tasks, task("z", "b000", fmt.Sprintf("b%03d", n-1), "gate"))
		id := wfInsert(t, w, tasks...)
		var ended atomic.Int64
		var gate atomic.Pointer[backend.JobRow]
		stop := make(chan struct{})
		var workers sync.WaitGroup
		for range 3 {
			workers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 5, Lease: longLease})
					if err != nil {
						t.Errorf("JobClaim: %v", err)
						return
					}
					var outs []backend.Outcome
					for _, r := range rows {
						if r.Type == "gate" {
							gate.Store(r)
							continue
						}
						outs = append(outs, done(r.Ref()))
					}
					if len(outs) == 0 {
						continue
					}
					if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
						t.Errorf("JobComplete: %v", err)
						return
					}
					ended.Add(int64(len(outs)))
				}
			})
		}
		eventually(t, waitLimit, "the workers to end 50 tasks", func() bool { return ended.Load() >= 50 || t.Failed() })
		res, err := w.WorkflowCancel(t.Context(), id)
		close(stop)
		workers.Wait()
		if err != nil || !res.Changed || res.State != backend.WorkflowCancelled {
			t.Fatalf("WorkflowCancel = %+v, %v; want changed, cancelled", res, err)
		}
		if g := gate.Load(); g != nil {
			wantCancelledOutcome(t, b, done(g.Ref()))
		}
		wf := wantWorkflow(t, w, id, backend.WorkflowCancelled)
		if wf.Counts.Waiting+wf.Counts.Active != 0 {
			t.Fatalf("after the cancel: %+v, want nothing waiting or active", wf.Counts)
		}
		claimNone(t, b, "w")
		noDrift(t, w)
		t.Logf("cancel under load after %d tasks ended: %+v, tasks %+v", ended.Load(), res, wf.Counts)
	})

	parallel(t, h, "PrunedWorkflowForgotten", func(t *testing.T, b backend.Backend) {
		// A pruned workflow's tasks go with it: their jobs, done or in
		// failed_jobs, are no longer a task's, and a failed one replays as
		// skipped. A list by an unknown state is refused.
		w := workflower(t, b)
		if _, err := w.WorkflowList(t.Context(), backend.WorkflowListParams{State: "done"}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("WorkflowList of an unknown state: %v, want ErrInvalidInput", err)
		}
		ok := wfInsert(t, w, task("ok"))
		okJob := wantClaimed(t, b, "ok")["ok"]
		completeFresh(t, b, done(okJob.Ref()))
		id := wfInsert(t, w, task("x"), task("y"))
		rows := wantClaimed(t, b, "x", "y")
		completeFresh(t, b, fail(rows["x"].Ref(), "x broke"))
		if _, err := w.WorkflowCancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		wantCancelledOutcome(t, b, done(rows["y"].Ref()))
		wantTasks(t, w, id, map[string]backend.TaskState{"x": backend.TaskFailed, "y": backend.TaskCancelled})
		if _, err := w.WorkflowDeps(t.Context(), rows["x"].ID); err != nil {
			t.Fatalf("WorkflowDeps of the failed task's job before the prune: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // finished_at strictly before now
		if n, err := w.WorkflowPrune(t.Context(), time.Millisecond); err != nil || n != 2 {
			t.Fatalf("WorkflowPrune = %d, %v; want the succeeded and the cancelled workflow", n, err)
		}
		for _, j := range []int64{okJob.ID, rows["x"].ID} {
			if _, err := w.WorkflowDeps(t.Context(), j); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("WorkflowDeps of job %d of a pruned workflow: %v, want ErrNotFound", j, err)
			}
		}
		for _, wid := range []int64{ok, id} {
			if _, err := w.WorkflowGet(t.Context(), wid); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("pruned workflow %d: %v, want ErrNotFound", wid, err)
			}
		}
		rr, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{rows["x"].ID}})
		if err != nil || !sameReplay(rr, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("replay of a pruned cancelled workflow's failed task = %+v, %v; want 1 skipped", rr, err)
		}
		claimNone(t, b, "w")
	})
}
