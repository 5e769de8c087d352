package backendtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testWorkflow: backend.Workflower. A task waits until its dependencies
// end and is released by the step that ends the last of them, exactly
// once; a failed or cancelled dependency cancels its dependants (DepCancel)
// or lets them run (DepContinue); a replay brings back what a failure
// cancelled; a user's cancel is final; retention keeps running and failed
// workflows. Backends without the capability skip it.
func testWorkflow(t *testing.T, h Harness) {
	parallel(t, h, "InvalidWritesNothing", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		uniq := task("u")
		uniq.Job.UniqueKey = "k"
		bad := task("bad")
		bad.Job.Payload = []byte(`{`)
		many := make([]backend.TaskParams, backend.MaxWorkflowTasks+1)
		for i := range many {
			many[i] = task(fmt.Sprintf("t%d", i))
		}
		for _, tc := range []struct {
			name, field string
			tasks       []backend.TaskParams
		}{
			{"NoTasks", "workflow", nil},
			{"TooMany", "workflow", many},
			{"Cycle", "workflow", []backend.TaskParams{task("a", "c"), task("b", "a"), task("c", "b"), task("free")}},
			{"UnknownDep", `task "b"`, []backend.TaskParams{task("a"), task("b", "nope")}},
			{"SelfDep", `task "a"`, []backend.TaskParams{task("a", "a")}},
			{"DepTwice", `task "b"`, []backend.TaskParams{task("a"), task("b", "a", "a")}},
			{"DuplicateName", "task name", []backend.TaskParams{task("a"), task("a")}},
			{"EmptyName", "task name", []backend.TaskParams{task("")}},
			{"ControlInName", "task name", []backend.TaskParams{task("a\nb")}},
			{"UniqueKey", `task "u"`, []backend.TaskParams{task("a"), uniq}},
			{"BadPayload", "payload", []backend.TaskParams{task("a"), bad}},
		} {
			_, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: tc.name, Tasks: tc.tasks})
			if err == nil {
				t.Fatalf("%s: WorkflowInsert succeeded, want an InputError", tc.name)
			}
			wantInvalid(t, err, tc.field)
		}
		if err := func() error {
			_, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Tasks: []backend.TaskParams{task("a", "c"), task("b", "a"), task("c", "b")}})
			return err
		}(); err == nil || !strings.Contains(err.Error(), "cycle") {
			t.Fatalf("a cycle: %v, want an error saying cycle", err)
		}
		wfs, err := w.WorkflowList(t.Context(), backend.WorkflowListParams{})
		if err != nil || len(wfs) != 0 {
			t.Fatalf("WorkflowList after refused inserts = %d workflows, %v; want none", len(wfs), err)
		}
		wantNoStats(t, b)
		claimNone(t, b, "w")
	})

	parallel(t, h, "NoDependencies", func(t *testing.T, b backend.Backend) {
		// A task with no dependencies is a job at once; the workflow
		// succeeds with its last task, keeping the task's result.
		w := workflower(t, b)
		before := time.Now()
		res, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "solo", Tasks: []backend.TaskParams{task("only")}})
		if err != nil {
			t.Fatal(err)
		}
		wf := wantWorkflow(t, w, res.ID, backend.WorkflowRunning)
		only := taskNamed(t, wf, "only")
		if wf.Name != "solo" || only.State != backend.TaskActive || only.JobID == 0 || res.Jobs["only"] != only.JobID {
			t.Fatalf("after insert: workflow %+v task %+v, Jobs %v; want running, task active with its job", wf, only, res.Jobs)
		}
		near(t, "CreatedAt", wf.CreatedAt, before, skew)
		if wf.Counts != (backend.TaskCounts{Active: 1}) {
			t.Errorf("Counts = %+v, want 1 active", wf.Counts)
		}
		r := claimOne(t, b, "w")
		if r.ID != only.JobID || r.Type != "only" {
			t.Fatalf("claimed job %d (%s), want the task's job %d", r.ID, r.Type, only.JobID)
		}
		completeFresh(t, b, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone, Result: []byte(`{"size":3}`)})
		wf = wantWorkflow(t, w, res.ID, backend.WorkflowSucceeded)
		only = taskNamed(t, wf, "only")
		if only.State != backend.TaskSucceeded || !jsonEqual(only.Result, []byte(`{"size":3}`)) || only.FinishedAt.IsZero() {
			t.Fatalf("task after done = %+v, want succeeded with its result", only)
		}
		if wf.Counts != (backend.TaskCounts{Succeeded: 1}) {
			t.Errorf("Counts = %+v, want 1 succeeded", wf.Counts)
		}
		noDrift(t, w)
	})

	parallel(t, h, "Chain", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		// Given out of order: insert order is topological.
		id := wfInsert(t, w, task("c", "b"), task("b", "a"), task("a"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "c": backend.TaskWaiting})
		var order []string
		for _, tk := range wf.Tasks {
			order = append(order, tk.Name)
		}
		if strings.Join(order, ",") != "a,b,c" {
			t.Errorf("tasks in order %v, want a,b,c (dependencies first)", order)
		}
		if b := taskNamed(t, wf, "b"); b.JobID != 0 || strings.Join(b.WaitingOn, ",") != "a" || len(b.Deps) != 1 || b.Deps[0] != (backend.Dep{Task: "a"}) {
			t.Errorf("waiting task b = %+v, want no job, waiting on a", b)
		}
		wantStats(t, b, backend.QueueStats{Queue: "w", Pending: 1})
		runTasks(t, b, "a")
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive, "c": backend.TaskWaiting})
		runTasks(t, b, "b")
		runTasks(t, b, "c")
		claimNone(t, b, "w")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
		noDrift(t, w)
	})

	parallel(t, h, "Diamond", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("top"), task("left", "top"), task("right", "top"), task("join", "left", "right"))
		runTasks(t, b, "top")
		both := wantClaimed(t, b, "left", "right")
		completeFresh(t, b, done(both["left"].Ref()))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"join": backend.TaskWaiting})
		if j := taskNamed(t, wf, "join"); strings.Join(j.WaitingOn, ",") != "right" {
			t.Errorf("join waits on %v, want right only", j.WaitingOn)
		}
		claimNone(t, b, "w")
		completeFresh(t, b, done(both["right"].Ref()))
		runTasks(t, b, "join")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "DelayCountsFromRelease", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		later := task("later", "first")
		later.Job.Delay = time.Hour
		id := wfInsert(t, w, task("first"), later)
		runTasks(t, b, "first")
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"later": backend.TaskActive})
		j := get(t, b, taskNamed(t, wf, "later").JobID)
		near(t, "released task's AvailableAt", j.AvailableAt, time.Now().Add(time.Hour), skew)
		claimNone(t, b, "w")
	})

	parallel(t, h, "Results", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b"), continueOn(task("join", "a"), "b"))
		got := wantClaimed(t, b, "a", "b")
		completeFresh(t, b,
			backend.Outcome{Ref: got["a"].Ref(), Kind: backend.OutcomeDone, Result: []byte(`{"n":1}`)},
			fail(got["b"].Ref(), "b broke"))
		join := wantClaimed(t, b, "join")["join"]
		deps, err := w.WorkflowDeps(t.Context(), join.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(deps) != 2 || deps[0].Name != "a" || deps[0].State != backend.TaskSucceeded || !jsonEqual(deps[0].Result, []byte(`{"n":1}`)) || deps[0].Policy != backend.DepCancel ||
			deps[1].Name != "b" || deps[1].State != backend.TaskFailed || deps[1].Result != nil || !strings.Contains(deps[1].Reason, "b broke") || deps[1].Policy != backend.DepContinue {
			t.Fatalf("WorkflowDeps(join) = %+v, want a succeeded with its result, then b failed with its error", deps)
		}
		// A result on a job that is no task is accepted and goes nowhere.
		plain := insertOne(t, b, job("plain", "t"))
		completeFresh(t, b, backend.Outcome{Ref: claimOne(t, b, "plain").Ref(), Kind: backend.OutcomeDone, Result: []byte(`1`)})
		if _, err := w.WorkflowDeps(t.Context(), plain); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("WorkflowDeps of a plain job: %v, want ErrNotFound", err)
		}
		// Results are checked before anything is written.
		big := backend.Outcome{Ref: join.Ref(), Kind: backend.OutcomeDone, Result: []byte(`"` + strings.Repeat("x", backend.MaxResultBytes) + `"`)}
		if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{big}}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("a result over MaxResultBytes: %v, want ErrInvalidInput", err)
		}
		wantStatus(t, b, join.ID, backend.StateReserved, 1)
		// JSON whose string holds a byte that is not UTF-8 passes
		// json.Valid but not PostgreSQL's json: refused on every store
		// (issue 39), where before PostgreSQL alone refused it when the
		// task ended, and the task's job ran again until its lease's
		// sweep failed it.
		notUTF8 := backend.Outcome{Ref: join.Ref(), Kind: backend.OutcomeDone, Result: []byte("{\"s\":\"a\xffb\"}")}
		_, err = b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{notUTF8}})
		wantInvalid(t, err, "result")
		wantStatus(t, b, join.ID, backend.StateReserved, 1)
		completeFresh(t, b, done(join.Ref()))
		// b failed: the workflow ends failed though join ran.
		wantWorkflow(t, w, id, backend.WorkflowFailed)
	})

	testWorkflowFailure(t, h)
	testWorkflowReplay(t, h)
	testWorkflowCancel(t, h)
	testWorkflowConcurrency(t, h)
	testWorkflowRetention(t, h)
	testWorkflowCascade(t, h)
	testWorkflowCancelEnds(t, h)
	testWorkflowReplayMore(t, h)
	testWorkflowScale(t, h)
	testWorkflowNames(t, h)
	testWorkflowFailedNames(t, h)
}

// testWorkflowFailure: every way a task's job can end badly ends the task
// and resolves its edges by their policy.
func testWorkflowFailure(t *testing.T, h Harness) {
	parallel(t, h, "FailCascades", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"), task("c", "b"), continueOn(task("d"), "a"), continueOn(task("e"), "c"), task("f"))
		got := wantClaimed(t, b, "a", "f")
		completeFresh(t, b, fail(got["a"].Ref(), "a broke"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{
			"a": backend.TaskFailed, "b": backend.TaskCancelled, "c": backend.TaskCancelled,
			"d": backend.TaskActive, "e": backend.TaskActive, "f": backend.TaskActive,
		})
		if r := taskNamed(t, wf, "a").Reason; !strings.Contains(r, "a broke") {
			t.Errorf("failed task's reason %q, want its error", r)
		}
		if r := taskNamed(t, wf, "b").Reason; r != backend.DepCancelReason("a", backend.TaskFailed) {
			t.Errorf("b's reason %q, want %q", r, backend.DepCancelReason("a", backend.TaskFailed))
		}
		if r := taskNamed(t, wf, "c").Reason; r != backend.DepCancelReason("b", backend.TaskCancelled) {
			t.Errorf("c's reason %q, want %q", r, backend.DepCancelReason("b", backend.TaskCancelled))
		}
		if c := taskNamed(t, wf, "c"); c.JobID != 0 || c.FinishedAt.IsZero() {
			t.Errorf("c = %+v, want no job and a FinishedAt", c)
		}
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		completeFresh(t, b, done(got["f"].Ref()))
		runTasks(t, b, "d", "e")
		wf = wantWorkflow(t, w, id, backend.WorkflowFailed)
		if wf.Counts != (backend.TaskCounts{Succeeded: 3, Failed: 1, Cancelled: 2}) {
			t.Errorf("Counts = %+v, want 3 succeeded, 1 failed, 2 cancelled", wf.Counts)
		}
	})

	parallel(t, h, "SweepSpentFails", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		a := task("a")
		a.Job.MaxAttempts = 1
		id := wfInsert(t, w, a, task("b", "a"))
		claim(t, b, 1, shortLease, "w")
		eventually(t, waitLimit, "the lease sweep to fail the task", func() bool {
			if _, err := b.LeaseSweep(t.Context(), backend.SweepParams{}); err != nil {
				t.Fatal(err)
			}
			return wfGet(t, w, id).State == backend.WorkflowFailed
		})
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled})
	})

	parallel(t, h, "SweepRescueKeepsWaiting", func(t *testing.T, b backend.Backend) {
		// A holder that dies before writing its completion: the sweep
		// rescues the job, nothing is released; the next holder's done
		// releases the dependant once, and the dead holder's late write
		// is stale.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		dead := claim(t, b, 1, shortLease, "w")[0]
		eventually(t, waitLimit, "the lease sweep to rescue the task's job", func() bool {
			res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
			if err != nil {
				t.Fatal(err)
			}
			return res.Rescued == 1
		})
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting})
		live := claimOne(t, b, "w")
		completeFresh(t, b, done(live.Ref()))
		if res := complete(t, b, done(dead.Ref())); len(res.Stale) != 1 {
			t.Fatalf("the dead holder's late done = %+v, want it stale", res)
		}
		runTasks(t, b, "b")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReleaseSpentFails", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		a := task("a")
		a.Job.MaxAttempts = 1
		id := wfInsert(t, w, a, task("b", "a"))
		for i := range backend.MaxFreeReleases + 1 {
			r := claimOne(t, b, "w")
			if _, err := b.JobRelease(t.Context(), []backend.JobRef{r.Ref()}); err != nil {
				t.Fatalf("release %d: %v", i+1, err)
			}
		}
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskFailed, "b": backend.TaskCancelled})
		wantWorkflow(t, w, id, backend.WorkflowFailed)
	})

	parallel(t, h, "JobCancelEndsTask", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		c, _ := canceller(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"), continueOn(task("c"), "a"), task("r"))
		a := taskNamed(t, wfGet(t, w, id), "a").JobID
		wantCancel(t, c, []int64{a}, backend.CancelCancelled)
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskCancelled, "b": backend.TaskCancelled, "c": backend.TaskActive})
		if r := taskNamed(t, wf, "b").Reason; r != backend.DepCancelReason("a", backend.TaskCancelled) {
			t.Errorf("b's reason %q, want %q", r, backend.DepCancelReason("a", backend.TaskCancelled))
		}
		// A running task cancelled through its job: its holder's done
		// ends it cancelled, and releases nothing.
		held := wantClaimed(t, b, "c", "r")
		wantCancel(t, c, []int64{held["r"].ID}, backend.CancelRequested)
		wantTasks(t, w, id, map[string]backend.TaskState{"r": backend.TaskActive})
		wantCancelledOutcome(t, b, done(held["r"].Ref()))
		completeFresh(t, b, done(held["c"].Ref()))
		wantTasks(t, w, id, map[string]backend.TaskState{"r": backend.TaskCancelled, "c": backend.TaskSucceeded})
		wantWorkflow(t, w, id, backend.WorkflowFailed)
	})
}

// testWorkflowReplay: a failed task's replay brings back, in one step,
// the tasks its failure cancelled, so the workflow can still succeed.
func testWorkflowReplay(t *testing.T, h Harness) {
	parallel(t, h, "ReplayRestores", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"), task("c", "b"), continueOn(task("d"), "a"))
		completeFresh(t, b, fail(claimOne(t, b, "w").Ref(), "a broke"))
		runTasks(t, b, "d")
		wantWorkflow(t, w, id, backend.WorkflowFailed)
		a := taskNamed(t, wfGet(t, w, id), "a").JobID
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{a}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of the failed task = %+v, %v; want 1 replayed", res, err)
		}
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting, "c": backend.TaskWaiting, "d": backend.TaskSucceeded})
		wantWorkflow(t, w, id, backend.WorkflowRunning)
		if ta := taskNamed(t, wf, "a"); ta.JobID != a || ta.Reason != "" || !ta.FinishedAt.IsZero() {
			t.Errorf("replayed task = %+v, want its job %d back, no reason, not finished", ta, a)
		}
		if c := taskNamed(t, wf, "c"); strings.Join(c.WaitingOn, ",") != "b" || c.Reason != "" {
			t.Errorf("restored c = %+v, want waiting on b", c)
		}
		runTasks(t, b, "a")
		runTasks(t, b, "b")
		runTasks(t, b, "c")
		wf = wantWorkflow(t, w, id, backend.WorkflowSucceeded)
		if wf.Counts != (backend.TaskCounts{Succeeded: 4}) {
			t.Errorf("Counts = %+v, want 4 succeeded", wf.Counts)
		}
	})

	parallel(t, h, "ReplayKeepsOtherFailure", func(t *testing.T, b backend.Backend) {
		// join depends on two failed tasks: replaying one leaves it
		// cancelled by the other; replaying both brings it back.
		w := workflower(t, b)
		id := wfInsert(t, w, task("x"), task("y"), task("join", "x", "y"))
		for _, r := range wantClaimed(t, b, "x", "y") {
			completeFresh(t, b, fail(r.Ref(), "broke"))
		}
		wf := wfGet(t, w, id)
		x, y := failedByJob(t, b, taskNamed(t, wf, "x").JobID), failedByJob(t, b, taskNamed(t, wf, "y").JobID)
		if _, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{x.JobID}}); err != nil {
			t.Fatal(err)
		}
		wf = wantTasks(t, w, id, map[string]backend.TaskState{"x": backend.TaskActive, "y": backend.TaskFailed, "join": backend.TaskCancelled})
		if r := taskNamed(t, wf, "join").Reason; r != backend.DepCancelReason("y", backend.TaskFailed) {
			t.Errorf("join's reason %q, want %q", r, backend.DepCancelReason("y", backend.TaskFailed))
		}
		if _, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{y.JobID}}); err != nil {
			t.Fatal(err)
		}
		wantTasks(t, w, id, map[string]backend.TaskState{"x": backend.TaskActive, "y": backend.TaskActive, "join": backend.TaskWaiting})
		runTasks(t, b, "x", "y")
		runTasks(t, b, "join")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ReplayRecountsContinue", func(t *testing.T, b backend.Backend) {
		// e waits on a (continue) and c. a's failure counted e down; a's
		// replay counts it up again, so e waits for a's new end and c.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("c"), continueOn(task("e", "c"), "a"))
		got := wantClaimed(t, b, "a", "c")
		completeFresh(t, b, fail(got["a"].Ref(), "broke"))
		wf := wantTasks(t, w, id, map[string]backend.TaskState{"e": backend.TaskWaiting})
		if e := taskNamed(t, wf, "e"); strings.Join(e.WaitingOn, ",") != "c" {
			t.Fatalf("e waits on %v, want c", e.WaitingOn)
		}
		f := failedByJob(t, b, got["a"].ID)
		if _, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{f.JobID}}); err != nil {
			t.Fatal(err)
		}
		wf = wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "e": backend.TaskWaiting})
		if e := taskNamed(t, wf, "e"); strings.Join(e.WaitingOn, ",") != "c,a" {
			t.Fatalf("after the replay e waits on %v, want c,a", e.WaitingOn)
		}
		runTasks(t, b, "a")
		wantTasks(t, w, id, map[string]backend.TaskState{"e": backend.TaskWaiting})
		claimNone(t, b, "w")
		completeFresh(t, b, done(got["c"].Ref()))
		runTasks(t, b, "e")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})

	parallel(t, h, "ConcurrentReplaysOneWins", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		completeFresh(t, b, fail(claimOne(t, b, "w").Ref(), "broke"))
		f := failedByJob(t, b, taskNamed(t, wfGet(t, w, id), "a").JobID)
		results := make(chan int, 4)
		for range 4 {
			go func() {
				res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{f.JobID}})
				if err != nil && !errors.Is(err, backend.ErrNotFound) {
					t.Errorf("concurrent replay: %v", err)
				}
				results <- res.Replayed
			}()
		}
		total := 0
		for range 4 {
			total += <-results
		}
		if total != 1 {
			t.Fatalf("4 concurrent replays replayed %d times, want 1", total)
		}
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting})
		runTasks(t, b, "a")
		runTasks(t, b, "b")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})
}

// testWorkflowCancel: a user's cancel stops everything not running, tells
// the running to stop, releases nothing afterwards and is not undone by a
// replay.
func testWorkflowCancel(t *testing.T, h Harness) {
	parallel(t, h, "CancelDuringFanOut", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		c, _ := canceller(t, b)
		tasks := []backend.TaskParams{task("root")}
		var leaves []string
		for i := range 6 {
			leaves = append(leaves, fmt.Sprintf("leaf%d", i))
			tasks = append(tasks, task(leaves[i], "root"))
		}
		tasks = append(tasks, task("join", leaves...))
		id := wfInsert(t, w, tasks...)
		runTasks(t, b, "root")
		held := claim(t, b, 3, longLease, "w")
		if len(held) != 3 {
			t.Fatalf("claimed %d leaves, want 3", len(held))
		}
		// One running leaf fails before the cancel: it is in failed_jobs.
		completeFresh(t, b, fail(held[2].Ref(), "broke"))
		failedLeaf := failedByJob(t, b, held[2].ID)
		res, err := w.WorkflowCancel(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		// 3 pending leaves; join was already cancelled by the failure.
		if !res.Changed || res.State != backend.WorkflowCancelled || res.Cancelled != 3 || res.Requested != 2 {
			t.Fatalf("WorkflowCancel = %+v, want changed, cancelled, 3 cancelled at once, 2 requested", res)
		}
		claimNone(t, b, "w")
		if refs := cancelling(t, c); len(refs) != 2 {
			t.Fatalf("JobCancelling = %v, want the 2 running leaves", refs)
		}
		wf := wantWorkflow(t, w, id, backend.WorkflowCancelled)
		for _, tk := range wf.Tasks {
			if tk.Name != "root" && tk.Name != "join" && tk.JobID != held[2].ID && (tk.State != backend.TaskCancelled || tk.Reason != backend.CancelReasonWorkflow) {
				t.Errorf("task %s = %s (%q) after the cancel, want cancelled: %s", tk.Name, tk.State, tk.Reason, backend.CancelReasonWorkflow)
			}
		}
		// The running leaves report done late: they end cancelled and
		// release nothing.
		wantCancelledOutcome(t, b, done(held[0].Ref()))
		wantCancelledOutcome(t, b, done(held[1].Ref()))
		claimNone(t, b, "w")
		wf = wantWorkflow(t, w, id, backend.WorkflowCancelled)
		if j := taskNamed(t, wf, "join"); j.State != backend.TaskCancelled || j.JobID != 0 {
			t.Fatalf("join after the cancel = %+v, want cancelled without a job", j)
		}
		// A cancelled workflow's failed task is not replayed.
		rr, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{failedLeaf.JobID}})
		if err != nil || !sameReplay(rr, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("replay in a cancelled workflow = %+v, %v; want 1 skipped", rr, err)
		}
		failedByJob(t, b, held[2].ID)
		claimNone(t, b, "w")
		// A second cancel changes nothing.
		again, err := w.WorkflowCancel(t.Context(), id)
		if err != nil || again.Changed || again.State != backend.WorkflowCancelled {
			t.Fatalf("second WorkflowCancel = %+v, %v; want unchanged, cancelled", again, err)
		}
		noDrift(t, w)
	})

	parallel(t, h, "CancelEnded", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"))
		runTasks(t, b, "a")
		res, err := w.WorkflowCancel(t.Context(), id)
		if err != nil || res.Changed || res.State != backend.WorkflowSucceeded {
			t.Fatalf("cancel of a succeeded workflow = %+v, %v; want unchanged, succeeded", res, err)
		}
		if _, err := w.WorkflowCancel(t.Context(), id+1000); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("cancel of an unknown workflow: %v, want ErrNotFound", err)
		}
		if _, err := w.WorkflowGet(t.Context(), id+1000); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("get of an unknown workflow: %v, want ErrNotFound", err)
		}
	})
}

// testWorkflowRetention: prune deletes succeeded and cancelled workflows,
// and failed ones none of whose tasks can be replayed; lists and stats
// count by state.
func testWorkflowRetention(t *testing.T, h Harness) {
	parallel(t, h, "PruneAndList", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		ok := wfInsert(t, w, task("a"))
		runTasks(t, b, "a")
		bad := wfInsert(t, w, task("b"))
		completeFresh(t, b, fail(claimOne(t, b, "w").Ref(), "broke"))
		// The cancelled workflow has a failed task: after its prune, that
		// task's failed job is still not replayed.
		cancelled := wfInsert(t, w, task("x"), task("c", "x"), task("y"))
		xy := wantClaimed(t, b, "x", "y")
		completeFresh(t, b, done(xy["x"].Ref()), fail(xy["y"].Ref(), "broke"))
		if _, err := w.WorkflowCancel(t.Context(), cancelled); err != nil {
			t.Fatal(err)
		}
		failedY := failedByJob(t, b, xy["y"].ID)
		running := wfInsert(t, w, task("r"), task("s", "r"))
		st, err := w.WorkflowStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st != (backend.WorkflowStats{Running: 1, Succeeded: 1, Failed: 1, Cancelled: 1, TasksWaiting: 1}) {
			t.Fatalf("WorkflowStats = %+v, want one of each state and 1 task waiting", st)
		}
		list, err := w.WorkflowList(t.Context(), backend.WorkflowListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, wf := range list {
			got = append(got, wf.ID)
			if wf.Tasks != nil {
				t.Errorf("WorkflowList filled Tasks of %d", wf.ID)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint([]int64{running, cancelled, bad, ok}) {
			t.Fatalf("WorkflowList = %v, want newest first %v", got, []int64{running, cancelled, bad, ok})
		}
		if list[0].Counts != (backend.TaskCounts{Active: 1, Waiting: 1}) {
			t.Errorf("listed running workflow Counts = %+v, want 1 active 1 waiting", list[0].Counts)
		}
		page, err := w.WorkflowList(t.Context(), backend.WorkflowListParams{Limit: 1, BeforeID: cancelled})
		if err != nil || len(page) != 1 || page[0].ID != bad {
			t.Fatalf("WorkflowList before %d limit 1 = %v, %v; want %d", cancelled, page, err, bad)
		}
		failed, err := w.WorkflowList(t.Context(), backend.WorkflowListParams{State: backend.WorkflowFailed})
		if err != nil || len(failed) != 1 || failed[0].ID != bad {
			t.Fatalf("WorkflowList failed = %v, %v; want %d", failed, err, bad)
		}

		if n, err := w.WorkflowPrune(t.Context(), time.Hour); err != nil || n != 0 {
			t.Fatalf("prune older than an hour = %d, %v; want 0", n, err)
		}
		_, err = w.WorkflowPrune(t.Context(), 0)
		wantInvalid(t, err, "older than")
		time.Sleep(20 * time.Millisecond) // finished_at strictly before now
		if n, err := w.WorkflowPrune(t.Context(), time.Millisecond); err != nil || n != 2 {
			t.Fatalf("prune = %d, %v; want the succeeded and the cancelled workflow", n, err)
		}
		for _, id := range []int64{ok, cancelled} {
			if _, err := w.WorkflowGet(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("pruned workflow %d: %v, want ErrNotFound", id, err)
			}
		}
		wantWorkflow(t, w, bad, backend.WorkflowFailed)
		if rr, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{failedY.JobID}}); err != nil || !sameReplay(rr, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("replay of a pruned cancelled workflow's failed task = %+v, %v; want 1 skipped", rr, err)
		}
		wantTasks(t, w, running, map[string]backend.TaskState{"r": backend.TaskActive, "s": backend.TaskWaiting})
		runTasks(t, b, "r")
		runTasks(t, b, "s")
		wantWorkflow(t, w, running, backend.WorkflowSucceeded)
	})

	parallel(t, h, "PruneFailedOnceNotReplayable", func(t *testing.T, b backend.Backend) {
		// A failed workflow stays while a task of it can be replayed (its
		// failed job is among the failed jobs). Once none can, because
		// each such job was purged (by ID or by filter) or because the
		// workflow failed through a cancelled job, it is pruned like a
		// succeeded one.
		w := workflower(t, b)
		failRoot := func(root string) (int64, *backend.FailedJob) {
			t.Helper()
			id := wfInsert(t, w, task(root), task(root+"2", root))
			r := wantClaimed(t, b, root)[root]
			completeFresh(t, b, fail(r.Ref(), "broke"))
			wantWorkflow(t, w, id, backend.WorkflowFailed)
			return id, failedByJob(t, b, r.ID)
		}
		byID, failedA := failRoot("a")
		byFilter, _ := failRoot("f")
		kept, failedK := failRoot("k")
		two := wfInsert(t, w, task("m"), task("n"), task("o", "m", "n"))
		mn := wantClaimed(t, b, "m", "n")
		completeFresh(t, b, fail(mn["m"].Ref(), "broke"), fail(mn["n"].Ref(), "broke"))
		failedM := failedByJob(t, b, mn["m"].ID)
		wantWorkflow(t, w, two, backend.WorkflowFailed)
		prunable := 0
		var viaCancel int64
		if c, ok := b.(backend.Canceller); ok {
			res, err := w.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "wf", Tasks: []backend.TaskParams{task("c"), task("c2", "c")}})
			if err != nil {
				t.Fatal(err)
			}
			viaCancel = res.ID
			if _, err := c.JobCancel(t.Context(), []int64{res.Jobs["c"]}); err != nil {
				t.Fatal(err)
			}
			wantWorkflow(t, w, viaCancel, backend.WorkflowFailed)
			prunable = 1
		}

		time.Sleep(20 * time.Millisecond) // finished_at strictly before now
		if n, err := w.WorkflowPrune(t.Context(), time.Millisecond); err != nil || n != prunable {
			t.Fatalf("prune = %d, %v; want %d (only a workflow failed through a cancelled job)", n, err, prunable)
		}
		if viaCancel != 0 {
			if _, err := w.WorkflowGet(t.Context(), viaCancel); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("workflow %d failed through a cancelled job, pruned: %v, want ErrNotFound", viaCancel, err)
			}
		}
		for _, p := range []struct {
			params backend.FailedPurgeParams
			want   int
		}{
			{backend.FailedPurgeParams{IDs: []int64{failedA.JobID, failedM.JobID}}, 2},
			{backend.FailedPurgeParams{Filter: backend.FailedFilter{Type: "f"}}, 1},
		} {
			if n, err := b.FailedPurge(t.Context(), p.params); err != nil || n != p.want {
				t.Fatalf("FailedPurge(%+v) = %d, %v; want %d", p.params, n, err, p.want)
			}
		}
		time.Sleep(5 * time.Millisecond)
		if n, err := w.WorkflowPrune(t.Context(), time.Millisecond); err != nil || n != 2 {
			t.Fatalf("prune after the purges = %d, %v; want 2 (the workflows whose failed jobs are all gone)", n, err)
		}
		for _, id := range []int64{byID, byFilter} {
			if _, err := w.WorkflowGet(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("workflow %d with no failed job left: %v, want ErrNotFound", id, err)
			}
		}
		// Two with one of its two failed jobs left, and kept with its
		// own, stay and can still be replayed.
		wantWorkflow(t, w, two, backend.WorkflowFailed)
		if st, err := w.WorkflowStats(t.Context()); err != nil || st.Failed != 2 {
			t.Fatalf("WorkflowStats = %+v, %v; want 2 failed", st, err)
		}
		if rr, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{failedK.JobID}}); err != nil || !sameReplay(rr, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("replay of kept's failed task = %+v, %v", rr, err)
		}
		wantTasks(t, w, kept, map[string]backend.TaskState{"k": backend.TaskActive, "k2": backend.TaskWaiting})
		runTasks(t, b, "k")
		runTasks(t, b, "k2")
		wantWorkflow(t, w, kept, backend.WorkflowSucceeded)
		if drift, err := w.WorkflowCheck(t.Context()); err != nil || len(drift) != 0 {
			t.Fatalf("WorkflowCheck = %v, %v", drift, err)
		}
	})

	parallel(t, h, "PruneDuringLongWorkflow", func(t *testing.T, b backend.Backend) {
		// Retention of finished jobs and workflows runs between every
		// step of a long chain and deletes none of its tasks.
		w := workflower(t, b)
		var tasks []backend.TaskParams
		for i := range 5 {
			p := task(fmt.Sprintf("s%d", i))
			if i > 0 {
				p = task(fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i-1))
			}
			tasks = append(tasks, p)
		}
		id := wfInsert(t, w, tasks...)
		r, hasRetainer := b.(backend.Retainer)
		for i := range 5 {
			time.Sleep(5 * time.Millisecond)
			if n, err := w.WorkflowPrune(t.Context(), time.Millisecond); err != nil || n != 0 {
				t.Fatalf("prune during the workflow = %d, %v; want 0", n, err)
			}
			if hasRetainer {
				for _, st := range []backend.JobState{backend.StateCompleted, backend.StateCancelled} {
					if _, err := r.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: st, OlderThan: time.Millisecond}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if wf := wfGet(t, w, id); len(wf.Tasks) != 5 {
				t.Fatalf("after prune %d the workflow has %d tasks, want 5", i, len(wf.Tasks))
			}
			runTasks(t, b, fmt.Sprintf("s%d", i))
		}
		wf := wantWorkflow(t, w, id, backend.WorkflowSucceeded)
		if wf.Counts != (backend.TaskCounts{Succeeded: 5}) {
			t.Fatalf("Counts = %+v, want 5 succeeded", wf.Counts)
		}
	})
}
