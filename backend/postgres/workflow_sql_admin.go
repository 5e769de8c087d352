package postgres

// The statements of workflows that read them and those of WorkflowCancel
// and WorkflowPrune (see workflow_sql.go for the lock order they keep).

// sqlWorkflowState reads a workflow's state, without a lock.
//
//	$1 id bigint
//
// Returns zero or one row: (state text).
const sqlWorkflowState = `SELECT state FROM {schema}.workflows WHERE id = $1`

// sqlWorkflowCancelLock locks, for WorkflowCancel, in this order: the live
// jobs of the workflow's active tasks (by id), then every task of the
// workflow (by idx). Ending a task locks its job first and its tasks
// after, the same order. A task released between the two statements has
// a job the first did not lock, which the cancel then locks after the
// tasks: that rare case can deadlock with the job's own end, and the
// deadlock (40P01) is retried by b.do like any other.
//
//	$1 workflow_id bigint
//
// The first statement returns (id) per job; the second (idx int, state
// text, job_id bigint or NULL) per task, as committed once locked.
const (
	sqlWorkflowCancelJobs = `
SELECT j.id FROM {schema}.jobs j JOIN {schema}.workflow_tasks t ON t.job_id = j.id
WHERE t.workflow_id = $1 AND t.state = 'active'
ORDER BY j.id
FOR UPDATE OF j`
	sqlWorkflowCancelTasks = `
SELECT idx, state, job_id FROM {schema}.workflow_tasks WHERE workflow_id = $1 ORDER BY idx FOR UPDATE`
)

// sqlWorkflowLock locks the workflow row, last, and reads its state.
//
//	$1 id bigint
//
// Returns zero or one row: (state text).
const sqlWorkflowLock = `SELECT state FROM {schema}.workflows WHERE id = $1 FOR UPDATE`

// sqlWorkflowCancelEnd ends the cancel: every waiting or active task
// cancelled by the user ($2, the reason), and the workflow cancelled.
//
//	$1 workflow_id bigint, $2 reason text
//
// Returns the command tag.
const sqlWorkflowCancelEnd = `
WITH t AS (
	UPDATE {schema}.workflow_tasks
	SET state = 'cancelled', reason = $2, cancel_cause = 'user', finished_at = now()
	WHERE workflow_id = $1 AND state IN ('waiting', 'active')
	RETURNING 1
)
UPDATE {schema}.workflows
SET state = 'cancelled', unfinished = 0, finished_at = now(),
    failed_tasks = failed_tasks + (SELECT count(*) FROM t)
WHERE id = $1 AND state = 'running'`

// taskColumns is the task column list of sqlWorkflowGet, in the order
// readWorkflow reads it.
const taskColumns = `t.idx, t.name, t.state, t.job_id, t.queue, t.type, t.priority, t.result, t.reason, t.finished_at`

// sqlWorkflowGet reads a workflow and its tasks in one snapshot.
//
//	$1 id bigint
//
// Returns one row per task in idx order: (id, name, state, created_at,
// finished_at, taskColumns); none when there is no such workflow.
const sqlWorkflowGet = `
SELECT w.id, w.name, w.state, w.created_at, w.finished_at, ` + taskColumns + `
FROM {schema}.workflows w JOIN {schema}.workflow_tasks t ON t.workflow_id = w.id
WHERE w.id = $1
ORDER BY t.idx`

// sqlWorkflowEdges reads a workflow's edges, each task's in Deps order.
// Edges never change, so a snapshot apart from sqlWorkflowGet's is fine.
//
//	$1 id bigint
//
// Returns (to_idx int, from_idx int, policy smallint).
const sqlWorkflowEdges = `
SELECT to_idx, from_idx, policy FROM {schema}.workflow_edges WHERE workflow_id = $1 ORDER BY to_idx, pos`

// countColumns counts the tasks t of a workflow by state, in the order
// TaskCounts lists them.
const countColumns = `count(*) FILTER (WHERE t.state = 'waiting'), count(*) FILTER (WHERE t.state = 'active'),
	       count(*) FILTER (WHERE t.state = 'succeeded'), count(*) FILTER (WHERE t.state = 'failed'),
	       count(*) FILTER (WHERE t.state = 'cancelled')`

// sqlWorkflowList pages through workflows, newest first, with their
// tasks counted by state.
//
//	$1 state text (NULL: any), $2 before_id bigint (NULL: no bound), $3 limit int
//
// Returns (id, name, state, created_at, finished_at, 5 counts).
const sqlWorkflowList = `
SELECT w.id, w.name, w.state, w.created_at, w.finished_at, c.*
FROM (SELECT * FROM {schema}.workflows
      WHERE ($1::text IS NULL OR state = $1) AND ($2::bigint IS NULL OR id < $2)
      ORDER BY id DESC
      LIMIT $3) w
CROSS JOIN LATERAL (
	SELECT ` + countColumns + `
	FROM {schema}.workflow_tasks t WHERE t.workflow_id = w.id
) c
ORDER BY w.id DESC`

// sqlWorkflowDeps reads the dependencies of the task whose job is $1.
//
//	$1 job_id bigint
//
// Returns, in Deps order, (name, policy, state, result, reason) per
// dependency; one row of NULLs for a task without any; no row when the job
// is no task's.
const sqlWorkflowDeps = `
SELECT d.name, e.policy, d.state, d.result, d.reason
FROM {schema}.workflow_tasks t
LEFT JOIN {schema}.workflow_edges e ON e.workflow_id = t.workflow_id AND e.to_idx = t.idx
LEFT JOIN {schema}.workflow_tasks d ON d.workflow_id = e.workflow_id AND d.idx = e.from_idx
WHERE t.job_id = $1
ORDER BY e.pos`

// sqlWorkflowStats counts workflows by state and the tasks waiting (in
// running workflows: no other has any).
//
// Returns one row: (running, succeeded, failed, cancelled, tasks waiting).
const sqlWorkflowStats = `
SELECT count(*) FILTER (WHERE state = 'running'), count(*) FILTER (WHERE state = 'succeeded'),
       count(*) FILTER (WHERE state = 'failed'), count(*) FILTER (WHERE state = 'cancelled'),
       (SELECT count(*) FROM {schema}.workflows w JOIN {schema}.workflow_tasks t ON t.workflow_id = w.id
        WHERE w.state = 'running' AND t.state = 'waiting')
FROM {schema}.workflows`

// sqlWorkflowCheck recomputes, in one snapshot, every running workflow's
// counts: each waiting task's dependencies that still count (not ended,
// or ended failed or cancelled with DepCancel) and the tasks waiting or
// active.
//
// Returns (workflow_id, task name, empty for the workflow's own count,
// stored int, recomputed int) for each count that differs.
const sqlWorkflowCheck = `
WITH run AS MATERIALIZED (
	SELECT id, unfinished FROM {schema}.workflows WHERE state = 'running'
)
SELECT x.workflow_id, x.name, x.stored, x.want FROM (
	SELECT t.workflow_id, t.name, t.idx, t.waiting AS stored,
	       (SELECT count(*) FROM {schema}.workflow_edges e
	        JOIN {schema}.workflow_tasks d ON d.workflow_id = e.workflow_id AND d.idx = e.from_idx
	        WHERE e.workflow_id = t.workflow_id AND e.to_idx = t.idx
	          AND NOT (d.state = 'succeeded' OR e.policy = 1 AND d.state IN ('failed', 'cancelled')))::int AS want
	FROM run JOIN {schema}.workflow_tasks t ON t.workflow_id = run.id
	WHERE t.state = 'waiting'
	UNION ALL
	SELECT run.id, '', -1, run.unfinished,
	       (SELECT count(*) FROM {schema}.workflow_tasks t
	        WHERE t.workflow_id = run.id AND t.state IN ('waiting', 'active'))::int
	FROM run
) x
WHERE x.stored <> x.want
ORDER BY x.workflow_id, x.idx`

// sqlWorkflowPrune deletes a chunk of the workflows that finished more
// than $1 microseconds ago and may go (succeeded, cancelled, or failed
// with no task whose failed job is still in failed_jobs: nothing left to
// replay), with their tasks and edges: the oldest by id whose tasks,
// counted in id order, start within $2 (at least one workflow, whatever
// its size). A failed workflow's failed job cannot come back once it is
// gone (a task's job fails and its workflow ends in one transaction), so
// the snapshot that found none stays true for the deletes. The failed ones
// are a branch of their own so that NOT EXISTS is planned as an anti-join
// (under an OR it would be a subplan hashing every failed task, or run
// per workflow without an index).
//
//	$1 older_than_us bigint, $2 chunk int
//
// Returns one row: (workflows deleted bigint).
const sqlWorkflowPrune = `
WITH cand AS MATERIALIZED (
	SELECT id, tasks, sum(tasks) OVER (ORDER BY id) AS upto
	FROM (
		SELECT id, tasks FROM {schema}.workflows
		WHERE state IN ('succeeded', 'cancelled') AND finished_at < now() - $1::bigint * interval '1 microsecond'
		UNION ALL
		SELECT id, tasks FROM {schema}.workflows w
		WHERE state = 'failed' AND finished_at < now() - $1::bigint * interval '1 microsecond'
			AND NOT EXISTS (
				SELECT 1 FROM {schema}.workflow_tasks t JOIN {schema}.failed_jobs f ON f.job_id = t.job_id
				WHERE t.workflow_id = w.id AND t.state = 'failed')
	) c
	ORDER BY id
	LIMIT $2
),
sel AS (
	SELECT id FROM cand WHERE upto - tasks < $2
),
dt AS (
	DELETE FROM {schema}.workflow_tasks t USING sel WHERE t.workflow_id = sel.id
),
de AS (
	DELETE FROM {schema}.workflow_edges e USING sel WHERE e.workflow_id = sel.id
),
dw AS (
	DELETE FROM {schema}.workflows w USING sel WHERE w.id = sel.id
	RETURNING 1
)
SELECT count(*) FROM dw`
