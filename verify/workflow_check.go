package verify

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jobq/jobq/backend"
)

// The anomalies of the workflow workload.
const (
	// AnomalyJoinTooEarly: a join was claimed before one of its parts
	// had succeeded, or the backend showed the running join a part that
	// had not.
	AnomalyJoinTooEarly = "JOIN TOO EARLY"
	// AnomalyDoubleRelease: one workflow's join ran as two jobs: its
	// release happened twice.
	AnomalyDoubleRelease = "DOUBLE RELEASE"
	// AnomalyJoinNotOnce: a workflow succeeded without exactly one join
	// completion, or failed and its join completed all the same (or ran,
	// though a part's failure cancelled it).
	AnomalyJoinNotOnce = "JOIN NOT ONCE"
	// AnomalyStuckWorkflow: a workflow is still running after the
	// drain: a task waits on parts that have ended.
	AnomalyStuckWorkflow = "STUCK WORKFLOW"
	// AnomalyWorkflowState: a workflow ended in a state its tasks'
	// outcomes do not give (succeeded with a part failing for good,
	// cancelled though nobody cancelled it, failed with a join neither
	// failed nor cancelled, or with a failed join though a part failed).
	AnomalyWorkflowState = "WORKFLOW STATE"
	// AnomalyWorkflowLost: an acknowledged workflow is gone.
	AnomalyWorkflowLost = "WORKFLOW LOST"
	// AnomalyWorkflowDrift: WorkflowCheck found a stored count that
	// differs from its recomputation, during the run or at its end.
	AnomalyWorkflowDrift = "WORKFLOW DRIFT"
)

// checkWorkflows runs the workflow checks: the run's workflows as the
// backend holds them against the history of their tasks' jobs.
func (c *checker) checkWorkflows() {
	ws := c.fs.wf
	ran := c.taskJobs()
	found := map[int64]bool{}
	for _, wf := range ws.stored {
		found[wf.ID] = true
		k, _ := parseWorkflowName(c.run, wf.Name)
		c.checkWorkflow(wf, k, ran[k])
	}
	lost := make([]int64, 0)
	for id := range ws.acked {
		if !found[id] {
			lost = append(lost, id)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	for _, id := range lost {
		c.wfAnomaly(AnomalyWorkflowLost, id, fmt.Sprintf("workflow %d (number %d) was acknowledged and is gone from the backend", id, ws.acked[id]))
	}
	for _, r := range c.recs {
		switch {
		case r.proc != verifierProc:
		case r.ev == evWfCheck:
			c.rep.WorkflowChecks++
		case r.ev == evDrift:
			id, _ := strconv.ParseInt(r.get("wf"), 10, 64)
			c.wfAnomaly(AnomalyWorkflowDrift, id, fmt.Sprintf("during the run, WorkflowCheck: %s", r.line))
		}
	}
	for _, d := range ws.drift {
		c.wfAnomaly(AnomalyWorkflowDrift, d.WorkflowID, "after the drain, WorkflowCheck: "+d.String())
	}
}

// taskJobs are, for each send of each workflow, the jobs each of its
// tasks ran as (by their start lines), in ID order.
func (c *checker) taskJobs() map[wfKey]map[string][]int64 {
	out := map[wfKey]map[string][]int64{}
	for _, r := range c.recs {
		if r.ev != evStart || r.get("task") == "" {
			continue
		}
		n, err1 := strconv.ParseInt(r.get("wf"), 10, 64)
		try, err2 := strconv.Atoi(r.get("try"))
		if err1 != nil || err2 != nil {
			continue
		}
		k, task := wfKey{n, try}, r.get("task")
		if out[k] == nil {
			out[k] = map[string][]int64{}
		}
		if !slices.Contains(out[k][task], r.job) {
			out[k][task] = append(out[k][task], r.job)
		}
	}
	for _, tasks := range out {
		for _, ids := range tasks {
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		}
	}
	return out
}

// checkWorkflow checks one stored workflow against the jobs its tasks
// ran as.
func (c *checker) checkWorkflow(wf *backend.Workflow, k wfKey, ran map[string][]int64) {
	ws := c.fs.wf
	_, acked := ws.acked[wf.ID]
	if acked {
		c.rep.Workflows++
	} else {
		c.rep.WorkflowsExtra++
	}
	joins := ran[joinTask]
	joinAttempts := c.attemptsOf(joins)
	if len(joins) > 1 {
		c.wfAnomaly(AnomalyDoubleRelease, wf.ID, fmt.Sprintf("workflow %d's join ran as %d jobs (%v): it was released more than once", wf.ID, len(joins), joins), joinAttempts...)
	}
	var parts []string
	var join *backend.WorkflowTask
	for _, t := range wf.Tasks {
		if t.Name == joinTask {
			join = t
		} else {
			parts = append(parts, t.Name)
		}
	}
	// The part planned to fail for good succeeds after a replay: the
	// workflow is then no longer planned to fail.
	rp := c.wfReplays[k]
	planned := ws.perm[k.n] && (rp == nil || !rp.perm)
	if rp != nil && rp.moved > 0 {
		c.rep.WorkflowsReplayed++
		if wf.State == backend.WorkflowSucceeded {
			c.rep.WorkflowsReplayedSucceeded++
		}
	}
	switch wf.State {
	case backend.WorkflowRunning:
		c.wfAnomaly(AnomalyStuckWorkflow, wf.ID, fmt.Sprintf("workflow %d is still running after the drain: %s", wf.ID, unfinishedTasks(wf)), joinAttempts...)
	case backend.WorkflowSucceeded:
		c.rep.WorkflowsSucceeded++
		if planned {
			c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d succeeded though one of its parts fails for good and was not replayed", wf.ID))
		}
		switch n := c.completions(joins); n {
		case 1:
			c.rep.JoinsDone++
		default:
			c.wfAnomaly(AnomalyJoinNotOnce, wf.ID, fmt.Sprintf("workflow %d succeeded with %d join completions", wf.ID, n), joinAttempts...)
		}
	case backend.WorkflowFailed:
		if planned {
			c.rep.WorkflowsFailedOnPurpose++
		} else {
			c.rep.WorkflowsFailedByFaults++
		}
		if acked {
			c.rep.WorkflowsFailedAcked++
		}
		c.checkFailedWorkflow(wf, join, joins, joinAttempts, planned, parts, ran)
	case backend.WorkflowCancelled:
		c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d is cancelled, though nothing cancelled it", wf.ID))
	}
	c.checkJoinAfterParts(wf, parts, ran, joinAttempts)
}

// checkFailedWorkflow: a workflow failed either because a part did (its
// join is then cancelled and never ran) or because the join itself did,
// all its parts having succeeded (the kills spent its attempts): then it
// ran, but none of its runs completed.
//
// A part that failed and was replayed may succeed after all: when every
// part has a completion, the join cannot stay cancelled.
func (c *checker) checkFailedWorkflow(wf *backend.Workflow, join *backend.WorkflowTask, joins []int64, joinAttempts []*attempt, planned bool, parts []string, ran map[string][]int64) {
	if join == nil {
		c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d failed, and has no join task", wf.ID))
		return
	}
	switch join.State {
	case backend.TaskFailed:
		if planned || wf.Counts.Succeeded != len(wf.Tasks)-1 {
			c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d's join failed, though not all its parts succeeded (%+v)", wf.ID, wf.Counts), joinAttempts...)
		}
		if n := c.completions(joins); n > 0 {
			c.wfAnomaly(AnomalyJoinNotOnce, wf.ID, fmt.Sprintf("workflow %d failed with its join, yet the join completed %d times", wf.ID, n), joinAttempts...)
		}
	case backend.TaskCancelled:
		if len(joinAttempts) > 0 {
			c.wfAnomaly(AnomalyJoinNotOnce, wf.ID, fmt.Sprintf("workflow %d failed and its join was cancelled, yet the join ran", wf.ID), joinAttempts...)
		}
		if len(parts) > 0 && c.allCompleted(parts, ran) {
			var attempts []*attempt
			for _, p := range parts {
				attempts = append(attempts, c.attemptsOf(ran[p])...)
			}
			c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d failed with its join cancelled, though every part completed (a replayed part's end not counted?)", wf.ID), attempts...)
		}
	default:
		c.wfAnomaly(AnomalyWorkflowState, wf.ID, fmt.Sprintf("workflow %d failed, and its join is %s, neither failed nor cancelled", wf.ID, join.State))
		if n := c.completions(joins); n > 0 {
			c.wfAnomaly(AnomalyJoinNotOnce, wf.ID, fmt.Sprintf("workflow %d failed, yet its join completed %d times", wf.ID, n), joinAttempts...)
		}
	}
}

// checkJoinAfterParts: every claim of the join came after each part had a
// successful attempt whose outcome was not refused. The part's job ends
// in the step that releases the join, after its handler's end line and
// before the join's job exists, so its claim line must follow.
func (c *checker) checkJoinAfterParts(wf *backend.Workflow, parts []string, ran map[string][]int64, joinAttempts []*attempt) {
	for _, a := range joinAttempts {
		if a.start == nil {
			continue
		}
		c.rep.JoinStarts++
		at := a.first().mono
		for _, part := range parts {
			if !c.succeededBefore(ran[part], at) {
				c.wfAnomaly(AnomalyJoinTooEarly, wf.ID, fmt.Sprintf("workflow %d's join (job %d att %d, %s) was claimed before its part %s had succeeded", wf.ID, a.key.job, a.key.att, a.key.proc, part),
					append([]*attempt{a}, c.attemptsOf(ran[part])...)...)
				break
			}
		}
		if ok, all, read := parseDeps(a.start.get("deps")); read && ok < all {
			c.wfAnomaly(AnomalyJoinTooEarly, wf.ID, fmt.Sprintf("workflow %d's join (job %d att %d) read its dependencies while running: %d of %d succeeded", wf.ID, a.key.job, a.key.att, ok, all), a)
		}
	}
}

// allCompleted reports whether each of parts has a completion.
func (c *checker) allCompleted(parts []string, ran map[string][]int64) bool {
	for _, p := range parts {
		if c.completions(ran[p]) == 0 {
			return false
		}
	}
	return true
}

// succeededBefore reports whether one of jobs had an attempt whose handler
// succeeded before mono and whose outcome was not refused.
func (c *checker) succeededBefore(jobs []int64, mono int64) bool {
	for _, b := range c.attemptsOf(jobs) {
		if b.end != nil && b.end.val == resOK && b.end.mono < mono && c.outcome(b) != outRefused && b.aban == nil {
			return true
		}
	}
	return false
}

// completions counts the join completions of jobs: each done applied,
// and for a job with none, a success whose process died before it heard
// back, when the job is gone and not failed (done unconfirmed).
func (c *checker) completions(jobs []int64) int {
	n := 0
	for _, id := range jobs {
		j := c.jobs[id]
		if j == nil {
			continue
		}
		applied, unsure := 0, false
		for _, a := range j.attempts {
			switch o := c.outcome(a); {
			case o == outApplied && a.written.val == "done":
				applied++
			case (o == outUnknown || o == outAmbiguous) && a.end != nil && a.end.val == resOK:
				unsure = true
			}
		}
		if applied == 0 && unsure && j.live == nil && len(j.failed) == 0 {
			applied = 1
		}
		n += applied
	}
	return n
}

// attemptsOf are the attempts of jobs, each job's in claim order.
func (c *checker) attemptsOf(jobs []int64) []*attempt {
	var out []*attempt
	for _, id := range jobs {
		if j := c.jobs[id]; j != nil {
			out = append(out, j.attempts...)
		}
	}
	return out
}

// parseDeps reads a join's deps field ("9/10"); read is false when the
// join could not read them ("err") or the line has none.
func parseDeps(s string) (ok, all int, read bool) {
	a, b, cut := strings.Cut(s, "/")
	if !cut {
		return 0, 0, false
	}
	ok, err1 := strconv.Atoi(a)
	all, err2 := strconv.Atoi(b)
	return ok, all, err1 == nil && err2 == nil
}

// unfinishedTasks describes a running workflow's unfinished tasks.
func unfinishedTasks(wf *backend.Workflow) string {
	var parts []string
	for _, t := range wf.Tasks {
		switch t.State {
		case backend.TaskWaiting:
			parts = append(parts, fmt.Sprintf("%s waits on %s", t.Name, strings.Join(t.WaitingOn, ",")))
		case backend.TaskActive:
			parts = append(parts, fmt.Sprintf("%s active (job %d)", t.Name, t.JobID))
		}
	}
	if len(parts) == 0 {
		return "no task is waiting or active"
	}
	return strings.Join(parts, "; ")
}

// wfAnomaly records an anomaly of workflow id.
func (c *checker) wfAnomaly(kind string, id int64, detail string, attempts ...*attempt) {
	c.rep.anomalyCount[kind]++
	if len(c.rep.Anomalies) < c.maxAnomalies {
		c.rep.Anomalies = append(c.rep.Anomalies, Anomaly{Kind: kind, Workflow: id, Detail: detail, Lines: c.linesOf(attempts)})
	} else {
		c.rep.MoreAnomalies++
	}
}

// workflowChecks are the verdict's rows of the workflow workload.
func (c *checker) workflowChecks(n func(kinds ...string) int) []Check {
	r := c.rep
	return []Check{
		{Name: "joins after their parts", Anomalies: n(AnomalyJoinTooEarly),
			Detail: fmt.Sprintf("%d claims of joins, each after all %d parts of its workflow had succeeded", r.JoinStarts, c.fs.wf.fanOut)},
		{Name: "one join completion per workflow", Anomalies: n(AnomalyDoubleRelease, AnomalyJoinNotOnce),
			Detail: fmt.Sprintf("%d workflows succeeded, %d with exactly one join completion; %d failed (%d on purpose, %d with attempts spent by faults), no join completed%s", r.WorkflowsSucceeded, r.JoinsDone, r.WorkflowsFailedOnPurpose+r.WorkflowsFailedByFaults, r.WorkflowsFailedOnPurpose, r.WorkflowsFailedByFaults, replayDetail(r))},
		{Name: "no stuck workflow", Anomalies: n(AnomalyStuckWorkflow, AnomalyWorkflowState, AnomalyWorkflowLost, AnomalyWorkflowDrift),
			Detail: fmt.Sprintf("%d workflows acknowledged (+%d from sends again), %d running after the drain; %d WorkflowCheck runs during the run, %d drifts", r.Workflows, r.WorkflowsExtra, r.anomalyCount[AnomalyStuckWorkflow], r.WorkflowChecks, r.anomalyCount[AnomalyWorkflowDrift])},
	}
}

// replayDetail is what the replay fault did to the workflows, for the
// checks' details ("" without replays).
func replayDetail(r *Report) string {
	if r.Replays == 0 {
		return ""
	}
	return fmt.Sprintf("; %d workflows had a failed task replayed, %d of them succeeded", r.WorkflowsReplayed, r.WorkflowsReplayedSucceeded)
}
