package postgres

import (
	"strings"
	"sync"
)

// The statements of workflows (see queries.go for the conventions and
// migrations/010_workflows.sql for the tables).
//
// Locks. Many workers in many processes end tasks of one workflow at once,
// so every statement here takes its row locks in one global order: job
// rows first (the statement that ends a job holds its row), then task rows
// in idx order (a topological order: a task's dependants come after it),
// then the workflow row, always last. The counts that decide a release
// (workflow_tasks.waiting) and a workflow's end (workflows.unfinished) only
// change through UPDATE ... SET n = n - k on the locked row, so under READ
// COMMITTED the waiting transaction recomputes from the committed value and
// exactly one sees 0. A cascade of cancels can still lock a later level's
// tasks after an earlier level's higher ones; the rare deadlock that makes
// is rolled back by the server and the transaction run again by do (40P01),
// or, in a caller's transaction (JobCompleteTx), returned to the caller.

// releaseInsert inserts the jobs of the tasks a CTE named src (rows of
// workflow_tasks) moved to active in this statement, drawing nothing: their
// job_id was drawn from jobs_id_seq by the UPDATE that released them, so the
// insert counter (inserted.go) counts them like any job. Delay counts from
// now, the release. Returns (queue, available_at).
func releaseInsert(src string) string {
	return `INSERT INTO {schema}.jobs AS j
	       (id, queue, type, payload, priority, max_attempts, available_at, metadata, workflow_id, key, turn)
	SELECT job_id, queue, type, payload, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), metadata, workflow_id,
	       key, ` + keyTurnInline(src, "idx") + `
	FROM ` + src + `
	WHERE state = 'active'
	ORDER BY idx
	RETURNING j.queue, j.available_at`
}

// dueRows selects the queues that got a job due now from a CTE named ins
// (see releaseInsert) as rows ('q', 0, queue). With notify, each is also
// sent with pg_notify, for a caller's transaction whose commit the backend
// does not see (as sqlInsertNotify does); the count keeps the call from
// being optimised away.
func dueRows(notify bool) string {
	if notify {
		return `SELECT 'q', count(pg_notify({channel}, q.queue))::int, q.queue
FROM (SELECT DISTINCT queue FROM ins WHERE available_at <= now()) q
GROUP BY q.queue`
	}
	return `SELECT 'q', 0, q.queue FROM (SELECT DISTINCT queue FROM ins WHERE available_at <= now()) q`
}

// sqlWorkflowInsert inserts a workflow, its tasks in topological order,
// its edges, and the jobs of the tasks without dependencies, in one
// statement.
//
//	$1 name text, $2 tasks int,
//	$3..$13 per task in idx order: name text[], qname text[], waiting int[],
//	  queue text[], type text[], payload text[] (JSON text), priority int[],
//	  max_attempts int[], delay_us bigint[], run_at timestamptz[] (NULL:
//	  delay from the release), metadata text[] (JSON; NULL: none),
//	$14..$17 per edge: from_idx int[], to_idx int[], pos int[], policy int[],
//	$18 per task in idx order: key text[] (NULL: none; see keyTurnInline)
//
// Returns one row per job inserted (at least one: a graph without a cycle
// has a task without dependencies): (workflow_id bigint, task name text,
// job id bigint, queue text, due bool).
func sqlWorkflowInsert(notify bool) string {
	s := `
WITH wf AS (
	INSERT INTO {schema}.workflows (name, state, tasks, unfinished)
	VALUES ($1, 'running', $2, $2)
	RETURNING id
),
input AS (
	SELECT * FROM unnest($3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[],
	                     $9::int[], $10::int[], $11::bigint[], $12::timestamptz[], $13::text[], $18::text[])
	     WITH ORDINALITY AS t(name, qname, waiting, queue, type, payload, priority, max_attempts,
	                          delay_us, run_at, metadata, key, ord)
),
tasks AS (
	INSERT INTO {schema}.workflow_tasks AS t
	       (workflow_id, idx, name, qname, state, waiting, job_id, queue, type, payload,
	        priority, max_attempts, delay_us, run_at, metadata, key)
	SELECT wf.id, (i.ord - 1)::int, i.name, i.qname,
	       CASE WHEN i.waiting = 0 THEN 'active' ELSE 'waiting' END, i.waiting,
	       CASE WHEN i.waiting = 0 THEN nextval('{schema}.jobs_id_seq') END,
	       i.queue, i.type, i.payload::json, i.priority, i.max_attempts, i.delay_us, i.run_at, i.metadata::jsonb, i.key
	FROM wf, input i
	ORDER BY i.ord
	RETURNING t.*
),
edges AS (
	INSERT INTO {schema}.workflow_edges (workflow_id, from_idx, to_idx, pos, policy)
	SELECT wf.id, e.from_idx, e.to_idx, e.pos, e.policy
	FROM wf, unnest($14::int[], $15::int[], $16::int[], $17::smallint[]) AS e(from_idx, to_idx, pos, policy)
),
ins AS (
	INSERT INTO {schema}.jobs AS j
	       (id, queue, type, payload, priority, max_attempts, available_at, metadata, workflow_id, key, turn)
	SELECT job_id, queue, type, payload, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), metadata, workflow_id,
	       key, ` + keyTurnInline("tasks", "idx") + `
	FROM tasks
	WHERE state = 'active'
	ORDER BY idx
	RETURNING j.id, j.queue, j.available_at
)`
	if notify {
		return s + `,
woken AS (
	SELECT count(pg_notify({channel}, q.queue)) AS n
	FROM (SELECT DISTINCT queue FROM ins WHERE available_at <= now()) q
)
SELECT t.workflow_id, t.name, ins.id, ins.queue, ins.available_at <= now()
FROM tasks t JOIN ins ON ins.id = t.job_id CROSS JOIN woken`
	}
	return s + `
SELECT t.workflow_id, t.name, ins.id, ins.queue, ins.available_at <= now()
FROM tasks t JOIN ins ON ins.id = t.job_id`
}

// depN and depCancel read, in resolveTail's UPDATE of a dependant t, the
// count and the cancel reason its deps row carries (see dmap).
const (
	depN      = `((SELECT m FROM dmap) -> t.idx::text ->> 0)::int`
	depCancel = `((SELECT m FROM dmap) -> t.idx::text ->> 1)`
)

// resolveTail resolves the outgoing edges of the tasks a CTE named src
// (idx int, state text, qname text) ended in this statement, in one pass
// over all of them: each waiting dependant is counted down by its edges
// from tasks that succeeded or ended with DepContinue, and released (its
// job inserted) when that reaches 0; a dependant with a DepCancel edge from
// a task that failed or was cancelled is cancelled instead, its reason
// naming the first such task by idx. Only rows still waiting once locked
// change, so a dependant another transaction ended meanwhile is skipped,
// and a later level resolves only what this one really cancelled.
//
// The dependants are found and locked one index probe each, in idx order,
// by a LATERAL subquery (which the planner cannot turn around), and
// updated by a statement without a join: an index range over their idx
// (one row for a chain or a fan-in), each row's membership and values
// looked up in a one-row jsonb map (depN, depCancel). Joining two CTEs, or
// a CTE and a table without statistics yet, the planner expects a row or
// two on each side and picks a nested loop over both: quadratic in the
// fan-out (docs/performance.md, "Why the code is shaped this way").
// (Addressing the rows by ctid would skip a row another
// transaction updated meanwhile: EPQ rechecks the new version's TID
// against the list.)
//
// When nothing was cancelled (no further level), it also ends the tasks'
// share of the workflow row: unfinished minus the tasks ended (src, plus
// $carried earlier levels' count), failed_tasks plus those not succeeded
// ($carriedBad earlier), and the workflow's end when unfinished reaches 0.
// A cancelled workflow's row is left as it is.
//
// Returns rows (kind text, n int, text): ('c', idx, qname) for each
// dependant cancelled, the next level's src; ('q', 0, queue) per queue
// with a job released due now (see dueRows); with withSrc, ('e', idx,
// state) for each task of src, which the next level's counts carry.
func resolveTail(carried, carriedBad string, notify, withSrc bool) string {
	src := ""
	if withSrc {
		src = "\nUNION ALL\nSELECT 'e', idx, state FROM src"
	}
	return `
agg AS (
	SELECT e.to_idx AS idx,
	       count(*) FILTER (WHERE s.state = 'succeeded' OR e.policy = 1)::int AS n,
	       (array_agg('dependency ' || s.qname || ' ' || s.state ORDER BY s.idx)
	           FILTER (WHERE s.state <> 'succeeded' AND e.policy = 0))[1] AS cancel
	FROM src s JOIN {schema}.workflow_edges e ON e.workflow_id = $1 AND e.from_idx = s.idx
	GROUP BY e.to_idx
),
deps AS MATERIALIZED (
	SELECT x.idx, a.n, a.cancel
	FROM (SELECT * FROM agg ORDER BY idx) a
	CROSS JOIN LATERAL (
		SELECT t.idx FROM {schema}.workflow_tasks t
		WHERE t.workflow_id = $1 AND t.idx = a.idx AND t.state = 'waiting'
		FOR UPDATE
	) x
),
dmap AS (
	SELECT min(idx) AS lo, max(idx) AS hi,
	       jsonb_object_agg(idx::text, jsonb_build_array(n, cancel)) AS m
	FROM deps
),
upd AS (
	UPDATE {schema}.workflow_tasks t
	SET waiting = t.waiting - ` + depN + `,
	    state = CASE WHEN ` + depCancel + ` IS NOT NULL THEN 'cancelled'
	                 WHEN t.waiting - ` + depN + ` <= 0 THEN 'active' ELSE 'waiting' END,
	    reason = ` + depCancel + `,
	    cancel_cause = CASE WHEN ` + depCancel + ` IS NOT NULL THEN 'dep' END,
	    finished_at = CASE WHEN ` + depCancel + ` IS NOT NULL THEN now() END,
	    job_id = CASE WHEN ` + depCancel + ` IS NULL AND t.waiting - ` + depN + ` <= 0
	                  THEN nextval('{schema}.jobs_id_seq') END
	WHERE t.workflow_id = $1 AND t.idx BETWEEN (SELECT lo FROM dmap) AND (SELECT hi FROM dmap)
	  AND jsonb_exists((SELECT m FROM dmap), t.idx::text) AND t.state = 'waiting'
	RETURNING t.*
),
ins AS (
	` + releaseInsert("upd") + `
),
wf AS (
	UPDATE {schema}.workflows w
	SET unfinished = w.unfinished - n.ended,
	    failed_tasks = w.failed_tasks + n.bad,
	    state = CASE WHEN w.unfinished - n.ended > 0 THEN w.state
	                 WHEN w.failed_tasks + n.bad > 0 THEN 'failed' ELSE 'succeeded' END,
	    finished_at = CASE WHEN w.unfinished - n.ended > 0 THEN NULL ELSE now() END
	FROM (SELECT count(*) + ` + carried + `::int AS ended,
	             count(*) FILTER (WHERE state <> 'succeeded') + ` + carriedBad + `::int AS bad
	      FROM src) n
	WHERE w.id = $1 AND w.state = 'running' AND n.ended > 0
	  AND NOT EXISTS (SELECT 1 FROM upd WHERE upd.state = 'cancelled')
	RETURNING 1
)
SELECT 'c', idx, qname FROM upd WHERE state = 'cancelled'` + src + `
UNION ALL
` + dueRows(notify)
}

// sqlTaskLock locks, before sqlTaskEnd reads them, the tasks whose jobs
// just became terminal and their dependants, in (workflow_id, idx) order:
// the lock order of this file, which replay's sqlTaskRestoreLock keeps
// too. It runs as a statement of its own because a statement reads the
// rows it does not lock as they were when it began: a replay that locked
// a dependency and then set a dependant cancelled by the replayed task
// back to waiting would commit unseen by a sqlTaskEnd already running,
// which would skip the dependant as not waiting and never count it down.
// Once this statement holds the rows, sqlTaskEnd begins after every such
// replay committed, and none can start until this transaction ends.
//
//	$1 workflow_id bigint[], $2 job_id bigint[]
//
// Returns one row: the number of tasks locked.
const sqlTaskLock = `
WITH mine AS MATERIALIZED (
	SELECT t.workflow_id, t.idx
	FROM unnest($1::bigint[], $2::bigint[]) AS i(workflow_id, job_id)
	CROSS JOIN LATERAL (
		SELECT t.workflow_id, t.idx FROM {schema}.workflow_tasks t
		WHERE t.job_id = i.job_id AND t.workflow_id = i.workflow_id
		OFFSET 0
	) t
),
want AS (
	SELECT workflow_id, idx FROM mine
	UNION
	SELECT e.workflow_id, e.to_idx FROM mine m CROSS JOIN LATERAL (
		SELECT e.workflow_id, e.to_idx FROM {schema}.workflow_edges e
		WHERE e.workflow_id = m.workflow_id AND e.from_idx = m.idx
		OFFSET 0
	) e
)
SELECT count(*)::int FROM (SELECT * FROM want ORDER BY workflow_id, idx) w
CROSS JOIN LATERAL (
	SELECT 1 FROM {schema}.workflow_tasks t
	WHERE t.workflow_id = w.workflow_id AND t.idx = w.idx
	FOR UPDATE
) x`

// sqlTaskEnd ends the tasks of one workflow whose jobs just became
// terminal in this transaction, and resolves their edges (resolveTail).
// Only a task still active with that job ends: a task a WorkflowCancel
// already ended, or a second delivery, changes nothing.
//
//	$1 workflow_id bigint, $2 job_id bigint[], $3 state text[] ('succeeded',
//	'failed', 'cancelled'), $4 result text[] (JSON; NULL: none),
//	$5 reason text[] (NULL: none)
//
// Returns resolveTail's rows, with those of src.
func sqlTaskEnd(notify bool) string {
	return `
WITH input AS (
	SELECT * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS i(job_id, state, result, reason)
),
mine AS MATERIALIZED (
	SELECT t.idx FROM {schema}.workflow_tasks t JOIN input i ON i.job_id = t.job_id
	WHERE t.workflow_id = $1 AND t.state = 'active'
	ORDER BY t.idx
	FOR UPDATE OF t
),
src AS (
	UPDATE {schema}.workflow_tasks t
	SET state = i.state, result = i.result::json, reason = i.reason,
	    cancel_cause = CASE WHEN i.state = 'cancelled' THEN 'job' END,
	    finished_at = now()
	FROM mine m, input i
	WHERE t.workflow_id = $1 AND t.idx = m.idx AND t.job_id = i.job_id AND t.state = 'active'
	RETURNING t.idx, t.state, t.qname
),` + resolveTail("0", "0", notify, true)
}

// sqlTaskCascade is the next level of a cascade: the tasks the previous
// statement cancelled (all 'cancelled') resolve their own edges.
//
//	$1 workflow_id bigint, $2 idx int[], $3 qname text[],
//	$4 tasks ended by the earlier levels int, $5 of them not succeeded int
//
// Returns resolveTail's rows.
func sqlTaskCascade(notify bool) string {
	return `
WITH src AS (
	SELECT s.idx, 'cancelled'::text AS state, s.qname FROM unnest($2::int[], $3::text[]) AS s(idx, qname)
),` + resolveTail("$4", "$5", notify, false)
}

// sqlTaskSettle ends the held jobs of tasks that the hot statements
// (sqlComplete, sqlCompleteKeep, sqlRelease, sqlSweep, sqlFinishCancelled,
// sqlSweepCancelled) leave alone, inside the transaction that then ends
// their tasks (see Backend.settleTasks). Fenced like them, by (id,
// claim_token): a claim whose cancel was requested ends cancelled whatever
// its kind; a reserved one ends as its kind says: 1 done, 3 fail, 4 done
// and kept, 5 a release (only when it spends the last attempt), 6 an
// expired lease (only when no attempt is left). Failed rows keep their
// workflow_id in failed_jobs.
//
//	$1 id bigint[], $2 token bigint[], $3 kind int[], $4 error text[],
//	$5 free releases int, $6 duration_us bigint[], $7 worker text[] (a
//	failed job's last entry in errors, see appendErrors), $8 result
//	text[] (JSON; NULL: none), stored with a kept job (kind 4) as
//	sqlCompleteKeep stores a plain job's
//
// Returns one row per job ended: (id bigint, claim_token bigint,
// workflow_id bigint, ending text ('succeeded', 'failed', 'cancelled'),
// error text, attempts int, queue text, type text).
var sqlTaskSettle = `
WITH input AS MATERIALIZED (
	SELECT DISTINCT ON (id, token) * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $6::bigint[], $7::text[], $8::text[])
	       AS t(id, token, kind, error, took_us, worker, result)
),
locked AS MATERIALIZED (
	SELECT j.id, j.status, i.kind, i.error, i.took_us, i.worker, i.result
	FROM {schema}.jobs j JOIN input i ON j.id = i.id AND j.claim_token = i.token
	WHERE j.workflow_id IS NOT NULL
	  AND (j.status = 'cancelling'
	       OR j.status = 'reserved' AND (i.kind IN (1, 3, 4)
	           OR i.kind = 5 AND j.releases >= $5 AND j.attempts >= j.max_attempts
	           OR i.kind = 6 AND j.attempts >= j.max_attempts AND j.lease_until < now()))
	ORDER BY j.id
	FOR UPDATE OF j
),
gone AS (
	DELETE FROM {schema}.jobs j USING locked l
	WHERE j.id = l.id
	RETURNING j.*, l.kind, l.error, l.result AS kept_result, ` + appendErrors("j", "l.error", "l.took_us", "l.worker") + ` AS new_errors,
	          CASE WHEN l.status = 'cancelling' THEN 'cancelled'
	               WHEN l.kind IN (1, 4) THEN 'succeeded' ELSE 'failed' END AS ending
),
kept AS (
	` + finishInsertResult("(SELECT * FROM gone WHERE ending = 'succeeded' AND kind = 4) g", "completed", "kept_result::json") + `
),
stopped AS (
	` + finishInsert("(SELECT * FROM gone WHERE ending = 'cancelled') g", "cancelled") + `
),
moved AS (
	INSERT INTO {schema}.failed_jobs
	       (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key,
	        created_at, failed_at, metadata, claim_token, workflow_id, errors, key, turn)
	SELECT id, queue, type, payload, attempts, max_attempts, priority, error, unique_key,
	       created_at, now(), metadata, claim_token, workflow_id, new_errors, key, turn
	FROM gone
	WHERE ending = 'failed'
)
SELECT id, claim_token, workflow_id, ending, error, attempts, queue, type FROM gone`

// sqlTaskExpired finds, for a lease sweep, up to $1 held jobs of tasks
// that sqlSweep and sqlSweepCancelled leave alone: expired with no attempt
// left, or cancelling. SKIP LOCKED shares them between sweepers.
//
// Returns (id bigint, claim_token bigint) per job.
const sqlTaskExpired = `
SELECT id, claim_token FROM {schema}.jobs
WHERE lease_until < now() AND workflow_id IS NOT NULL
  AND (status = 'cancelling' OR status = 'reserved' AND attempts >= max_attempts)
ORDER BY lease_until
LIMIT $1
FOR UPDATE SKIP LOCKED`

// sqlTaskReplay replays the listed failed jobs of tasks (see replayTail,
// whose statements leave them): moved back to jobs keeping their
// workflow_id, unless their workflow was cancelled (or is gone), in the
// transaction that then restores their tasks (workflow_replay.go).
//
//	$1 ids bigint[] (failed_jobs ids)
//
// Returns ('r', job_id, workflow_id, queue, type) per job replayed and
// ('m', matched, 0, empty texts): how many listed task rows were found.
const sqlTaskReplay = `
WITH sel AS MATERIALIZED (
	SELECT f.* FROM {schema}.failed_jobs f
	WHERE f.id = ANY($1) AND f.workflow_id IS NOT NULL
	ORDER BY f.id
	FOR UPDATE
),
ok AS (
	SELECT s.* FROM sel s JOIN {schema}.workflows w ON w.id = s.workflow_id
	WHERE w.state <> 'cancelled'
),
ins AS (
	INSERT INTO {schema}.jobs
	       (id, queue, type, payload, attempts, max_attempts, priority, status,
	        available_at, created_at, last_error, unique_key, releases, metadata, claim_token, workflow_id, errors, key, turn)
	SELECT job_id, queue, type, payload, 0, max_attempts, priority, 'pending',
	       now(), created_at, error, unique_key, 0, metadata, claim_token, workflow_id, errors, key, turn
	FROM ok
	ORDER BY id
	ON CONFLICT DO NOTHING
	RETURNING id
),
del AS (
	DELETE FROM {schema}.failed_jobs f
	USING sel s JOIN ins ON ins.id = s.job_id
	WHERE f.id = s.id
	RETURNING f.job_id, f.workflow_id, f.queue, f.type
)
SELECT 'r', job_id, workflow_id, queue, type FROM del
UNION ALL
SELECT 'm', count(*), 0, '', '' FROM sel`

// depCancelled tells, as a per-row index probe the planner cannot turn
// into a join, whether the task of workflow $1 whose idx is col was
// cancelled because of a dependency (NULL, false, when there is none).
func depCancelled(col string) string {
	return `(SELECT c.state = 'cancelled' AND c.cancel_cause = 'dep' FROM {schema}.workflow_tasks c
	        WHERE c.workflow_id = $1 AND c.idx = ` + col + `)`
}

// The restore statements walk the graph from edges, by index, through
// LATERAL subqueries and per-row lookups of tasks, and update by an idx
// range and a jsonb map, as resolveTail does, for the same reason: a
// replay restoring a large fan-out crawled when the planner joined CTEs
// and workflow_tasks by nested loops (docs/performance.md).

// sqlTaskRestoreLock locks, in idx order, the failed task whose job $2
// was just replayed, the tasks its failure cancelled (reachable through
// dependants cancelled because of a dependency), their dependencies and
// their DepContinue dependants: what sqlTaskRestore reads and writes, so
// that nothing it counts changes before it commits.
//
//	$1 workflow_id bigint, $2 job_id bigint
//
// Returns (idx int, job_id bigint or NULL) per task locked; none when the
// task is not failed with that job.
var sqlTaskRestoreLock = `
WITH RECURSIVE s(idx) AS (
	SELECT idx FROM {schema}.workflow_tasks WHERE workflow_id = $1 AND job_id = $2 AND state = 'failed'
	UNION
	SELECT x.idx FROM s CROSS JOIN LATERAL (
		SELECT e.to_idx AS idx FROM {schema}.workflow_edges e
		WHERE e.workflow_id = $1 AND e.from_idx = s.idx AND ` + depCancelled("e.to_idx") + `
		OFFSET 0
	) x
),
want AS (
	SELECT idx FROM s
	UNION
	SELECT x.idx FROM s CROSS JOIN LATERAL (
		SELECT e.from_idx AS idx FROM {schema}.workflow_edges e WHERE e.workflow_id = $1 AND e.to_idx = s.idx
		UNION ALL
		SELECT e.to_idx FROM {schema}.workflow_edges e WHERE e.workflow_id = $1 AND e.from_idx = s.idx AND e.policy = 1
	) x
)
SELECT t.idx, t.job_id
FROM (SELECT idx FROM want ORDER BY idx) w
CROSS JOIN LATERAL (
	SELECT t.idx, t.job_id FROM {schema}.workflow_tasks t WHERE t.workflow_id = $1 AND t.idx = w.idx
	FOR UPDATE
) t`

// sqlTaskRestore brings back a replayed task ($2, failed) and the tasks
// its failure cancelled, S: those reachable from it through dependants
// cancelled because of a dependency. The task becomes active (its job is
// back), then each member of S, as if taken in idx order: it stays
// cancelled when a DepCancel dependency failed or was cancelled (outside
// S, or a member of S that stays cancelled: the recursive r), with a
// reason naming the first such dependency in Deps order; otherwise it
// waits for its dependencies not ended (the task, members of S that come
// back, and others waiting or active), and is released at once when none
// is left. A dependant outside S still waiting counts again each DepContinue
// dependency that comes back (the task, members of S not cancelled again):
// their end had counted it down, and their new end will.
//
//	$1 workflow_id bigint, $2 idx int
//
// Returns one row: (task restored int, members of S restored int, of them
// staying cancelled int, queues with a job released due now text[]).
var sqlTaskRestore = `
WITH RECURSIVE s(idx) AS (
	SELECT e.to_idx FROM {schema}.workflow_edges e
	WHERE e.workflow_id = $1 AND e.from_idx = $2::int AND ` + depCancelled("e.to_idx") + `
	UNION
	SELECT x.idx FROM s CROSS JOIN LATERAL (
		SELECT e.to_idx AS idx FROM {schema}.workflow_edges e
		WHERE e.workflow_id = $1 AND e.from_idx = s.idx AND ` + depCancelled("e.to_idx") + `
		OFFSET 0
	) x
),
r(idx) AS (
	SELECT x.idx FROM s CROSS JOIN LATERAL (
		SELECT e.to_idx AS idx FROM {schema}.workflow_edges e
		WHERE e.workflow_id = $1 AND e.to_idx = s.idx AND e.policy = 0 AND e.from_idx <> $2
		  AND coalesce(e.from_idx NOT IN (SELECT idx FROM s), true)
		  AND (SELECT d.state IN ('failed', 'cancelled') FROM {schema}.workflow_tasks d
		       WHERE d.workflow_id = $1 AND d.idx = e.from_idx)
		OFFSET 0
	) x
	UNION
	SELECT x.idx FROM r CROSS JOIN LATERAL (
		SELECT e.to_idx AS idx FROM {schema}.workflow_edges e
		WHERE e.workflow_id = $1 AND e.from_idx = r.idx AND e.policy = 0
		  AND coalesce(e.to_idx IN (SELECT idx FROM s), false)
		OFFSET 0
	) x
),
dstate AS (
	SELECT s.idx AS task, e.pos, e.policy, d.qname,
	       CASE WHEN e.from_idx = $2 THEN 'active'
	            WHEN coalesce(e.from_idx IN (SELECT idx FROM r), false) THEN 'cancelled'
	            WHEN coalesce(e.from_idx IN (SELECT idx FROM s), false) THEN 'waiting'
	            ELSE d.state END AS state
	FROM s
	CROSS JOIN LATERAL (
		SELECT e.from_idx, e.pos, e.policy FROM {schema}.workflow_edges e
		WHERE e.workflow_id = $1 AND e.to_idx = s.idx
		OFFSET 0
	) e
	CROSS JOIN LATERAL (
		SELECT d.state, d.qname FROM {schema}.workflow_tasks d
		WHERE d.workflow_id = $1 AND d.idx = e.from_idx
		OFFSET 0
	) d
),
cmap AS (
	SELECT min(task) AS lo, max(task) AS hi, jsonb_object_agg(task::text, jsonb_build_array(stays, waiting, reason)) AS m
	FROM (SELECT task,
	             bool_or(policy = 0 AND state IN ('failed', 'cancelled')) AS stays,
	             count(*) FILTER (WHERE state IN ('waiting', 'active')) AS waiting,
	             (array_agg('dependency ' || qname || ' ' || state ORDER BY pos)
	                 FILTER (WHERE policy = 0 AND state IN ('failed', 'cancelled')))[1] AS reason
	      FROM dstate
	      GROUP BY task) c
),
bmap AS (
	SELECT min(to_idx) AS lo, max(to_idx) AS hi, jsonb_object_agg(to_idx::text, n) AS m
	FROM (SELECT e.to_idx, count(*) AS n
	      FROM (SELECT $2::int AS idx UNION ALL SELECT idx FROM s WHERE coalesce(idx NOT IN (SELECT idx FROM r), true)) x
	      CROSS JOIN LATERAL (
	          SELECT e.to_idx FROM {schema}.workflow_edges e
	          WHERE e.workflow_id = $1 AND e.from_idx = x.idx AND e.policy = 1
	          OFFSET 0
	      ) e
	      WHERE coalesce(e.to_idx NOT IN (SELECT idx FROM s), true)
	      GROUP BY e.to_idx) b
),
tt AS (
	UPDATE {schema}.workflow_tasks t
	SET state = 'active', reason = NULL, cancel_cause = NULL, finished_at = NULL
	WHERE t.workflow_id = $1 AND t.idx = $2 AND t.state = 'failed'
	RETURNING 1
),
bump AS (
	UPDATE {schema}.workflow_tasks t
	SET waiting = t.waiting + ((SELECT m FROM bmap) ->> t.idx::text)::int
	WHERE t.workflow_id = $1 AND t.idx BETWEEN (SELECT lo FROM bmap) AND (SELECT hi FROM bmap)
	  AND jsonb_exists((SELECT m FROM bmap), t.idx::text) AND t.state = 'waiting'
),
upd AS (
	UPDATE {schema}.workflow_tasks t
	SET state = CASE WHEN ` + restStays + ` THEN 'cancelled' WHEN ` + restWaiting + ` <= 0 THEN 'active' ELSE 'waiting' END,
	    waiting = ` + restWaiting + `,
	    reason = CASE WHEN ` + restStays + ` THEN ` + restReason + ` END,
	    cancel_cause = CASE WHEN ` + restStays + ` THEN 'dep' END,
	    finished_at = CASE WHEN ` + restStays + ` THEN t.finished_at END,
	    job_id = CASE WHEN NOT ` + restStays + ` AND ` + restWaiting + ` <= 0 THEN nextval('{schema}.jobs_id_seq') END
	WHERE t.workflow_id = $1 AND t.idx BETWEEN (SELECT lo FROM cmap) AND (SELECT hi FROM cmap)
	  AND jsonb_exists((SELECT m FROM cmap), t.idx::text) AND t.state = 'cancelled' AND t.cancel_cause = 'dep'
	RETURNING t.*
),
ins AS (
	` + releaseInsert("upd") + `
)
SELECT (SELECT count(*) FROM tt)::int, (SELECT count(*) FROM upd)::int,
       (SELECT count(*) FROM upd WHERE state = 'cancelled')::int,
       ARRAY(SELECT DISTINCT queue FROM ins WHERE available_at <= now())::text[]`

// restStays, restWaiting and restReason read, in sqlTaskRestore's UPDATE
// of a member t of S, what cmap computed for it.
const (
	restStays   = `((SELECT m FROM cmap) -> t.idx::text ->> 0)::bool`
	restWaiting = `((SELECT m FROM cmap) -> t.idx::text ->> 1)::int`
	restReason  = `((SELECT m FROM cmap) -> t.idx::text ->> 2)`
)

// sqlTaskRestoreWorkflow returns a workflow to running with $2 more tasks
// unfinished (and as many fewer failed), unless it was cancelled.
//
//	$1 workflow_id bigint, $2 tasks back int
//
// Returns one row when the workflow is not cancelled, none otherwise.
const sqlTaskRestoreWorkflow = `
UPDATE {schema}.workflows
SET state = 'running', finished_at = NULL,
    unfinished = unfinished + $2, failed_tasks = greatest(failed_tasks - $2, 0)
WHERE id = $1 AND state <> 'cancelled'
RETURNING 1`

// wfQueries holds the statements of this file with the schema and channel
// filled in.
type wfQueries struct {
	insert, insertNotify                   string
	lockEnds                               string
	end, endNotify, cascade, cascadeNotify string
	settle, expired, replay                string
	restoreLock, restore, restoreWorkflow  string
	state, cancelJobs, cancelTasks, lock   string
	cancelEnd                              string
	get, edges, list, deps, stats, check   string
	prune                                  string
}

// wfCache keeps each schema's wfQueries: built once, on the first use of
// a workflow statement by any Backend on that schema.
var wfCache sync.Map // schema -> *wfQueries

// wq returns the workflow statements of b's schema.
func (b *Backend) wq() *wfQueries {
	if q, ok := wfCache.Load(b.opts.Schema); ok {
		return q.(*wfQueries)
	}
	q, _ := wfCache.LoadOrStore(b.opts.Schema, newWfQueries(b.opts.Schema))
	return q.(*wfQueries)
}

func newWfQueries(schema string) *wfQueries {
	r := strings.NewReplacer(
		"{schema}", quoteIdent(schema),
		"{channel}", "'"+channelName(schema)+"'",
	)
	return &wfQueries{
		insert:          r.Replace(sqlWorkflowInsert(false)),
		insertNotify:    r.Replace(sqlWorkflowInsert(true)),
		lockEnds:        r.Replace(sqlTaskLock),
		end:             r.Replace(sqlTaskEnd(false)),
		endNotify:       r.Replace(sqlTaskEnd(true)),
		cascade:         r.Replace(sqlTaskCascade(false)),
		cascadeNotify:   r.Replace(sqlTaskCascade(true)),
		settle:          r.Replace(sqlTaskSettle),
		expired:         r.Replace(sqlTaskExpired),
		replay:          r.Replace(sqlTaskReplay),
		restoreLock:     r.Replace(sqlTaskRestoreLock),
		restore:         r.Replace(sqlTaskRestore),
		restoreWorkflow: r.Replace(sqlTaskRestoreWorkflow),
		state:           r.Replace(sqlWorkflowState),
		cancelJobs:      r.Replace(sqlWorkflowCancelJobs),
		cancelTasks:     r.Replace(sqlWorkflowCancelTasks),
		lock:            r.Replace(sqlWorkflowLock),
		cancelEnd:       r.Replace(sqlWorkflowCancelEnd),
		get:             r.Replace(sqlWorkflowGet),
		edges:           r.Replace(sqlWorkflowEdges),
		list:            r.Replace(sqlWorkflowList),
		deps:            r.Replace(sqlWorkflowDeps),
		stats:           r.Replace(sqlWorkflowStats),
		check:           r.Replace(sqlWorkflowCheck),
		prune:           r.Replace(sqlWorkflowPrune),
	}
}
