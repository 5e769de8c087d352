package verify

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// The kinds of anomaly a run can find: each is a broken promise (or a
// history that contradicts the backend).
const (
	// AnomalyLost: an acknowledged job is gone from the backend, never
	// succeeded and is not in failed jobs.
	AnomalyLost = "LOST"
	// AnomalyUnfencedOverlap: two claims of a job ran at once and the
	// earlier one's outcome was applied: a stale write went through.
	AnomalyUnfencedOverlap = "UNFENCED OVERLAP"
	// AnomalyRanAfterEnd: a job was claimed again after an outcome that
	// ended it (done, failed) was applied.
	AnomalyRanAfterEnd = "RAN AFTER END"
	// AnomalyTokenReused: two claims of a job carried the same token.
	AnomalyTokenReused = "TOKEN REUSED"
	// AnomalyDoubleDone: two claims of a job had done applied.
	AnomalyDoubleDone = "DOUBLE DONE"
	// AnomalyDoneAndFailed: a job had done applied and is in failed jobs.
	AnomalyDoneAndFailed = "DONE AND FAILED"
	// AnomalyFailedTwice: a job is in failed jobs more than once.
	AnomalyFailedTwice = "FAILED TWICE"
	// AnomalyNotFinished: a job is still pending or reserved after the
	// drain timeout.
	AnomalyNotFinished = "NOT FINISHED"
	// AnomalyTooManyAttempts: a job was claimed more often than its
	// attempts allow, free releases included.
	AnomalyTooManyAttempts = "TOO MANY ATTEMPTS"
	// AnomalyCounts: the backend's counts of the queue disagree with the
	// history.
	AnomalyCounts = "COUNTS DISAGREE"
	// AnomalyUnknownFailed: the queue's failed jobs hold one this run did
	// not enqueue.
	AnomalyUnknownFailed = "UNKNOWN FAILED JOB"
)

// Report is the verdict of one run: what was checked, with counts, and
// every anomaly found, each with the history lines behind it.
type Report struct {
	RunID   string
	Queue   string
	Backend string // the backend URL, password shown as ***
	Faults  []Fault
	Config  Config // as run, defaults filled in (DB with its password shown as ***)
	// Unfenced: this build has the fence switched off (the jobq_unfenced
	// build tag), so anomalies are expected.
	Unfenced bool
	// HistoryDir is where the history was kept; empty when it was
	// removed.
	HistoryDir string

	Enqueued int // acknowledged jobs
	// The unique workload's (Config.Unique): the identities whose jobs
	// ran, the requests answered as duplicates of a live job, and the
	// identities that had a new job after an earlier one ended.
	UniqueIdentities, UniqueDuplicates, UniqueRemade int
	Extra                                            int // jobs a batch sent again inserted twice (not acknowledged; checked all the same)
	EnqueueRetries                                   int // batches sent again after an error

	Done            int // done, applied
	DoneUnconfirmed int // the handler succeeded but its process died before the worker heard back; gone from the backend
	Failed          int // in failed jobs
	// Of Failed: failed on purpose, at their first attempt; whose lease
	// ran out on their last attempt; whose attempts ran out otherwise;
	// whose deadline passed before a claim (the deadline workload).
	FailedOnPurpose, FailedLeaseExpired, FailedAttemptsSpent, FailedExpired int
	BackendFailed                                                           int64 // what the backend counts

	Attempts       int  // claims recorded
	MostAttempts   int  // claims of the most claimed job
	Reruns         int  // jobs claimed more than once
	OKTwice        int  // jobs whose handler succeeded more than once: what idempotent handlers are for
	Concurrent     int  // jobs that ran in two places at once, fenced
	OverlapUnknown int  // overlaps whose earlier outcome is unknown (its process died)
	Refused        int  // outcomes the fence refused
	MaybeApplied   int  // refused after a failed try: maybe applied by the try whose reply was lost
	LeaseLost      int  // handlers cancelled with jobq.ErrLeaseLost
	Rescued        int  // jobs the workers' sweeps moved
	Tokens         bool // the backend gave claim tokens
	WorkerProcs    int  // worker processes started
	// ClaimsAhead and ClaimsBehind count the claims of workers whose
	// clock the skew fault set ahead or behind.
	ClaimsAhead, ClaimsBehind int

	// The workflow workload's counts (Config.Workflows): the workflows
	// acknowledged, and those a send whose reply was lost inserted too;
	// how they ended; the joins' claims and completions; and the
	// WorkflowCheck runs while the workers ran.
	Workflows, WorkflowsExtra                                             int
	WorkflowsSucceeded, WorkflowsFailedOnPurpose, WorkflowsFailedByFaults int
	JoinStarts, JoinsDone, WorkflowChecks                                 int
	// WorkflowsFailedAcked is how many of the failed workflows (on
	// purpose or by faults) were acknowledged ones, not sent again: the
	// acknowledged jobs lack exactly their joins.
	WorkflowsFailedAcked int
	// The replay fault's: the jobs it tried to replay; the calls that
	// moved a job back (one per job: a job is replayed once; a call whose
	// reply was lost is counted when the next finds the job gone), that
	// left it failed (Skipped: its workflow cancelled), and that failed
	// (tried again); the workflows with a task replayed, and those of
	// them that succeeded.
	Replays, Replayed, ReplaysSkipped, ReplayErrors int
	WorkflowsReplayed, WorkflowsReplayedSucceeded   int

	// The keyed workload's (Config.Keys): the keys that ran jobs; per key
	// limit, the most attempts of one key of that queue running at once
	// (counted as its check counts them); the ordered keys checked, the
	// most attempts of one of them at once and their jobs done; the
	// verifier's replays of held heads (that moved the head back, that
	// failed and were made again, that found it skipped and discarded
	// it); and the keys held after the drain by a failed head.
	Keys                                           int
	KeyMostRunning                                 map[int]int
	OrderedKeys, OrderedMostRunning, OrderedDone   int
	KeyReplayed, KeyReplayErrors, KeyReplaysPurged int
	KeysHeld                                       int

	// The deadline workload's (Config.Deadlines): the jobs with a
	// deadline, those that ran (ended done or failed by their attempts)
	// and those that expired into the failed jobs, of which never claimed;
	// both by class (very short, short, long: see Config.Deadlines); the
	// claims of jobs with a deadline, the least time one of them came
	// before its deadline by the store's clock (-1: none), the handlers
	// that started after their job's deadline, claimed before it (what
	// the contract allows); and the jobs left out of a batch sent again
	// because their deadline had passed first, never acknowledged.
	DeadlineJobs, DeadlineRan, DeadlineExpired, DeadlineExpiredUnclaimed int
	DeadlineByClass, DeadlineExpiredByClass                              [deadlineClasses]int
	DeadlineClaims, DeadlineLateHandlers, DeadlineGivenUp                int
	DeadlineClosest                                                      time.Duration

	// Injected counts the faults by kind: kill, pause, cut, blackhole,
	// latency, restart, skew (processes started with a skewed clock) and
	// replay (jobs replayed).
	Injected map[string]int

	Drain   time.Duration // from the end of the faults (and the enqueues) to an empty queue
	Drained bool          // false: the drain timeout ran out
	Elapsed time.Duration

	Checks        []Check
	Anomalies     []Anomaly // the first Config.MaxAnomalies
	MoreAnomalies int       // found beyond those

	anomalyCount map[string]int
}

// Check is one line of the verdict.
type Check struct {
	Name      string
	OK        bool
	Anomalies int
	Detail    string
}

// Anomaly is one broken promise.
type Anomaly struct {
	Kind     string // one of the Anomaly constants
	Job      int64  // 0 when it is about the queue or a workflow
	Workflow int64  // the workflow's ID, for a workflow's anomaly
	Detail   string
	Lines    []string // the history lines behind it, "file:line: text"
}

// OK reports whether every check held.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

// AnomalyCount is how many anomalies of kind the run found ("" for all).
func (r *Report) AnomalyCount(kind string) int {
	if kind != "" {
		return r.anomalyCount[kind]
	}
	n := 0
	for _, c := range r.anomalyCount {
		n += c
	}
	return n
}

// WriteTable writes the report for people: the run, the checks with their
// verdicts, the counts, and every anomaly (up to MaxAnomalies) with its
// history lines.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c := r.Config
	fmt.Fprintf(bw, "jobq verify  run %s  %s  queue %s\n", r.RunID, r.Backend, r.Queue)
	work := fmt.Sprintf("%d jobs", c.Jobs)
	if c.Workflows > 0 {
		work = fmt.Sprintf("%d workflows of %d parts and a join (%d jobs)", c.Workflows, c.FanOut, c.Jobs)
	}
	if c.Keys > 0 {
		work += " on " + keyedWork(c)
	}
	if c.Deadlines > 0 {
		work += fmt.Sprintf(", %.0f %% with a deadline (clock tolerance %s)", 100*c.Deadlines, c.ClockTolerance)
	}
	fmt.Fprintf(bw, "workload     %s, %d worker processes x %d, %s, lease %s, max attempts %d, seed %d\n",
		work, c.Procs, c.Concurrency, c.Duration, c.Lease, c.MaxAttempts, c.Seed)
	fmt.Fprintf(bw, "faults       %s\n", r.faultLine())
	if r.Unfenced {
		fmt.Fprintf(bw, "build        UNFENCED (jobq_unfenced tag): outcomes are written to whatever claim holds the job; expect anomalies\n")
	}
	fmt.Fprintln(bw)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\tdetail")
	for _, ch := range r.Checks {
		res := "ok"
		if !ch.OK {
			res = fmt.Sprintf("FAILED (%d)", ch.Anomalies)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Name, res, ch.Detail)
	}
	_ = tw.Flush()
	fmt.Fprintln(bw)
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("jobs", "%d acknowledged, %d more from batches sent again; %d enqueue retries", r.Enqueued, r.Extra, r.EnqueueRetries)
	expired := ""
	if c.Deadlines > 0 {
		expired = fmt.Sprintf(", %d deadline expired", r.FailedExpired)
	}
	row("ended", "%d done, %d done unconfirmed, %d failed (%d on purpose, %d lease expired, %d attempts spent%s)",
		r.Done, r.DoneUnconfirmed, r.Failed, r.FailedOnPurpose, r.FailedLeaseExpired, r.FailedAttemptsSpent, expired)
	if c.Workflows > 0 {
		row("workflows", "%d acknowledged, %d more from sends again; %d succeeded, %d failed on purpose, %d failed by faults, %d stuck; %d join claims, %d join completions; %d WorkflowCheck runs, %d drifts",
			r.Workflows, r.WorkflowsExtra, r.WorkflowsSucceeded, r.WorkflowsFailedOnPurpose, r.WorkflowsFailedByFaults, r.anomalyCount[AnomalyStuckWorkflow],
			r.JoinStarts, r.JoinsDone, r.WorkflowChecks, r.anomalyCount[AnomalyWorkflowDrift])
	}
	if slices.Contains(r.Faults, FaultReplay) || r.Replays > 0 {
		row("replays", "%d failed tasks tried: %d replayed, %d skipped, %d calls failed (tried again); %d workflows had a task replayed, %d of them succeeded",
			r.Replays, r.Replayed, r.ReplaysSkipped, r.ReplayErrors, r.WorkflowsReplayed, r.WorkflowsReplayedSucceeded)
	}
	if c.Keys > 0 {
		row("keys", "%d ran jobs; most attempts of one key at once: %s; ordered: %d keys, at most %d at once, %d jobs done; held heads: %d replayed, %d calls failed (made again), %d discarded; %d held after the drain",
			r.Keys, r.mostRunning(), r.OrderedKeys, r.OrderedMostRunning, r.OrderedDone, r.KeyReplayed, r.KeyReplayErrors, r.KeyReplaysPurged, r.KeysHeld)
	}
	if c.Unique > 0 {
		row("unique", "%d identities ran, %d requests each; %d answered as duplicates; %d identities remade after their job ended",
			r.UniqueIdentities, c.Unique, r.UniqueDuplicates, r.UniqueRemade)
	}
	if c.Deadlines > 0 {
		row("deadlines", "%s", r.deadlineRow())
	}
	row("attempts", "%d claims; %d jobs claimed more than once, at most %d times", r.Attempts, r.Reruns, r.MostAttempts)
	row("duplicates", "%d jobs ran in two places at once (fenced; %d of the overlaps with the earlier outcome unknown, its process killed), %d succeeded more than once (handlers must be idempotent)", r.Concurrent, r.OverlapUnknown, r.OKTwice)
	row("fence", "%d outcomes refused as stale (%d after a failed try), %d handlers cancelled with ErrLeaseLost, %d jobs rescued by sweeps", r.Refused, r.MaybeApplied, r.LeaseLost, r.Rescued)
	if !r.Tokens {
		row("tokens", "the backend gave no claim tokens: claims told apart by attempt number")
	}
	row("workers", "%d processes started", r.WorkerProcs)
	if r.Injected["skew"] > 0 {
		row("skew", "%d claims by workers ahead, %d by workers behind", r.ClaimsAhead, r.ClaimsBehind)
	}
	drain := r.Drain.Round(time.Millisecond).String()
	if !r.Drained {
		drain += " (timed out)"
	}
	row("drain", "%s; whole run %s", drain, r.Elapsed.Round(100*time.Millisecond))
	if r.HistoryDir != "" {
		row("history", "%s", r.HistoryDir)
	}
	_ = tw.Flush()
	if n := r.AnomalyCount(""); n > 0 {
		fmt.Fprintf(bw, "\nANOMALIES: %d\n", n)
		for _, a := range r.Anomalies {
			switch {
			case a.Job != 0:
				fmt.Fprintf(bw, "\n%s job %d: %s\n", a.Kind, a.Job, a.Detail)
			case a.Workflow != 0:
				fmt.Fprintf(bw, "\n%s workflow %d: %s\n", a.Kind, a.Workflow, a.Detail)
			default:
				fmt.Fprintf(bw, "\n%s: %s\n", a.Kind, a.Detail)
			}
			for _, l := range a.Lines {
				fmt.Fprintf(bw, "  %s\n", l)
			}
		}
		if r.MoreAnomalies > 0 {
			fmt.Fprintf(bw, "\n… and %d more anomalies (%s)\n", r.MoreAnomalies, r.kindCounts())
		}
	} else {
		fmt.Fprintf(bw, "\nno anomalies: every check held\n")
	}
	return bw.Flush()
}

// keyedWork describes the keyed workload's keys and queues.
func keyedWork(c Config) string {
	var qs []string
	for _, n := range c.PerKey {
		qs = append(qs, fmt.Sprintf("limit %d", n))
	}
	if c.Ordered {
		qs = append(qs, "ordered")
	}
	return fmt.Sprintf("%d keys (queues: %s)", c.Keys, strings.Join(qs, ", "))
}

// faultLine names the faults with their counts and intervals.
func (r *Report) faultLine() string {
	if len(r.Faults) == 0 {
		return "none"
	}
	c := r.Config
	var parts []string
	for _, f := range r.Faults {
		switch f {
		case FaultKill:
			parts = append(parts, fmt.Sprintf("kill %d (every %s)", r.Injected["kill"], c.KillEvery))
		case FaultPause:
			parts = append(parts, fmt.Sprintf("pause %d (every %s for %s)", r.Injected["pause"], c.PauseEvery, c.PauseFor))
		case FaultProxy:
			parts = append(parts, fmt.Sprintf("proxy every %s: cut %d, blackhole %d, latency %d", c.ProxyCutEvery, r.Injected["cut"], r.Injected["blackhole"], r.Injected["latency"]))
		case FaultRestart:
			parts = append(parts, fmt.Sprintf("restart %d (every %s, down %s)", r.Injected["restart"], c.RestartEvery, c.RestartDown))
		case FaultSkew:
			parts = append(parts, fmt.Sprintf("skew ±%s (%d processes)", c.Skew, r.Injected["skew"]))
		case FaultReplay:
			parts = append(parts, fmt.Sprintf("replay %d (every %s)", r.Injected["replay"], c.ReplayEvery))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *Report) kindCounts() string {
	kinds := make([]string, 0, len(r.anomalyCount))
	for k := range r.anomalyCount {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, r.anomalyCount[k])
	}
	return strings.Join(parts, ", ")
}
