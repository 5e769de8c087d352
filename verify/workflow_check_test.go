package verify

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// wfRun is a hand-made workflow run of "r1": workflow 7 (number 1, sent
// once) of parts p0 (job 1) and p1 (job 2) and a join (job 3), as the
// backend holds it at the end in state, every task acknowledged.
func wfRun(state backend.WorkflowState, joinState backend.TaskState) finalState {
	part := func(name string, job int64) *backend.WorkflowTask {
		return &backend.WorkflowTask{Name: name, State: backend.TaskSucceeded, JobID: job}
	}
	join := &backend.WorkflowTask{Name: joinTask, State: joinState, JobID: 3,
		Deps: []backend.Dep{{Task: "p0"}, {Task: "p1"}}}
	if joinState == backend.TaskCancelled {
		join.JobID = 0
	}
	fs := acked(1, 2, 3)
	fs.wf = &wfState{fanOut: 2, acked: map[int64]int64{7: 1}, perm: map[int64]bool{},
		stored: []*backend.Workflow{{ID: 7, Name: "verify-r1-1-1", State: state,
			Tasks: []*backend.WorkflowTask{part("p0", 1), part("p1", 2), join}}}}
	return fs
}

// wfParts is the history of both parts succeeding by time 230.
const wfParts = `
	100 claim proc=w0.0 job=1 att=1 tok=11
	110 start proc=w0.0 job=1 seq=0 att=1 tok=11 wf=1 try=1 task=p0
	120 end proc=w0.0 job=1 att=1 tok=11 res=ok
	130 written proc=w0.0 job=1 att=1 tok=11 kind=done
	200 claim proc=w0.0 job=2 att=1 tok=21
	210 start proc=w0.0 job=2 seq=1 att=1 tok=21 wf=1 try=1 task=p1
	220 end proc=w0.0 job=2 att=1 tok=21 res=ok
	230 written proc=w0.0 job=2 att=1 tok=21 kind=done`

func TestCheckWorkflowClean(t *testing.T) {
	rep := verdict(t, map[string]string{"w0.0.log": wfParts + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok
		330 written proc=w0.0 job=3 att=1 tok=31 kind=done`,
		"verifier.log": `
		150 wfcheck proc=verifier drift=0
		250 wfcheck proc=verifier drift=0`,
	}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	wantAnomalies(t, rep, nil)
	if rep.Workflows != 1 || rep.WorkflowsSucceeded != 1 || rep.JoinsDone != 1 || rep.JoinStarts != 1 || rep.WorkflowChecks != 2 {
		t.Errorf("workflows %d, succeeded %d, joins done %d, join starts %d, checks %d; want 1, 1, 1, 1, 2",
			rep.Workflows, rep.WorkflowsSucceeded, rep.JoinsDone, rep.JoinStarts, rep.WorkflowChecks)
	}
	if len(rep.Checks) != 8 {
		t.Errorf("%d checks, want the 5 of jobs and 3 of workflows", len(rep.Checks))
	}
}

func TestCheckJoinTooEarly(t *testing.T) {
	// The join is claimed at 215, before p1's handler ended at 220.
	rep := verdict(t, map[string]string{"w0.0.log": wfParts, "w1.0.log": `
		215 claim proc=w1.0 job=3 att=1 tok=31
		216 start proc=w1.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		320 end proc=w1.0 job=3 att=1 tok=31 res=ok
		330 written proc=w1.0 job=3 att=1 tok=31 kind=done`,
	}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	wantAnomalies(t, rep, map[string]int{AnomalyJoinTooEarly: 1})
	if a := rep.Anomalies[0]; a.Workflow != 7 || !strings.Contains(a.Detail, "before its part p1 had succeeded") {
		t.Errorf("anomaly %+v", a)
	}
}

func TestCheckJoinSawUnfinishedDependency(t *testing.T) {
	// What the running join read from the backend: one part not done.
	rep := verdict(t, map[string]string{"w0.0.log": wfParts + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=1/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok
		330 written proc=w0.0 job=3 att=1 tok=31 kind=done`,
	}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	wantAnomalies(t, rep, map[string]int{AnomalyJoinTooEarly: 1})
}

func TestCheckJoinAfterRefusedPart(t *testing.T) {
	// p1's only success was refused as stale: it never succeeded, so a
	// join claimed after it ran too early.
	hist := strings.Replace(wfParts, "230 written proc=w0.0 job=2 att=1 tok=21 kind=done", "230 stale proc=w0.0 job=2 att=1 tok=21", 1)
	rep := verdict(t, map[string]string{"w0.0.log": hist + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok
		330 written proc=w0.0 job=3 att=1 tok=31 kind=done`,
	}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	if rep.AnomalyCount(AnomalyJoinTooEarly) != 1 {
		t.Errorf("JOIN TOO EARLY anomalies = %d, want 1 (%s)", rep.AnomalyCount(AnomalyJoinTooEarly), rep.kindCounts())
	}
}

func TestCheckDoubleRelease(t *testing.T) {
	// The join ran as two jobs: released twice, both done.
	fs := wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded)
	fs.acked[4] = 2
	rep := verdict(t, map[string]string{"w0.0.log": wfParts + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok
		330 written proc=w0.0 job=3 att=1 tok=31 kind=done
		400 claim proc=w0.0 job=4 att=1 tok=41
		410 start proc=w0.0 job=4 seq=2 att=1 tok=41 wf=1 try=1 task=join deps=2/2
		420 end proc=w0.0 job=4 att=1 tok=41 res=ok
		430 written proc=w0.0 job=4 att=1 tok=41 kind=done`,
	}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyDoubleRelease: 1, AnomalyJoinNotOnce: 1})
}

func TestCheckJoinCompletedOnceAfterUnknownAttempt(t *testing.T) {
	// Attempt 1 of the join succeeded in a process killed before its
	// write; attempt 2 had done applied: one completion, not two.
	rep := verdict(t, map[string]string{"w0.0.log": wfParts + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok`,
		"verifier.log": `
		325 kill proc=verifier worker=w0.0 pid=1
		326 exit proc=verifier worker=w0.0 pid=1 status=killed killed=true`,
		"w0.1.log": `
		500 claim proc=w0.1 job=3 att=2 tok=32
		510 start proc=w0.1 job=3 seq=2 att=2 tok=32 wf=1 try=1 task=join deps=2/2
		520 end proc=w0.1 job=3 att=2 tok=32 res=ok
		530 written proc=w0.1 job=3 att=2 tok=32 kind=done`,
	}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	wantAnomalies(t, rep, nil)
	if rep.JoinsDone != 1 || rep.JoinStarts != 2 {
		t.Errorf("joins done %d, join starts %d; want 1, 2", rep.JoinsDone, rep.JoinStarts)
	}
}

func TestCheckSucceededWithoutJoin(t *testing.T) {
	rep := verdict(t, map[string]string{"w0.0.log": wfParts}, wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded))
	// Job 3, acknowledged, never ran: the job checks find it lost too.
	wantAnomalies(t, rep, map[string]int{AnomalyJoinNotOnce: 1, AnomalyLost: 1})
}

func TestCheckFailedWorkflow(t *testing.T) {
	// Part p1 failed for good, as planned: the join is cancelled and
	// never ran. Fine.
	hist := strings.Replace(wfParts, "220 end proc=w0.0 job=2 att=1 tok=21 res=ok\n\t230 written proc=w0.0 job=2 att=1 tok=21 kind=done",
		"220 end proc=w0.0 job=2 att=1 tok=21 res=permanent\n\t230 written proc=w0.0 job=2 att=1 tok=21 kind=failed", 1)
	fs := wfRun(backend.WorkflowFailed, backend.TaskCancelled)
	delete(fs.acked, 3)
	fs.wf.stored[0].Tasks[1].State = backend.TaskFailed
	fs.wf.perm[1] = true
	fs.failed = []*backend.FailedJob{{ID: 1, JobID: 2, Error: "verify: failed on purpose (permanent)"}}
	fs.stats.Failed = 1
	rep := verdict(t, map[string]string{"w0.0.log": hist}, fs)
	wantAnomalies(t, rep, nil)
	if rep.WorkflowsFailedOnPurpose != 1 {
		t.Errorf("workflows failed on purpose %d, want 1", rep.WorkflowsFailedOnPurpose)
	}

	// The same workflow whose join ran all the same, and is not
	// cancelled.
	fs.wf.stored[0].Tasks[2].State = backend.TaskSucceeded
	fs.acked[3] = 2
	rep = verdict(t, map[string]string{"w0.0.log": hist + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=1/2
		320 end proc=w0.0 job=3 att=1 tok=31 res=ok
		330 written proc=w0.0 job=3 att=1 tok=31 kind=done`}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyJoinNotOnce: 1, AnomalyWorkflowState: 1, AnomalyJoinTooEarly: 2})
}

func TestCheckStuckLostAndDrift(t *testing.T) {
	fs := wfRun(backend.WorkflowRunning, backend.TaskWaiting)
	fs.wf.stored[0].Tasks[2].JobID = 0
	fs.wf.stored[0].Tasks[2].WaitingOn = []string{"p1"}
	delete(fs.acked, 3)
	fs.wf.acked[8] = 2 // acknowledged, and not in the backend
	fs.wf.drift = []backend.WorkflowDrift{{WorkflowID: 7, Task: joinTask, Stored: 1, Want: 0}}
	rep := verdict(t, map[string]string{"w0.0.log": wfParts,
		"verifier.log": `
		250 drift proc=verifier wf=7 task=join stored=1 want=0
		251 wfcheck proc=verifier drift=1`,
	}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyStuckWorkflow: 1, AnomalyWorkflowLost: 1, AnomalyWorkflowDrift: 2})
	var b strings.Builder
	_ = rep.WriteTable(&b)
	if !strings.Contains(b.String(), "STUCK WORKFLOW workflow 7: workflow 7 is still running after the drain: join waits on p1") {
		t.Errorf("the report does not show the stuck workflow:\n%s", b.String())
	}
}

func TestWorkflowNames(t *testing.T) {
	if k, ok := parseWorkflowName("r1", workflowName("r1", 12, 3)); !ok || k != (wfKey{12, 3}) {
		t.Errorf("parse(name(12, 3)) = %v, %v", k, ok)
	}
	for _, name := range []string{"verify-r2-1-1", "verify-r1-1", "verify-r1-x-1", "other"} {
		if _, ok := parseWorkflowName("r1", name); ok {
			t.Errorf("%q parsed as a workflow of run r1", name)
		}
	}
	for name, want := range map[string]int{"p0": 0, "p9": 9, "p10": -1, joinTask: 10, "x": -1, "p": -1} {
		if got := taskIndex(name, 10); got != want {
			t.Errorf("taskIndex(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestCheckJoinFailedByFaults(t *testing.T) {
	// Both parts succeeded; the join's only attempt died with its process
	// and its lease expired with no attempt left: the workflow failed
	// with its join, which never completed. Not an anomaly.
	fs := wfRun(backend.WorkflowFailed, backend.TaskFailed)
	fs.wf.stored[0].Counts = backend.TaskCounts{Succeeded: 2, Failed: 1}
	fs.failed = []*backend.FailedJob{{ID: 1, JobID: 3, Error: "lease expired"}}
	fs.stats.Failed = 1
	hist := map[string]string{"w0.0.log": wfParts + `
		300 claim proc=w0.0 job=3 att=1 tok=31
		310 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2`,
		"verifier.log": `
		320 kill proc=verifier worker=w0.0 pid=1
		321 exit proc=verifier worker=w0.0 pid=1 status=killed killed=true`}
	rep := verdict(t, hist, fs)
	wantAnomalies(t, rep, nil)
	if rep.WorkflowsFailedByFaults != 1 {
		t.Errorf("workflows failed by faults %d, want 1", rep.WorkflowsFailedByFaults)
	}

	// The same, but a part is planned to fail for good: its join cannot
	// have run.
	fs.wf.perm[1] = true
	rep = verdict(t, hist, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyWorkflowState: 1})
}
