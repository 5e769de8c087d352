package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// replayedJob is a job of run "r1" (3 attempts allowed) that failed in
// its first life after four claims (a free release, two transient
// failures, a last failure applied) and ran again after a replay at
// replayAt (none when empty): three more claims, the last done. Seven
// claims in all, over the allowance of 3 + 3 free releases unless the
// replay reset it.
func replayedJob(replay string) map[string]string {
	return map[string]string{"w0.0.log": `
		100 claim proc=w0.0 job=1 att=1 tok=11
		110 start proc=w0.0 job=1 seq=1 att=1 tok=11
		120 end proc=w0.0 job=1 att=1 tok=11 res=shutdown
		130 written proc=w0.0 job=1 att=1 tok=11 kind=released
		200 claim proc=w0.0 job=1 att=1 tok=12
		210 start proc=w0.0 job=1 seq=1 att=1 tok=12
		220 end proc=w0.0 job=1 att=1 tok=12 res=error
		230 written proc=w0.0 job=1 att=1 tok=12 kind=retry
		300 claim proc=w0.0 job=1 att=2 tok=13
		310 start proc=w0.0 job=1 seq=1 att=2 tok=13
		320 end proc=w0.0 job=1 att=2 tok=13 res=error
		330 written proc=w0.0 job=1 att=2 tok=13 kind=retry
		400 claim proc=w0.0 job=1 att=3 tok=14
		410 start proc=w0.0 job=1 seq=1 att=3 tok=14
		420 end proc=w0.0 job=1 att=3 tok=14 res=error
		430 written proc=w0.0 job=1 att=3 tok=14 kind=failed
		500 claim proc=w0.0 job=1 att=1 tok=15
		510 start proc=w0.0 job=1 seq=1 att=1 tok=15
		520 end proc=w0.0 job=1 att=1 tok=15 res=error
		530 written proc=w0.0 job=1 att=1 tok=15 kind=retry
		600 claim proc=w0.0 job=1 att=2 tok=16
		610 start proc=w0.0 job=1 seq=1 att=2 tok=16
		620 end proc=w0.0 job=1 att=2 tok=16 res=error
		630 written proc=w0.0 job=1 att=2 tok=16 kind=retry
		700 claim proc=w0.0 job=1 att=3 tok=17
		710 start proc=w0.0 job=1 seq=1 att=3 tok=17
		720 end proc=w0.0 job=1 att=3 tok=17 res=ok
		730 written proc=w0.0 job=1 att=3 tok=17 kind=done`,
		"verifier.log": replay}
}

func TestCheckReplayedJobSecondLife(t *testing.T) {
	// The verifier's replay began at 440, after the failure: the claims
	// from 500 on are the job's second life, with attempts of their own.
	rep := verdict(t, replayedJob(`
		440 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=false res=replayed`), acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Done != 1 || rep.Attempts != 7 || rep.MostAttempts != 4 || rep.Replays != 1 || rep.Replayed != 1 {
		t.Errorf("done %d, attempts %d, most %d, replays %d (replayed %d); want 1, 7, 4, 1, 1", rep.Done, rep.Attempts, rep.MostAttempts, rep.Replays, rep.Replayed)
	}

	// A replay whose call began before the worker wrote down the
	// failure (the backend had applied it) is a replay all the same; so
	// is one whose first call failed and the next found the job gone.
	rep = verdict(t, replayedJob(`
		425 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=false err=unavailable res=error
		540 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=false res=gone`), acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Replays != 1 || rep.Replayed != 1 || rep.ReplayErrors != 1 {
		t.Errorf("replays %d, replayed %d, errors %d; want 1, 1, 1", rep.Replays, rep.Replayed, rep.ReplayErrors)
	}

	// Without a replay, the claims after the failure ran after its end,
	// and too many of them.
	rep = verdict(t, replayedJob(""), acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 3, AnomalyTooManyAttempts: 1})

	// A replay that was skipped moved nothing: the same.
	rep = verdict(t, replayedJob(`
		440 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=false res=skipped`), acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 3, AnomalyTooManyAttempts: 1})

	// A replay after the later claims does not excuse them.
	rep = verdict(t, replayedJob(`
		800 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=false res=replayed`), acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 3, AnomalyTooManyAttempts: 1})
}

// wfPermReplayed is wfParts with part p1 (job 2) failing for good at
// its first attempt, as planned, and run again from 300.
const wfPermReplayed = `
	100 claim proc=w0.0 job=1 att=1 tok=11
	110 start proc=w0.0 job=1 seq=0 att=1 tok=11 wf=1 try=1 task=p0
	120 end proc=w0.0 job=1 att=1 tok=11 res=ok
	130 written proc=w0.0 job=1 att=1 tok=11 kind=done
	200 claim proc=w0.0 job=2 att=1 tok=21
	210 start proc=w0.0 job=2 seq=1 att=1 tok=21 wf=1 try=1 task=p1
	220 end proc=w0.0 job=2 att=1 tok=21 res=permanent
	230 written proc=w0.0 job=2 att=1 tok=21 kind=failed
	300 claim proc=w0.0 job=2 att=1 tok=22
	310 start proc=w0.0 job=2 seq=1 att=1 tok=22 wf=1 try=1 task=p1 replayed=lasterror
	320 end proc=w0.0 job=2 att=1 tok=22 res=ok
	330 written proc=w0.0 job=2 att=1 tok=22 kind=done`

const wfJoinDone = `
	400 claim proc=w0.0 job=3 att=1 tok=31
	410 start proc=w0.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
	420 end proc=w0.0 job=3 att=1 tok=31 res=ok
	430 written proc=w0.0 job=3 att=1 tok=31 kind=done`

const replayP1 = `
	240 replay proc=verifier job=2 fid=5 wf=1 try=1 task=p1 perm=true res=replayed`

func TestCheckReplayedWorkflow(t *testing.T) {
	// The part planned to fail for good was replayed and succeeded: the
	// workflow succeeded, its join ran once after both parts.
	fs := wfRun(backend.WorkflowSucceeded, backend.TaskSucceeded)
	fs.wf.perm[1] = true
	rep := verdict(t, map[string]string{"w0.0.log": wfPermReplayed + wfJoinDone, "verifier.log": replayP1}, fs)
	wantAnomalies(t, rep, nil)
	if rep.WorkflowsSucceeded != 1 || rep.JoinsDone != 1 || rep.WorkflowsReplayed != 1 || rep.WorkflowsReplayedSucceeded != 1 || rep.Injected["replay"] != 1 {
		t.Errorf("succeeded %d, joins done %d, replayed %d (%d succeeded), injected %v; want 1, 1, 1, 1, replay 1",
			rep.WorkflowsSucceeded, rep.JoinsDone, rep.WorkflowsReplayed, rep.WorkflowsReplayedSucceeded, rep.Injected)
	}
	var b strings.Builder
	_ = rep.WriteTable(&b)
	if !strings.Contains(b.String(), "1 failed tasks tried: 1 replayed, 0 skipped, 0 calls failed") {
		t.Errorf("the report does not show the replays:\n%s", b.String())
	}

	// Without the replay: the part ran after its end, and the workflow
	// succeeded though planned to fail.
	rep = verdict(t, map[string]string{"w0.0.log": wfPermReplayed + wfJoinDone}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 1, AnomalyWorkflowState: 1})

	// A join claimed after the replay but before the replayed part
	// succeeded ran too early.
	rep = verdict(t, map[string]string{"w0.0.log": wfPermReplayed, "verifier.log": replayP1, "w1.0.log": `
		315 claim proc=w1.0 job=3 att=1 tok=31
		316 start proc=w1.0 job=3 seq=2 att=1 tok=31 wf=1 try=1 task=join deps=2/2
		420 end proc=w1.0 job=3 att=1 tok=31 res=ok
		430 written proc=w1.0 job=3 att=1 tok=31 kind=done`}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyJoinTooEarly: 1})

	// The replayed part succeeded, yet the workflow failed with its join
	// cancelled: the replay's promise broken (the part's end was not
	// counted).
	fs = wfRun(backend.WorkflowFailed, backend.TaskCancelled)
	delete(fs.acked, 3)
	fs.wf.perm[1] = true
	rep = verdict(t, map[string]string{"w0.0.log": wfPermReplayed, "verifier.log": replayP1}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyWorkflowState: 1})

	// The same, stuck running instead: STUCK WORKFLOW, as ever.
	fs = wfRun(backend.WorkflowRunning, backend.TaskWaiting)
	fs.wf.stored[0].Tasks[2].JobID = 0
	fs.wf.stored[0].Tasks[2].WaitingOn = []string{"p1"}
	delete(fs.acked, 3)
	fs.wf.perm[1] = true
	rep = verdict(t, map[string]string{"w0.0.log": wfPermReplayed, "verifier.log": replayP1}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyStuckWorkflow: 1})
}

func TestReplayConfig(t *testing.T) {
	cmd := []string{"x"}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{DB: "memory:", Workflows: 5}, "replay"},
		{Config{DB: "memory:"}, ""},
		{Config{DB: "sqlite:x.db", Workflows: 5, WorkerCommand: cmd}, "kill,pause,replay"},
		{Config{DB: "postgres://u@h:5/db", Workflows: 5, WorkerCommand: cmd}, "kill,pause,proxy,replay"},
		{Config{DB: "redis://h:6379/0", WorkerCommand: cmd}, "kill,pause,proxy"},
	} {
		c, err := tc.cfg.withDefaults()
		if err != nil {
			t.Fatalf("%s: %v", tc.cfg.DB, err)
		}
		if got := faultList(c.Faults); got != tc.want {
			t.Errorf("%s with %d workflows: default faults %q, want %q", tc.cfg.DB, tc.cfg.Workflows, got, tc.want)
		}
		if c.ReplayEvery != 100*time.Millisecond {
			t.Errorf("ReplayEvery %s, want 100ms", c.ReplayEvery)
		}
	}
	for _, c := range []Config{
		{DB: "memory:", Faults: []Fault{FaultReplay}},
		{DB: "sqlite:x.db", Faults: []Fault{FaultKill, FaultReplay}, WorkerCommand: cmd},
	} {
		if _, err := c.withDefaults(); err == nil || !strings.Contains(err.Error(), "fault replay needs the workflow workload") {
			t.Errorf("%s, replay without workflows: %v", c.DB, err)
		}
	}
	if fs, err := ParseFaults("kill,replay"); err != nil || faultList(fs) != "kill,replay" {
		t.Errorf("ParseFaults(kill,replay) = %v, %v", fs, err)
	}
}

func TestRunMemoryWorkflowsReplay(t *testing.T) {
	t.Parallel()
	cfg := workflows(short("memory:"))
	cfg.Workflows = 60
	cfg.Faults, cfg.WorkerCommand = []Fault{FaultReplay}, nil
	cfg.ReplayEvery = 50 * time.Millisecond
	cfg.SlowShare = -1 // no slow job: the drain is quick
	// The seed plans parts to fail for good; without kills on memory
	// they are the only failures, each replayed as soon as seen.
	cfg.Seed = 8
	planned := plannedPerm(cfg)
	if planned < 2 {
		t.Fatalf("seed %d plans %d workflows to fail: pick a seed that plans a few", cfg.Seed, planned)
	}
	rep := mustVerify(t, cfg)
	if rep.Replayed == 0 || rep.WorkflowsReplayedSucceeded == 0 || rep.Injected["replay"] != rep.Replayed {
		t.Errorf("replays: %d tried, %d replayed, %d workflows succeeded after one (injected %v)", rep.Replays, rep.Replayed, rep.WorkflowsReplayedSucceeded, rep.Injected)
	}
	// Every failure planned and replayed ends succeeded; one the replays
	// missed (it failed as the faults ended) ends failed on purpose.
	if rep.WorkflowsReplayedSucceeded+rep.WorkflowsFailedOnPurpose != planned || rep.WorkflowsFailedByFaults != 0 || rep.ReplaysSkipped != 0 {
		t.Errorf("%d planned to fail: %d succeeded after a replay, %d failed on purpose, %d by faults, %d replays skipped",
			planned, rep.WorkflowsReplayedSucceeded, rep.WorkflowsFailedOnPurpose, rep.WorkflowsFailedByFaults, rep.ReplaysSkipped)
	}
}

// plannedPerm counts the workflows cfg's seed plans to fail, drawing as
// the producer does.
func plannedPerm(cfg Config) int {
	rng := seeded(cfg.Seed, streamWorkload)
	n := 0
	for i := range int64(cfg.Workflows) {
		if _, perm := planWorkflow(rng, "", i+1, cfg.FanOut, cfg.SlowShare, cfg.Lease, replaySpread(cfg)); perm {
			n++
		}
	}
	return n
}

// failedTwice is a job that failed for good twice and then succeeded:
// three lives when the verifier replayed it after each failure.
const failedTwice = `
	100 claim proc=w0.0 job=1 att=1 tok=1
	110 start proc=w0.0 job=1 seq=1 att=1 tok=1
	120 end proc=w0.0 job=1 att=1 tok=1 res=permanent
	130 written proc=w0.0 job=1 att=1 tok=1 kind=failed
	200 claim proc=w0.0 job=1 att=1 tok=2
	210 start proc=w0.0 job=1 seq=1 att=1 tok=2
	220 end proc=w0.0 job=1 att=1 tok=2 res=permanent
	230 written proc=w0.0 job=1 att=1 tok=2 kind=failed
	300 claim proc=w0.0 job=1 att=1 tok=3
	310 start proc=w0.0 job=1 seq=1 att=1 tok=3
	320 end proc=w0.0 job=1 att=1 tok=3 res=ok
	330 written proc=w0.0 job=1 att=1 tok=3 kind=done`

func TestCheckJobReplayedTwice(t *testing.T) {
	// A held key's head can fail again after its replay and be replayed
	// again: each replay begins a life, so its third life's claim is not
	// after its end, and its failures were undone.
	rep := verdict(t, map[string]string{"w0.0.log": failedTwice, "verifier.log": `
		150 replay proc=verifier job=1 fid=8 wf=0 try=0 task=p0 perm=true res=replayed
		250 replay proc=verifier job=1 fid=9 wf=0 try=0 task=p0 perm=true res=replayed`}, acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Done != 1 || rep.Failed != 0 || rep.MostAttempts != 1 {
		t.Errorf("done %d, failed %d, most attempts %d; want 1, 0, 1", rep.Done, rep.Failed, rep.MostAttempts)
	}
	// Without the second replay its third claim ran after its end.
	rep = verdict(t, map[string]string{"w0.0.log": failedTwice, "verifier.log": `
		150 replay proc=verifier job=1 fid=8 wf=0 try=0 task=p0 perm=true res=replayed`}, acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 1})
}
