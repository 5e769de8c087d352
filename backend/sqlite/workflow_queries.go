package sqlite

import (
	"strconv"
	"strings"
)

// The statements of workflows (see queries.go for the conventions; the
// tables are in migrations/008_workflows.sql). Lists of task indexes or
// IDs travel as one JSON array parameter read with json_each, so a
// statement covers any number of tasks: one statement resolves every
// outgoing edge of a task, a fan-out of 1,000 included.

// Cancel causes of a cancelled task (workflow_tasks.cancel_cause): 'dep'
// (a dependency with DepCancel failed or was cancelled) and 'user'
// (WorkflowCancel), written by the statements below, and causeJob. Only a
// task cancelled because of a dependency comes back when the failed task
// that caused it is replayed.
const causeJob = "job" // the task's own job was cancelled

// --- insert ---

// qWorkflowInsert: ?1 name, ?2 number of tasks, ?3 created_at. Inserts a
// running workflow with every task unfinished; LastInsertId is its ID.
const qWorkflowInsert = `INSERT INTO workflows (name, state, tasks, unfinished, created_at) VALUES (?1, 'running', ?2, ?2, ?3)`

// taskInsertColumns is how many parameters taskInsertSQL binds per task.
const taskInsertColumns = 15

// taskInsertRows is how many tasks one taskInsertSQL statement carries:
// 15 parameters each stays far below SQLite's 32766-variable limit.
const taskInsertRows = 500

// taskInsertSQL returns a multi-row INSERT of n tasks. Parameters, for
// each row in turn: workflow_id, idx, name, state, waiting, job_id (NULL
// while waiting), queue, type, payload, priority, max_attempts, delay_us,
// run_at (NULL for none), metadata (NULL for none), key (NULL for none).
func taskInsertSQL(n int) string {
	return multiRow(`INSERT INTO workflow_tasks (workflow_id, idx, name, state, waiting, job_id, queue, type, payload,
	priority, max_attempts, delay_us, run_at, metadata, key) VALUES `, `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, n)
}

// edgeInsertRows is how many edges one edgeInsertSQL statement carries:
// 5 parameters each.
const edgeInsertRows = 1000

// edgeInsertSQL returns a multi-row INSERT of n edges. Parameters, for
// each row in turn: workflow_id, from_idx, to_idx, pos, policy.
func edgeInsertSQL(n int) string {
	return multiRow(`INSERT INTO workflow_edges (workflow_id, from_idx, to_idx, pos, policy) VALUES `, `(?,?,?,?,?)`, n)
}

func multiRow(head, row string, n int) string {
	var sb strings.Builder
	sb.Grow(len(head) + n*(len(row)+1))
	sb.WriteString(head)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(row)
	}
	return sb.String()
}

// qJobsSetWorkflow: ?1 workflow_id, ?2 first job ID, ?3 last job ID. Marks
// the jobs just inserted for tasks (IDs ?2..?3) as the workflow's;
// RowsAffected counts them. jobs_claim does not hold the column, so this
// touches no index.
const qJobsSetWorkflow = `UPDATE jobs SET workflow_id = ?1 WHERE id >= ?2 AND id <= ?3`

// --- a task's job ends ---

// qTaskEnd: ?1 job_id, ?2 state, ?3 result, ?4 reason, ?5 cancel_cause,
// ?6 finished_at. Ends the task whose job ?1 is, if it is active (the
// guard: a task ended already, by WorkflowCancel say, is not ended twice).
// Returns workflow_id, idx, name and the workflow's state, or no row.
const qTaskEnd = `UPDATE workflow_tasks SET state = ?2, result = ?3, reason = ?4, cancel_cause = ?5, finished_at = ?6
WHERE job_id = ?1 AND state = 'active'
RETURNING workflow_id, idx, name, (SELECT w.state FROM workflows w WHERE w.id = workflow_id)`

// qEdgesCountDown: ?1 workflow_id, ?2 from_idx, ?3 the lowest policy that
// counts (0: every edge, for a task that succeeded; 1: DepContinue only).
// Counts down the waiting dependants of task ?2 through those edges.
// Returns idx and the new waiting count of each. "+state" keeps the
// planner off workflow_tasks_state, which would read every waiting task of
// the workflow (O(tasks) per task ended); the key finds the few dependants.
const qEdgesCountDown = `UPDATE workflow_tasks SET waiting = waiting - 1
WHERE workflow_id = ?1 AND +state = 'waiting' AND idx IN (
	SELECT to_idx FROM workflow_edges WHERE workflow_id = ?1 AND from_idx = ?2 AND policy >= ?3)
RETURNING idx, waiting`

// qEdgesCancel: ?1 workflow_id, ?2 from_idx, ?3 reason, ?4 finished_at.
// Cancels the waiting dependants of task ?2 through its DepCancel edges.
// Returns idx and name of each ("+state": see qEdgesCountDown).
const qEdgesCancel = `UPDATE workflow_tasks SET state = 'cancelled', reason = ?3, cancel_cause = 'dep', finished_at = ?4
WHERE workflow_id = ?1 AND +state = 'waiting' AND idx IN (
	SELECT to_idx FROM workflow_edges WHERE workflow_id = ?1 AND from_idx = ?2 AND policy = 0)
RETURNING idx, name`

// qWorkflowTasksEnded: ?1 workflow_id, ?2 tasks ended, ?3 finished_at.
// Takes ?2 off the running workflow's unfinished count and, when that
// reaches 0, ends it: succeeded if every task succeeded, else failed. SET
// expressions read the row's values from before the update.
const qWorkflowTasksEnded = `UPDATE workflows SET unfinished = unfinished - ?2,
	state = CASE WHEN unfinished > ?2 THEN state
		WHEN EXISTS (SELECT 1 FROM workflow_tasks t WHERE t.workflow_id = ?1 AND t.state != 'succeeded') THEN 'failed'
		ELSE 'succeeded' END,
	finished_at = CASE WHEN unfinished > ?2 THEN finished_at ELSE ?3 END
WHERE id = ?1 AND state = 'running'`

// --- release ---

// qTasksToRelease: ?1 workflow_id, ?2 JSON array of idx. Returns idx and
// the job's parameters (queue, type, payload, priority, max_attempts,
// delay_us, run_at, metadata, key) of those tasks still waiting for
// nothing, in idx order.
const qTasksToRelease = `SELECT idx, queue, type, payload, priority, max_attempts, delay_us, run_at, metadata, key
FROM workflow_tasks
WHERE workflow_id = ?1 AND idx IN (SELECT value FROM json_each(?2)) AND state = 'waiting' AND waiting = 0
ORDER BY idx`

// qTaskActivate: ?1 workflow_id, ?2 idx, ?3 job_id. Makes the task
// active with its job. One statement per task: an UPDATE ... FROM
// json_each of the pairs was planned as a scan of the workflow's tasks per
// pair.
const qTaskActivate = `UPDATE workflow_tasks SET state = 'active', waiting = 0, job_id = ?3 WHERE workflow_id = ?1 AND idx = ?2`

// --- replay ---

// qTaskRestore: ?1 job_id. Returns the failed task of job ?1 to active
// (its job was just re-created). Returns workflow_id and idx, or no row.
const qTaskRestore = `UPDATE workflow_tasks SET state = 'active', result = NULL, reason = '', cancel_cause = NULL, finished_at = NULL
WHERE job_id = ?1 AND state = 'failed'
RETURNING workflow_id, idx`

// qTasksDepCancelledFrom: ?1 workflow_id, ?2 idx. Returns, in idx order,
// the tasks reachable from task ?2 through tasks cancelled because of a
// dependency: those the failure of ?2 cancelled (and perhaps another
// failure too). CROSS JOIN fixes the loop order: each task reached looks
// up its own edges by the key (the planner otherwise scanned every edge
// of the workflow per step).
const qTasksDepCancelledFrom = `WITH RECURSIVE reach(idx) AS (
	SELECT ?2
	UNION
	SELECT e.to_idx FROM reach
	CROSS JOIN workflow_edges e ON e.workflow_id = ?1 AND e.from_idx = reach.idx
	CROSS JOIN workflow_tasks t ON t.workflow_id = ?1 AND t.idx = e.to_idx
	WHERE t.state = 'cancelled' AND t.cancel_cause = 'dep'
)
SELECT idx FROM reach WHERE idx != ?2 ORDER BY idx`

// qTasksRewait: ?1 workflow_id, ?2 JSON array of idx. Returns those
// tasks to waiting (their counts are recomputed after).
const qTasksRewait = `UPDATE workflow_tasks SET state = 'waiting', reason = '', cancel_cause = NULL, finished_at = NULL
WHERE workflow_id = ?1 AND idx IN (SELECT value FROM json_each(?2))`

// qWorkflowReopen: ?1 workflow_id, ?2 tasks unfinished again. Returns a
// failed (or still running) workflow to running.
const qWorkflowReopen = `UPDATE workflows SET state = 'running', finished_at = NULL, unfinished = unfinished + ?2
WHERE id = ?1 AND state IN ('running', 'failed')`

// qTaskDepsState: ?1 workflow_id, ?2 idx. Returns name, state and policy
// of each dependency of task ?2, in its Deps order.
const qTaskDepsState = `SELECT t.name, t.state, e.policy FROM workflow_edges e
JOIN workflow_tasks t ON t.workflow_id = e.workflow_id AND t.idx = e.from_idx
WHERE e.workflow_id = ?1 AND e.to_idx = ?2 ORDER BY e.pos`

// qTaskDepCancel: ?1 workflow_id, ?2 idx, ?3 reason, ?4 finished_at.
// Cancels one waiting task because of a dependency.
const qTaskDepCancel = `UPDATE workflow_tasks SET state = 'cancelled', reason = ?3, cancel_cause = 'dep', finished_at = ?4
WHERE workflow_id = ?1 AND idx = ?2 AND state = 'waiting'`

// qTasksRecount: ?1 workflow_id, ?2 JSON array of idx. Recomputes the
// waiting count of every waiting dependant of those tasks (the
// dependencies not ended). Returns idx and the count of each ("+state":
// see qEdgesCountDown).
const qTasksRecount = `UPDATE workflow_tasks AS t SET waiting = (
	SELECT count(*) FROM workflow_edges e
	JOIN workflow_tasks d ON d.workflow_id = e.workflow_id AND d.idx = e.from_idx
	WHERE e.workflow_id = t.workflow_id AND e.to_idx = t.idx AND d.state IN ('waiting', 'active'))
WHERE t.workflow_id = ?1 AND +t.state = 'waiting' AND t.idx IN (
	SELECT to_idx FROM workflow_edges WHERE workflow_id = ?1 AND from_idx IN (SELECT value FROM json_each(?2)))
RETURNING idx, waiting`

// qWorkflowUnfinished: ?1 workflow_id, ?2 tasks ended. Takes ?2 off the
// unfinished count of a workflow that stays running.
const qWorkflowUnfinished = `UPDATE workflows SET unfinished = unfinished - ?2 WHERE id = ?1`

// --- cancel ---

// qWorkflowState: ?1 id. Returns the workflow's state, or no row.
const qWorkflowState = `SELECT state FROM workflows WHERE id = ?1`

// qWorkflowCancel: ?1 id, ?2 finished_at. Cancels the running workflow.
const qWorkflowCancel = `UPDATE workflows SET state = 'cancelled', unfinished = 0, finished_at = ?2 WHERE id = ?1 AND state = 'running'`

// qTasksCancelWaiting: ?1 workflow_id, ?2 reason, ?3 finished_at. Cancels
// the workflow's waiting tasks; RowsAffected counts them.
const qTasksCancelWaiting = `UPDATE workflow_tasks SET state = 'cancelled', reason = ?2, cancel_cause = 'user', finished_at = ?3
WHERE workflow_id = ?1 AND state = 'waiting'`

// qTasksCancelActive: ?1 workflow_id, ?2 reason, ?3 finished_at. Cancels
// the workflow's active tasks. Returns the job_id of each, whose job the
// caller then cancels.
const qTasksCancelActive = `UPDATE workflow_tasks SET state = 'cancelled', reason = ?2, cancel_cause = 'user', finished_at = ?3
WHERE workflow_id = ?1 AND state = 'active'
RETURNING job_id`

// --- reads ---

// workflowColumns is the column list scanWorkflow reads, in order.
const workflowColumns = `id, name, state, created_at, finished_at`

// qWorkflowGet: ?1 id. Returns workflowColumns or no row.
const qWorkflowGet = `SELECT ` + workflowColumns + ` FROM workflows WHERE id = ?1`

// qWorkflowTasks: ?1 workflow_id. Returns idx, name, state, job_id,
// queue, type, priority, result, reason and finished_at of every task, in
// idx order.
const qWorkflowTasks = `SELECT idx, name, state, job_id, queue, type, priority, result, reason, finished_at
FROM workflow_tasks WHERE workflow_id = ?1 ORDER BY idx`

// qWorkflowEdges: ?1 workflow_id. Returns from_idx, to_idx and policy of
// every edge, each task's dependencies together in Deps order.
const qWorkflowEdges = `SELECT from_idx, to_idx, policy FROM workflow_edges INDEXED BY workflow_edges_to
WHERE workflow_id = ?1 ORDER BY to_idx, pos`

// workflowListSQL: the state (when filtered), the before ID (when
// paging), then the limit. Returns workflowColumns, highest ID first.
func workflowListSQL(state bool, before bool) string {
	var terms []string
	if state {
		terms = append(terms, "state = ?")
	}
	if before {
		terms = append(terms, "id < ?")
	}
	where := "1"
	if len(terms) > 0 {
		where = strings.Join(terms, " AND ")
	}
	return `SELECT ` + workflowColumns + ` FROM workflows WHERE ` + where + ` ORDER BY id DESC LIMIT ?`
}

// qWorkflowCounts: ?1 JSON array of workflow IDs. Returns workflow_id,
// state and the number of tasks in it (uses workflow_tasks_state).
const qWorkflowCounts = `SELECT workflow_id, state, count(*) FROM workflow_tasks
WHERE workflow_id IN (SELECT value FROM json_each(?1)) GROUP BY workflow_id, state`

// qTaskOfJob: ?1 job_id. Returns workflow_id and idx of the task whose job
// ?1 is, or no row.
const qTaskOfJob = `SELECT workflow_id, idx FROM workflow_tasks WHERE job_id = ?1`

// qTaskDepOutcomes: ?1 workflow_id, ?2 idx. Returns name, policy, state,
// result and reason of each dependency of task ?2, in its Deps order.
const qTaskDepOutcomes = `SELECT t.name, e.policy, t.state, t.result, t.reason FROM workflow_edges e
JOIN workflow_tasks t ON t.workflow_id = e.workflow_id AND t.idx = e.from_idx
WHERE e.workflow_id = ?1 AND e.to_idx = ?2 ORDER BY e.pos`

// qWorkflowStats: no parameters. Returns state and count per state.
const qWorkflowStats = `SELECT state, count(*) FROM workflows GROUP BY state`

// qTasksWaiting: no parameters. Returns the number of waiting tasks, all
// of which belong to running workflows (through workflows_state and
// workflow_tasks_state, never a scan of every task).
const qTasksWaiting = `SELECT count(*) FROM workflows w
JOIN workflow_tasks t ON t.workflow_id = w.id AND t.state = 'waiting'
WHERE w.state = 'running'`

// qCheckUnfinished: no parameters. Returns id, the stored unfinished
// count and the recomputed one (tasks waiting or active) of every running
// workflow, lowest ID first.
const qCheckUnfinished = `SELECT w.id, w.unfinished,
	(SELECT count(*) FROM workflow_tasks t WHERE t.workflow_id = w.id AND t.state IN ('waiting', 'active'))
FROM workflows w WHERE w.state = 'running' ORDER BY w.id`

// qCheckWaiting: no parameters. Returns workflow_id, name, the stored
// waiting count and the recomputed one of every waiting task of a running
// workflow: its dependencies that still count (not ended, or ended other
// than succeeded with DepCancel, which should have cancelled it). The
// index is named: the planner otherwise read every edge of the workflow
// per task.
const qCheckWaiting = `SELECT t.workflow_id, t.name, t.waiting, (
	SELECT count(*) FROM workflow_edges e INDEXED BY workflow_edges_to
	JOIN workflow_tasks d ON d.workflow_id = e.workflow_id AND d.idx = e.from_idx
	WHERE e.workflow_id = t.workflow_id AND e.to_idx = t.idx
		AND (d.state IN ('waiting', 'active') OR (d.state IN ('failed', 'cancelled') AND e.policy = 0)))
FROM workflows w JOIN workflow_tasks t ON t.workflow_id = w.id AND t.state = 'waiting'
WHERE w.state = 'running' ORDER BY t.workflow_id, t.idx`

// --- prune ---

// qWorkflowsToPrune: ?1 cutoff, ?2 limit. Returns id and number of tasks
// of the workflows that finished before ?1 and may go: succeeded,
// cancelled, or failed with no task whose failed job is still in
// failed_jobs (nothing left to replay); at most ?2, in no particular order
// (a walk of workflows_finished that stops at the limit: ordering them
// would sort every candidate in each chunk). A failed workflow that can
// still be replayed costs a probe of failed_jobs_job_id per failed task in
// every chunk; there are few of those.
const qWorkflowsToPrune = `SELECT id, tasks FROM workflows w
WHERE state IN ('succeeded', 'cancelled', 'failed') AND finished_at < ?1
	AND (state != 'failed' OR NOT EXISTS (
		SELECT 1 FROM workflow_tasks t JOIN failed_jobs f ON f.job_id = t.job_id
		WHERE t.workflow_id = w.id AND t.state = 'failed'))
LIMIT ?2`

// The deletes of a prune: ?1 JSON array of workflow IDs.
const (
	qPruneEdges     = `DELETE FROM workflow_edges WHERE workflow_id IN (SELECT value FROM json_each(?1))`
	qPruneTasks     = `DELETE FROM workflow_tasks WHERE workflow_id IN (SELECT value FROM json_each(?1))`
	qPruneWorkflows = `DELETE FROM workflows WHERE id IN (SELECT value FROM json_each(?1))`
)

// jsonInts renders ids as a JSON array for json_each.
func jsonInts(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*6)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
