package postgres

import (
	"strings"

	"github.com/jobq/jobq/backend"
)

// The SQL of the jobs' paths lives in this file (the workflows' in
// workflow_sql*.go, retention's in queries_retention.go, the schema's
// management in migrate.go, the migrations themselves in migrations/). Each statement is written once with placeholders filled
// in by newQueries:
//
//	{schema}         the quoted schema name ("jobq")
//	{channel}        the NOTIFY channel as a string literal ('jobq_jobq')
//	{channel_ident}  the same channel as an identifier, for LISTEN
//	{lease_expired}  backend.LeaseExpiredError as a string literal
//
// Durations travel as bigint microseconds and become intervals in SQL;
// every time that decides eligibility or a lease is now() of the database.
//
// Statements that make jobs available at once return the queues concerned
// instead of calling pg_notify themselves: NOTIFY takes a database-wide
// lock from its commit until the commit is flushed, so notifying inside
// every enqueue would serialize all enqueuers' commits. The backend sends
// the hints afterwards with sqlNotify, coalesced and without waiting for a
// flush. Only sqlInsertNotify, run in a caller's transaction whose commit
// the backend cannot see, notifies inline.
//
// Outcome kinds in sqlComplete: 1 done, 2 retry, 3 fail (see kindCode).
//
// metadata is jsonb, NULL for a job without any; it travels as JSON text
// (see encodeMetadata) and is copied by every statement that moves a job
// between jobs and failed_jobs.
//
// claim_token is the fence of every holder's write (see the backend
// package doc, "The fence"): each claim raises it by one, and the writes
// match (id, claim_token, status) rather than attempts, which a free
// release un-counts and a replay resets. It must only grow, so every
// statement that moves a job to failed_jobs copies it, and replay copies
// it back.

// jobColumns is the column list every statement returning a JobRow selects
// from the jobs row j, in the order scanJob reads it.
// The progress columns (the last three) count only while the claim that
// reported them holds the job: NULL otherwise (see 017_progress.sql).
const jobColumns = `j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority, j.status,
	j.available_at, j.reserved_at, j.lease_until, j.created_at, j.last_error, j.unique_key,
	j.releases, j.metadata, j.claim_token, j.errors, j.key, j.turn, j.deadline, ` + jobTaskColumns + `,
	CASE WHEN j.status <> 'pending' AND j.progress_token = j.claim_token THEN j.progress_percent END,
	j.progress_message, j.progress_at`

// claimedColumns is jobColumns as the claim statements return them, but
// for errors: a claim returns none (see backend.JobRow.Errors) rather than
// read a jsonb array per claim, nor progress, which a new claim has none of.
const claimedColumns = `j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority, j.status,
	j.available_at, j.reserved_at, j.lease_until, j.created_at, j.last_error, j.unique_key,
	j.releases, j.metadata, j.claim_token, NULL::jsonb, j.key, j.turn, NULL::timestamptz, ` + jobTaskColumns + `,
	NULL::smallint, NULL::text, NULL::timestamptz`

// jobTaskColumns name the workflow task of the jobs row j (NULL, NULL for a
// plain job). The CASE keeps a plain job's read to the column it already
// holds: only a task's job probes workflow_tasks_job_idx for the name.
const jobTaskColumns = `j.workflow_id, CASE WHEN j.workflow_id IS NULL THEN NULL
	ELSE (SELECT t.name FROM {schema}.workflow_tasks t WHERE t.job_id = j.id) END`

// failedColumns is the column list scanFailed reads, from the failed_jobs
// row f; the last two name its workflow task as jobTaskColumns do.
const failedColumns = `f.id, f.job_id, f.queue, f.type, f.payload, f.attempts, f.max_attempts, f.priority,
	f.error, f.unique_key, f.created_at, f.failed_at, f.metadata, f.errors, f.key, f.turn, f.workflow_id,
	CASE WHEN f.workflow_id IS NULL THEN NULL
	ELSE (SELECT t.name FROM {schema}.workflow_tasks t WHERE t.job_id = f.job_id) END`

// sqlNotify sends the wake-up hints for queues $1 after the statements that
// made their jobs available committed. The transaction commits without
// waiting for its WAL flush (synchronous_commit off, for this transaction
// only): a hint lost in a crash costs a worker one poll interval, while
// waiting would hold NOTIFY's database-wide lock for a disk flush.
//
// The payload is "<queue> <origin>": the sending Backend already woke its
// own subscribers and its listener skips hints of its own origin.
//
//	$1 queues text[], $2 origin text
//
// Returns one row: (setting text, notified bigint).
const sqlNotify = `
SELECT set_config('synchronous_commit', 'off', true),
       (SELECT count(pg_notify({channel}, q || ' ' || $2)) FROM unnest($1::text[]) AS q)`

// sqlClaim reserves up to $2 due pending jobs of the queues $1, in claim
// order: highest priority, then lowest turn (0 for a job without a key,
// see keys_sql.go), then earliest available_at (the time the job became
// due), then lowest id.
//
//	$1 queues text[], $2 max int, $3 lease_us bigint
//
// The MATERIALIZED CTE makes LIMIT and SKIP LOCKED apply before the
// update, under any plan. Each queue is read by its own ordered scan of
// jobs_claim_idx that stops after $2 rows (queue = ANY(...) would read and
// sort every pending job of the queues); with several queues up to $2 rows
// per queue are locked for the instant of the statement and the best $2
// kept. Returns the claimed rows (jobColumns), in no
// particular order; attempts already counts this try.
//
// Queues with a row in queue_settings (paused or limited) are skipped,
// the only cost of queue control to a store that does not use it:
// JobClaim claims the limited ones with sqlClaimLimited. The table, a few
// rows, is read once per claim into an array (an InitPlan); a NOT EXISTS
// probe per queue name, under the claim plan's enable_seqscan=off, cost
// measurable Postgres drain throughput (jobq bench --workload drain,
// interleaved runs; docs/performance.md).
//
// Each claim raises the job's claim_token, the fence of its holder's
// writes. The claim commits synchronously on purpose: a claim lost in a
// server crash after its reply reached the worker would let the next
// claim of the job hand out the same token again, and the fence could no
// longer tell the two holders apart.
const sqlClaim = `
WITH picked AS MATERIALIZED (
	SELECT c.id
	FROM (SELECT u.name FROM unnest($1::text[]) AS u(name)
	      WHERE u.name <> ALL (ARRAY(SELECT queue FROM {schema}.queue_settings))) AS q(name)
	CROSS JOIN LATERAL (
		SELECT id, priority, turn, available_at FROM {schema}.jobs
		WHERE status = 'pending' AND queue = q.name AND available_at <= now()
		  AND (deadline IS NULL OR deadline >= now())
		ORDER BY priority DESC, turn, available_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) c
	ORDER BY c.priority DESC, c.turn, c.available_at, c.id
	LIMIT $2
)
UPDATE {schema}.jobs j
SET status = 'reserved',
    attempts = j.attempts + 1,
    claim_token = j.claim_token + 1,
    reserved_at = now(),
    lease_until = now() + $3::bigint * interval '1 microsecond'
FROM picked
WHERE j.id = picked.id
RETURNING ` + claimedColumns

// sqlClaimPlan runs just before sqlClaim, in the same implicit
// transaction (one pgx batch), and rules out the plans that read every
// pending job of a queue for each claim. The planner costs the claim by the
// table's statistics, and a queue table's statistics are usually wrong: taken
// while the table held nothing pending, they predict a row or two, and the
// planner then prefers a bitmap scan of the queue's whole slice of
// jobs_claim_idx followed by a sort, whose time grows with the jobs queued
// where the ordered scan's does not (docs/performance.md). With bitmap and
// sequential scans off, the ordered scan of jobs_claim_idx, which stops
// after $2 rows, is the cheapest plan whatever the statistics say.
// set_config(..., true) lasts until that transaction ends, so the pool's
// other statements (and the application's transactions on it) plan as
// usual. No parameters; returns one row.
//
// Its third column names every limited (and not paused) queue: JobClaim
// claims those of them it serves with sqlClaimLimited, or sqlClaimKeyed for
// those of the fourth column, the ones with key rules. The lists cover
// the whole table, a few rows, so the statement needs no parameter.
const sqlClaimPlan = `
SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true),
       ARRAY(SELECT queue FROM {schema}.queue_settings
             WHERE NOT paused AND (concurrency > 0 OR rate_limit > 0 OR key_limit > 0 OR key_ordered)),
       ARRAY(SELECT queue FROM {schema}.queue_settings WHERE NOT paused AND (key_limit > 0 OR key_ordered))`

// sqlComplete applies a batch of outcomes in one statement, each fenced by
// (id, claim_token, status reserved).
//
//	$1 id bigint[], $2 token bigint[], $3 kind int[] (1 done, 2 retry, 3 fail,
//	7 defer), $4 delay_us bigint[] (retry, defer), $5 error text[] (retry, fail),
//	$6 duration_us bigint[], $7 worker text[] (retry, fail: the attempt's
//	entry in errors, see appendErrors)
//
// Done rows are deleted; retried rows go back to pending at now() + delay,
// deferred ones too, with the attempt un-counted and last_error kept;
// failed rows are deleted and inserted into failed_jobs (token and all) by
// the same statement, so a job is never in both tables nor in neither. The
// input must not repeat an (id, token). The jobs of workflow tasks that
// an outcome ends (done or fail), and those whose cancel was requested,
// are left alone but named: they end with their tasks (settleTasks,
// workflow_end.go), which then needs no statement to find them. Only the
// outcomes that did not apply are looked up for that, so a batch of plain
// jobs reads no row more. Returns one row: (ids bigint[], tokens bigint[],
// queues text[], task ids bigint[], task tokens bigint[]): the outcomes
// that applied, the queues that got a retry due at once, and the held
// claims of tasks left to settleTasks.
var sqlComplete = `
WITH input AS MATERIALIZED (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::bigint[], $7::text[])
	       AS t(id, token, kind, delay_us, error, took_us, worker)
),
done AS (
	DELETE FROM {schema}.jobs j USING input i
	WHERE i.kind = 1 AND j.id = i.id AND j.claim_token = i.token AND j.status = 'reserved'
	  AND j.workflow_id IS NULL -- a task's job ends with its task: settleTasks (workflow_end.go)
	RETURNING j.id, j.claim_token
),
retried AS (
	UPDATE {schema}.jobs j
	SET status = 'pending',
	    available_at = now() + i.delay_us * interval '1 microsecond',
	    reserved_at = NULL,
	    lease_until = NULL,
	    attempts = CASE WHEN i.kind = 7 THEN j.attempts - 1 ELSE j.attempts END,
	    last_error = CASE WHEN i.kind = 7 THEN j.last_error ELSE i.error END,
	    errors = CASE WHEN i.kind = 7 THEN j.errors ELSE ` + appendErrors("j", "i.error", "i.took_us", "i.worker") + ` END
	FROM input i
	WHERE i.kind IN (2, 7) AND j.id = i.id AND j.claim_token = i.token AND j.status = 'reserved'
	RETURNING j.id, j.claim_token, j.queue, i.delay_us
),
failed AS (
	DELETE FROM {schema}.jobs j USING input i
	WHERE i.kind = 3 AND j.id = i.id AND j.claim_token = i.token AND j.status = 'reserved' AND j.workflow_id IS NULL
	RETURNING j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority,
	          i.error, j.unique_key, j.created_at, j.metadata, j.claim_token, j.key, j.turn,
	          ` + appendErrors("j", "i.error", "i.took_us", "i.worker") + ` AS errors
),
moved AS (
	INSERT INTO {schema}.failed_jobs
	       (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, errors, key, turn)
	SELECT id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, now(), metadata, claim_token, errors, key, turn
	FROM failed
	RETURNING job_id, claim_token
),
settled AS (
	SELECT id, claim_token FROM done
	UNION ALL SELECT id, claim_token FROM retried
	UNION ALL SELECT job_id, claim_token FROM moved
),
tasks AS (
	SELECT j.id, j.claim_token
	FROM (SELECT * FROM input i
	      WHERE NOT EXISTS (SELECT 1 FROM settled s WHERE s.id = i.id AND s.claim_token = i.token)) i
	JOIN {schema}.jobs j ON j.id = i.id AND j.claim_token = i.token
	WHERE j.workflow_id IS NOT NULL
	  AND (j.status = 'cancelling' OR j.status = 'reserved' AND i.kind IN (1, 3, 4))
)
SELECT ARRAY(SELECT id FROM settled)::bigint[],
       ARRAY(SELECT claim_token FROM settled)::bigint[],
       ARRAY(SELECT DISTINCT queue FROM retried WHERE delay_us <= 0)::text[],
       ARRAY(SELECT id FROM tasks)::bigint[],
       ARRAY(SELECT claim_token FROM tasks)::bigint[]`

// sqlCompleteOne deletes one held job: the handler's own completion inside
// its own transaction.
//
//	$1 id bigint, $2 token bigint
//
// Returns (workflow_id) when the claim was still held (NULL for a job that
// is no task's), no row when the fence failed.
const sqlCompleteOne = `
DELETE FROM {schema}.jobs
WHERE id = $1 AND claim_token = $2 AND status = 'reserved'
RETURNING workflow_id -- a task's job: JobCompleteTx ends the task in the same transaction`

// sqlExtendLease moves lease_until of held jobs to now() + $3.
//
//	$1 id bigint[], $2 token bigint[], $3 lease_us bigint
//
// Returns (id, claim_token) of each job whose lease was extended; the
// others were lost. Sent twice, it only moves the lease again.
const sqlExtendLease = `
UPDATE {schema}.jobs j
SET lease_until = now() + $3::bigint * interval '1 microsecond'
FROM unnest($1::bigint[], $2::bigint[]) AS r(id, token)
WHERE j.id = r.id AND j.claim_token = r.token AND j.status = 'reserved'
RETURNING j.id, j.claim_token`

// sqlProgress records a holder's progress, fenced like sqlExtendLease.
//
//	$1 id, $2 token, $3 percent, $4 message
//
// Returns the job's id when it was written; no row means the claim no
// longer holds the job.
const sqlProgress = `
UPDATE {schema}.jobs
SET progress_token = claim_token, progress_percent = $3, progress_message = $4, progress_at = now()
WHERE id = $1 AND claim_token = $2 AND status = 'reserved'
RETURNING id`

// sqlRelease gives held jobs back (see backend.Backend.JobRelease). A job
// released fewer than $3 times before goes back to pending, due now, with
// the interrupted attempt un-counted; after that the release counts the
// attempt: back to pending with last_error $4 while attempts remain,
// otherwise moved to failed_jobs with error $4. Every release adds one to
// releases.
//
//	$1 id bigint[], $2 token bigint[], $3 free releases int, $4 error text
//
// Returns one row: (ids bigint[], tokens bigint[], queues text[]), the
// refs that still matched (IDs and tokens, pairwise) and the queues that
// got a job back. The release ends the claim, so the same refs sent again
// match nothing.
var sqlRelease = `
WITH ref AS (
	SELECT DISTINCT * FROM unnest($1::bigint[], $2::bigint[]) AS t(id, token)
),
released AS (
	UPDATE {schema}.jobs j
	SET status = 'pending',
	    attempts = CASE WHEN j.releases < $3 THEN j.attempts - 1 ELSE j.attempts END,
	    last_error = CASE WHEN j.releases < $3 THEN j.last_error ELSE $4 END,
	    errors = CASE WHEN j.releases < $3 THEN j.errors ELSE ` + appendErrors("j", "$4::text", "0::bigint", "''::text") + ` END,
	    releases = j.releases + 1,
	    available_at = now(),
	    reserved_at = NULL,
	    lease_until = NULL
	FROM ref r
	WHERE j.id = r.id AND j.claim_token = r.token AND j.status = 'reserved'
	  AND (j.releases < $3 OR j.attempts < j.max_attempts)
	RETURNING j.id, r.token, j.queue
),
dead AS (
	DELETE FROM {schema}.jobs j USING ref r
	WHERE j.id = r.id AND j.claim_token = r.token AND j.status = 'reserved'
	  AND j.releases >= $3 AND j.attempts >= j.max_attempts AND j.workflow_id IS NULL -- tasks: settleTasks
	RETURNING j.id, r.token, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority,
	          j.unique_key, j.created_at, j.metadata, j.claim_token, j.key, j.turn,
	          ` + appendErrors("j", "$4::text", "0::bigint", "''::text") + ` AS errors
),
moved AS (
	INSERT INTO {schema}.failed_jobs
	       (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, errors, key, turn)
	SELECT id, queue, type, payload, attempts, max_attempts, priority, $4, unique_key, created_at, now(), metadata, claim_token, errors, key, turn
	FROM dead
	RETURNING 1
),
matched AS (
	SELECT id, token FROM released UNION ALL SELECT id, token FROM dead
)
SELECT ARRAY(SELECT id FROM matched ORDER BY id, token)::bigint[],
       ARRAY(SELECT token FROM matched ORDER BY id, token)::bigint[],
       ARRAY(SELECT DISTINCT queue FROM released)::text[]`

// sqlSweep handles up to $1 reserved jobs whose lease expired: those with
// attempts left go back to pending, due now; the others move to
// failed_jobs with the error backend.LeaseExpiredError. SKIP LOCKED lets concurrent
// sweepers (one per worker process) share the work.
//
//	$1 limit int
//
// Returns one row per job moved: (id bigint, attempts int, claim_token
// bigint, queue text, type text, failed bool), the claim whose lease
// expired.
var sqlSweep = `
WITH expired AS MATERIALIZED (
	SELECT id FROM {schema}.jobs
	WHERE status = 'reserved' AND lease_until < now() AND (workflow_id IS NULL OR attempts < max_attempts) -- see sweepTasks
	ORDER BY lease_until
	LIMIT $1
	FOR UPDATE SKIP LOCKED
),
rescued AS (
	UPDATE {schema}.jobs j
	SET status = 'pending',
	    available_at = now(),
	    reserved_at = NULL,
	    lease_until = NULL,
	    last_error = {lease_expired},
	    errors = ` + appendErrors("j", "{lease_expired}::text", "0::bigint", "''::text") + `
	FROM expired e
	WHERE j.id = e.id AND j.attempts < j.max_attempts
	RETURNING j.id, j.attempts, j.claim_token, j.queue, j.type
),
dead AS (
	DELETE FROM {schema}.jobs j USING expired e
	WHERE j.id = e.id AND j.attempts >= j.max_attempts
	RETURNING j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority,
	          j.unique_key, j.created_at, j.metadata, j.claim_token, j.key, j.turn,
	          ` + appendErrors("j", "{lease_expired}::text", "0::bigint", "''::text") + ` AS errors
),
moved AS (
	INSERT INTO {schema}.failed_jobs
	       (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, errors, key, turn)
	SELECT id, queue, type, payload, attempts, max_attempts, priority, {lease_expired}, unique_key, created_at, now(), metadata, claim_token, errors, key, turn
	FROM dead
	RETURNING job_id, attempts, claim_token, queue, type
)
SELECT id, attempts, claim_token, queue, type, false FROM rescued
UNION ALL
SELECT job_id, attempts, claim_token, queue, type, true FROM moved`

// sqlExpire moves up to $1 pending jobs whose deadline has passed to
// failed_jobs, as they are (attempts and errors unchanged: no attempt
// was made), with backend.DeadlineError as their error, the text built
// here as Go builds it (RFC 3339, UTC, whole seconds). It finds them
// through jobs_deadline_idx, which holds only pending jobs with a
// deadline. Jobs with a deadline are never keyed nor a task's.
//
//	$1 limit int
//
// Returns one row per job moved: (id bigint, attempts int, claim_token
// bigint, queue text, type text).
var sqlExpire = `
WITH expired AS MATERIALIZED (
	SELECT id FROM {schema}.jobs
	WHERE status = 'pending' AND deadline IS NOT NULL AND deadline < now()
	ORDER BY deadline
	LIMIT $1
	FOR UPDATE SKIP LOCKED
),
dead AS (
	DELETE FROM {schema}.jobs j USING expired e
	WHERE j.id = e.id AND j.status = 'pending'
	RETURNING j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority,
	          j.unique_key, j.created_at, j.metadata, j.claim_token, j.key, j.turn, j.errors, j.deadline
),
moved AS (
	INSERT INTO {schema}.failed_jobs
	       (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, errors, key, turn)
	SELECT id, queue, type, payload, attempts, max_attempts, priority,
	       {deadline_prefix} || to_char(deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
	       unique_key, created_at, now(), metadata, claim_token, errors, key, turn
	FROM dead
	RETURNING job_id, attempts, claim_token, queue, type
)
SELECT job_id, attempts, claim_token, queue, type FROM moved`

// sqlSetDeadlines gives the jobs just inserted their deadlines, in the
// insert's transaction: a statement apart, so the insert statements and
// the jobs without a deadline (nearly all) pay nothing for the column.
//
//	$1 ids bigint[], $2 deadlines timestamptz[]
//
// Returns one row per job: (id bigint).
const sqlSetDeadlines = `
UPDATE {schema}.jobs j SET deadline = d.at
FROM unnest($1::bigint[], $2::timestamptz[]) AS d(id, at)
WHERE j.id = d.id
RETURNING j.id`

// sqlDeadTuples reads what the vacuumer decides on.
//
//	$1 schema name
//
// Returns one row: (dead bigint, analyzed_ago_s double precision,
// can_vacuum bool, role text) for the jobs table: its dead rows, zero
// before the statistics have seen it; the seconds since it was last
// analyzed (by anyone, autovacuum included), NULL when never; whether the
// current role may vacuum it (a role that may not gets a warning from
// VACUUM, which skips the table, rather than an error); and that role.
// The server allows the table's owner (or a member of its role, or a
// superuser), the database's owner and, from PostgreSQL 17, holders of
// MAINTAIN on the table; true while the table has no statistics row yet.
const sqlDeadTuples = `
SELECT coalesce(max(s.n_dead_tup), 0),
       extract(epoch FROM now() - max(greatest(s.last_analyze, s.last_autoanalyze)))::float8,
       coalesce(bool_or(
           pg_has_role(c.relowner, 'USAGE')
           OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
           OR CASE WHEN current_setting('server_version_num')::int >= 170000
                   THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END
       ), true),
       current_user::text
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = $1 AND s.relname = 'jobs'`

// sqlVacuumLock and sqlVacuumUnlock take and give back the session-level
// advisory lock that lets one process at a time vacuum a schema's jobs
// table (VACUUM cannot run in a transaction, so a transaction-level lock
// cannot cover it). The vacuumer runs both and the vacuum on one
// connection.
//
//	$1 lock name text
//
// Each returns one row: (ok bool), whether the lock was taken (released).
const (
	sqlVacuumLock   = `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`
	sqlVacuumUnlock = `SELECT pg_advisory_unlock(hashtextextended($1, 0))`
)

// sqlVacuum vacuums the jobs table. SKIP_LOCKED: when another process's
// vacuum is already at it, this one returns at once instead of queueing.
// No parameters, no rows; it must not run inside a transaction block.
const sqlVacuum = `VACUUM (SKIP_LOCKED) {schema}.jobs`

// sqlVacuumAnalyze is sqlVacuum that also analyzes, which the vacuumer
// does only now and then (see analyzeEvery). VACUUM alone sets the row
// count but no column statistics, and with autovacuum off the planner then
// expects two pending rows and sorts every pending job for each claim,
// a cost that grows with the backlog (docs/performance.md).
const sqlVacuumAnalyze = `VACUUM (SKIP_LOCKED, ANALYZE) {schema}.jobs`

// sqlJobGet reads one live job.
//
//	$1 id bigint
//
// Returns zero or one row (jobColumns).
const sqlJobGet = `SELECT ` + jobColumns + ` FROM {schema}.jobs j WHERE j.id = $1`

// sqlJobsInserted reads, without advancing it, the sequence that hands
// out job IDs (001_init.sql names it): how many IDs were ever taken. Until
// the first nextval, is_called is false and last_value is the start.
//
// Takes no parameters. Returns one row: (inserted bigint).
const sqlJobsInserted = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {schema}.jobs_id_seq`

// sqlQueueStats counts jobs per queue and state.
//
// Takes no parameters. Returns (queue text, pending bigint, scheduled
// bigint, reserved bigint, failed bigint, oldest_due timestamptz or NULL
// when no job is due) per queue with any job, ordered by queue name
// bytewise (COLLATE "C", as Go sorts strings).
const sqlQueueStats = `
SELECT queue, sum(pending)::bigint, sum(scheduled)::bigint, sum(reserved)::bigint, sum(failed)::bigint, min(oldest_due)
FROM (
	SELECT queue,
	       count(*) FILTER (WHERE status = 'pending' AND available_at <= now()) AS pending,
	       count(*) FILTER (WHERE status = 'pending' AND available_at > now()) AS scheduled,
	       count(*) FILTER (WHERE status IN ('reserved', 'cancelling')) AS reserved,
	       0 AS failed,
	       min(available_at) FILTER (WHERE status = 'pending' AND available_at <= now()) AS oldest_due
	FROM {schema}.jobs GROUP BY queue
	UNION ALL
	SELECT queue, 0, 0, 0, count(*), NULL FROM {schema}.failed_jobs GROUP BY queue
) s
GROUP BY queue
ORDER BY queue COLLATE "C"`

// failedFilter is the WHERE clause of a backend.FailedFilter over
// failed_jobs f, with its parameters first in every statement that uses it:
//
//	$1 queue text (NULL: any), $2 type text (NULL: any),
//	$3 failed_before timestamptz (NULL: any),
//	$4 older_than_us bigint (NULL: any): failed before now() minus this,
//	   by the database's clock
//
// and the filter's key and KeepHeld last, after the statement's own
// parameters (see failedKeyFilter).
const failedFilter = `($1::text IS NULL OR f.queue = $1)
	AND ($2::text IS NULL OR f.type = $2)
	AND ($3::timestamptz IS NULL OR f.failed_at < $3)
	AND ($4::bigint IS NULL OR f.failed_at < now() - $4::bigint * interval '1 microsecond')`

// sqlFailedList pages through failed jobs, newest first.
//
//	$1..$4 the filter (see failedFilter),
//	$5 before_id bigint (NULL: no bound), $6 limit int, $7..$8 key, keep held
//
// Returns up to $6 rows (failedColumns) by id descending.
var sqlFailedList = `
SELECT ` + failedColumns + ` FROM {schema}.failed_jobs f
WHERE ` + failedFilter + ` AND ` + failedKeyFilter(7) + `
  AND ($5::bigint IS NULL OR f.id < $5)
ORDER BY f.id DESC
LIMIT $6`

// sqlFailedGet reads the failed row of one job (through
// failed_jobs_job_id_idx; a job has at most one).
//
//	$1 job_id bigint
//
// Returns zero or one row (failedColumns).
const sqlFailedGet = `SELECT ` + failedColumns + ` FROM {schema}.failed_jobs f WHERE f.job_id = $1 ORDER BY f.id DESC LIMIT 1`

// replayTail is the common end of sqlFailedReplayIDs and
// sqlFailedReplayChunk: it moves the failed jobs in sel back to jobs as
// pending, due now, attempts and releases 0, with their original id,
// metadata, errors and claim_token (reset, the next claim would hand a holder from
// before the failure its token again); a job whose unique key (or id) is
// held by a live job, or whose unique key a completed job holds
// (finishedFree), stays in failed_jobs. It returns one row: (last_id bigint, matched bigint,
// replayed bigint, queues text[], types text[], counts bigint[]): the
// highest failed_jobs id selected (NULL when none), how many were selected
// and moved, and the moved jobs counted per queue and type (the three
// arrays side by side, NULL when none moved), then the selected jobs of
// workflow tasks (failed_jobs ids bigint[]), which it leaves to replayTasks,
// and the unique keys of the moved jobs (text[]), which the caller checks
// against completed holders the statement's snapshot missed
// (sqlUniqueHeld), in its transaction.
const replayTail = `
ins AS (
	INSERT INTO {schema}.jobs
	       (id, queue, type, payload, attempts, max_attempts, priority, status,
	        available_at, created_at, last_error, unique_key, releases, metadata, claim_token, errors, key, turn)
	SELECT job_id, queue, type, payload, 0, max_attempts, priority, 'pending',
	       now(), created_at, error, unique_key, 0, metadata, claim_token, errors, key, turn
	FROM sel WHERE workflow_id IS NULL -- a task's: replayTasks (workflow_replay.go), named below
	  AND (unique_key IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.finished_jobs h
	                                         WHERE h.unique_key = sel.unique_key AND h.unique_held))
	ORDER BY id
	ON CONFLICT DO NOTHING
	RETURNING id, unique_key
),
del AS (
	DELETE FROM {schema}.failed_jobs f
	USING sel s JOIN ins ON ins.id = s.job_id
	WHERE f.id = s.id
	RETURNING f.queue, f.type
)
SELECT (SELECT max(id) FROM sel), (SELECT count(*) FROM sel), (SELECT count(*) FROM del),
       g.queues, g.types, g.counts, ARRAY(SELECT id FROM sel WHERE workflow_id IS NOT NULL ORDER BY id),
       ARRAY(SELECT unique_key FROM ins WHERE unique_key IS NOT NULL)
FROM (SELECT array_agg(queue) AS queues, array_agg(type) AS types, array_agg(n) AS counts
      FROM (SELECT queue, type, count(*) AS n FROM del GROUP BY queue, type) c) g`

// sqlFailedReplayIDs replays the failed rows of the listed jobs (see
// replayTail), found through failed_jobs_job_id_idx.
//
//	$1 job_ids bigint[]
//
// The caller runs it in a transaction and rolls back when listed jobs had
// no failed row (matched < number of distinct ids).
const sqlFailedReplayIDs = `
WITH sel AS MATERIALIZED (
	SELECT * FROM {schema}.failed_jobs f
	WHERE f.job_id = ANY($1)
	ORDER BY f.id
	FOR UPDATE
),` + replayTail

// sqlFailedReplayChunk replays the next chunk of failed jobs matching a
// filter (see replayTail): those above the cursor $5 in id order, at most
// $6 of them. The caller moves the cursor to the returned last_id, which
// also passes over the jobs left behind for their unique key.
//
//	$1..$4 the filter (see failedFilter), $5 after_id bigint, $6 limit int,
//	$7..$8 key, keep held
var sqlFailedReplayChunk = `
WITH sel AS MATERIALIZED (
	SELECT * FROM {schema}.failed_jobs f
	WHERE ` + failedFilter + ` AND ` + failedKeyFilter(7) + `
	  AND f.id > $5
	ORDER BY f.id
	LIMIT $6
	FOR UPDATE
),` + replayTail

// sqlFailedPurgeIDs deletes the failed rows of the listed jobs (through
// failed_jobs_job_id_idx).
//
//	$1 job_ids bigint[]
//
// Returns the command tag; its row count is the number deleted.
const sqlFailedPurgeIDs = `DELETE FROM {schema}.failed_jobs WHERE job_id = ANY($1)`

// sqlFailedPurgeChunk deletes the next chunk of failed jobs matching a
// filter: those above the cursor $5 and below the bound $6 in id order, at
// most $7 of them.
//
//	$1..$4 the filter (see failedFilter), $5 after_id bigint,
//	$6 below_id bigint (NULL: no bound), $7 limit int, $8..$9 key, keep held
//
// Returns one row: (last_id bigint, matched bigint, deleted bigint), the
// highest id selected (NULL when none), how many were selected and how
// many of them this statement deleted (not a concurrent one).
var sqlFailedPurgeChunk = `
WITH sel AS MATERIALIZED (
	SELECT f.id FROM {schema}.failed_jobs f
	WHERE ` + failedFilter + ` AND ` + failedKeyFilter(8) + `
	  AND f.id > $5
	  AND ($6::bigint IS NULL OR f.id < $6)
	ORDER BY f.id
	LIMIT $7
),
del AS (
	DELETE FROM {schema}.failed_jobs f USING sel
	WHERE f.id = sel.id
	RETURNING 1
)
SELECT (SELECT max(id) FROM sel), (SELECT count(*) FROM sel), (SELECT count(*) FROM del)`

// sqlFailedKeepBound finds the oldest of the newest $5 failed jobs matching
// a filter, the lowest id a purge with KeepNewest keeps (through
// failed_jobs_queue_idx when the queue is set); everything matching below it
// goes. No row when fewer match: nothing is deleted.
//
//	$1..$4 the filter (see failedFilter), $5 keep int (>= 1), $6..$7 key,
//	keep held
//
// Returns zero or one row: (id bigint).
var sqlFailedKeepBound = `
SELECT f.id FROM {schema}.failed_jobs f
WHERE ` + failedFilter + ` AND ` + failedKeyFilter(6) + `
ORDER BY f.id DESC
OFFSET $5::int - 1
LIMIT 1`

// sqlListen subscribes the listener's connection to the channel. It takes
// no parameters (LISTEN accepts none): the channel is the quoted
// identifier {channel_ident}.
const sqlListen = `LISTEN {channel_ident}`

// queries holds the statements with the schema filled in.
type queries struct {
	insert, insertOne, insertNotify, notify, reserveIDs       string
	insertTake, insertNotifyTake                              string // withTakeover
	insertPlain, insertNotifyPlain                            string // plainInsert
	claim, claimPlan, complete, completeOne, extendLease      string
	progress                                                  string
	release, sweep                                            string
	jobGet, queueStats, deadTuples, vacuum, vacuumAnalyze     string
	vacuumLock, vacuumUnlock                                  string
	failedList, failedGet, failedReplayIDs, failedReplayChunk string
	failedPurgeIDs, failedPurgeChunk, failedKeepBound         string
	listen                                                    string
	queueLock, claimLimited, queueCounted, queuePause         string
	queueLimits, queuePrune, queueSettings                    string
	createSchema, schemaVersion, setSearchPath, recordVersion string
	jobsInserted, conflict                                    string
	expire, setDeadlines                                      string
}

// newQueries fills the placeholders for schema, which must already have
// passed validateSchema (it is quoted, but never escaped further).
func newQueries(schema string) queries {
	channel := channelName(schema)
	r := strings.NewReplacer(
		"{schema}", quoteIdent(schema),
		"{channel}", "'"+channel+"'",
		"{channel_ident}", quoteIdent(channel),
		"{lease_expired}", quoteLiteral(backend.LeaseExpiredError),
		"{deadline_prefix}", quoteLiteral(backend.DeadlineErrorPrefix),
	)
	return queries{
		insert:            r.Replace(sqlInsert),
		insertOne:         r.Replace(sqlInsertOne),
		insertNotify:      r.Replace(sqlInsertNotify),
		insertTake:        r.Replace(withTakeover(sqlInsert, 11)),
		insertNotifyTake:  r.Replace(withTakeover(sqlInsertNotify, 11)),
		insertPlain:       r.Replace(plainInsert(sqlInsert)),
		insertNotifyPlain: r.Replace(plainInsert(sqlInsertNotify)),
		conflict:          r.Replace(sqlConflict),
		notify:            r.Replace(sqlNotify),
		claim:             r.Replace(sqlClaim),
		claimPlan:         r.Replace(sqlClaimPlan),
		complete:          r.Replace(sqlComplete),
		completeOne:       r.Replace(sqlCompleteOne),
		extendLease:       r.Replace(sqlExtendLease),
		progress:          r.Replace(sqlProgress),
		release:           r.Replace(sqlRelease),
		sweep:             r.Replace(sqlSweep),
		expire:            r.Replace(sqlExpire),
		setDeadlines:      r.Replace(sqlSetDeadlines),
		jobGet:            r.Replace(sqlJobGet),
		deadTuples:        sqlDeadTuples,
		vacuumLock:        sqlVacuumLock,
		vacuumUnlock:      sqlVacuumUnlock,
		reserveIDs:        r.Replace(sqlReserveIDs),
		vacuum:            r.Replace(sqlVacuum),
		vacuumAnalyze:     r.Replace(sqlVacuumAnalyze),
		queueStats:        r.Replace(sqlQueueStats),
		jobsInserted:      r.Replace(sqlJobsInserted),
		failedList:        r.Replace(sqlFailedList),
		failedGet:         r.Replace(sqlFailedGet),
		failedReplayIDs:   r.Replace(sqlFailedReplayIDs),
		failedReplayChunk: r.Replace(sqlFailedReplayChunk),
		failedPurgeIDs:    r.Replace(sqlFailedPurgeIDs),
		failedPurgeChunk:  r.Replace(sqlFailedPurgeChunk),
		failedKeepBound:   r.Replace(sqlFailedKeepBound),
		listen:            r.Replace(sqlListen),
		queueLock:         r.Replace(sqlQueueLock),
		claimLimited:      r.Replace(sqlClaimLimited),
		queueCounted:      r.Replace(sqlQueueCounted),
		queuePause:        r.Replace(sqlQueuePause),
		queueLimits:       r.Replace(sqlQueueLimits),
		queuePrune:        r.Replace(sqlQueuePrune),
		queueSettings:     r.Replace(sqlQueueSettings),
		createSchema:      r.Replace(sqlCreateSchema),
		schemaVersion:     r.Replace(sqlSchemaVersion),
		setSearchPath:     r.Replace(sqlSetSearchPath),
		recordVersion:     r.Replace(sqlRecordVersion),
	}
}

// channelName is the NOTIFY channel of a schema. validateSchema keeps it
// within Postgres' 63-byte identifier limit.
func channelName(schema string) string { return "jobq_" + schema }

// quoteIdent quotes a validated identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes s as an SQL string literal, for a constant of the Go
// code written into a statement when it is built.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
