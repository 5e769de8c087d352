package postgres

import (
	"fmt"
	"strings"

	"github.com/jobq/jobq/backend"
)

// The statements of cancelling and of keeping finished jobs (see
// queries.go for the conventions).

// finishedColumns is the column list scanFinished reads; its result is
// sqlFinishedList's $9 (no result unless asked).
const finishedColumns = `id, state, queue, type, payload, attempts, max_attempts, priority,
	last_error, unique_key, metadata, created_at, finished_at, key, halt_head,
	CASE WHEN $9::boolean THEN result END`

// finishInsert copies the rows a CTE named src returned (jobs columns)
// into finished_jobs as state; it returns (id, attempts). finished_jobs
// keeps no claim token: nothing leaves it for jobs again.
func finishInsert(src, state string) string {
	return finishInsertResult(src, state, "NULL")
}

// finishInsertResult is finishInsert storing the SQL expression result
// (json, over src's columns) as each row's result.
func finishInsertResult(src, state, result string) string {
	return finishInsertHeld(src, state, result, "NULL")
}

// finishInsertHeld is finishInsertResult storing the SQL expression held
// (boolean, over src's columns) as each row's unique_held: whether the
// row holds its unique key (migrations/019_unique_completed.sql).
func finishInsertHeld(src, state, result, held string) string {
	return `INSERT INTO {schema}.finished_jobs
	       (id, state, queue, type, payload, attempts, max_attempts, priority, last_error, unique_key, metadata, created_at, finished_at, key, result, unique_held)
	SELECT id, '` + state + `', queue, type, payload, attempts, max_attempts, priority, last_error, unique_key, metadata, created_at, now(), key, ` + result + `, ` + held + `
	FROM ` + src + `
	RETURNING id, attempts`
}

// keepsCompleted is true, over a deleted jobs row, when the job keeps its
// unique key as it completes and is kept (backend.UniqueCompleted): its
// set holds the state and the key is still its own (no insert took it
// over, which sets unique_key to NULL); NULL otherwise, as the rows that
// hold nothing have it.
var keepsCompleted = fmt.Sprintf("CASE WHEN unique_key IS NOT NULL AND unique_states & %d <> 0 THEN true END", int(backend.UniqueCompleted))

// sqlCompleteKeep is sqlComplete with one more kind, 4: done and kept,
// the held job moved to finished_jobs as completed with its result (and
// its unique key, when it keeps it: keepsCompleted), and one more
// parameter, $8 result text[] (JSON; NULL: none), so the result
// is written by the completion's own statement behind its fence. Used
// only for batches holding such an outcome, so sqlComplete itself is
// unchanged. The kept outcomes count as applied by the rows kept deleted
// (finished_jobs has no token to return); kept_moved, a data-modifying
// CTE, runs whether or not it is read.
var sqlCompleteKeep = mustReplace(mustReplace(mustReplace(sqlComplete,
	"$7::text[])\n\t       AS t(id, token, kind, delay_us, error, took_us, worker)",
	"$7::text[], $8::text[])\n\t       AS t(id, token, kind, delay_us, error, took_us, worker, result)"),
	"settled AS (", `kept AS (
	DELETE FROM {schema}.jobs j USING input i
	WHERE i.kind = 4 AND j.id = i.id AND j.claim_token = i.token AND j.status = 'reserved'
	  AND j.workflow_id IS NULL -- a task's job ends with its task: settleTasks (workflow_end.go)
	RETURNING j.*, i.result AS kept_result
),
kept_moved AS (
	`+finishInsertHeld("kept", "completed", "kept_result::json", keepsCompleted)+`
),
settled AS (`),
	"UNION ALL SELECT job_id, claim_token FROM moved", "UNION ALL SELECT job_id, claim_token FROM moved\n\tUNION ALL SELECT id, claim_token FROM kept")

// kindDoneKeep is sqlCompleteKeep's code of a kept done outcome.
const kindDoneKeep = 4

func mustReplace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(fmt.Sprintf("postgres: statement lacks %q", old))
	}
	return strings.Replace(s, old, new, 1)
}

// sqlFinishCancelled ends cancelling claims as cancelled: a holder's
// write the fence refused. Only the holder of the cancelled claim (its
// token) ends the job: an earlier holder's write stays stale.
//
//	$1 id bigint[], $2 token bigint[]
//
// Returns (id, claim_token, false) of each claim it ended. kept, a
// data-modifying CTE, runs whether or not it is read. A task's job is
// left alone: its claim, when still held (reserved or cancelling) under
// that token, is returned as (id, claim_token, true) for settleTasks
// (workflow_end.go), which ends the job with its task.
var sqlFinishCancelled = `
WITH r AS (
	SELECT DISTINCT * FROM unnest($1::bigint[], $2::bigint[]) AS t(id, token)
),
moved AS (
	DELETE FROM {schema}.jobs j USING r
	WHERE j.id = r.id AND j.claim_token = r.token AND j.status = 'cancelling' AND j.workflow_id IS NULL
	RETURNING j.*
),
kept AS (
	` + finishInsert("moved", "cancelled") + `
)
SELECT id, claim_token, false FROM moved
UNION ALL
SELECT j.id, j.claim_token, true FROM {schema}.jobs j JOIN r ON j.id = r.id AND j.claim_token = r.token
WHERE j.workflow_id IS NOT NULL AND j.status IN ('reserved', 'cancelling')`

// sqlSweepCancelled ends up to $1 cancelling jobs whose lease expired (the
// holder never reported) as cancelled; SKIP LOCKED shares the work between
// sweepers.
//
//	$1 limit int
//
// Returns one row: the number ended, and whether expired claims of tasks'
// jobs wait for sweepTasks (workflow_end.go): this statement and sqlSweep
// leave those to it, which ends each job with its task in one transaction.
var sqlSweepCancelled = `
WITH expired AS MATERIALIZED (
	SELECT id FROM {schema}.jobs
	WHERE status = 'cancelling' AND lease_until < now() AND workflow_id IS NULL
	ORDER BY lease_until
	LIMIT $1
	FOR UPDATE SKIP LOCKED
),
moved AS (
	DELETE FROM {schema}.jobs j USING expired e
	WHERE j.id = e.id
	RETURNING j.*
),
kept AS (
	` + finishInsert("moved", "cancelled") + `
)
SELECT count(*),
       EXISTS (SELECT 1 FROM {schema}.jobs WHERE lease_until < now() AND workflow_id IS NOT NULL
               AND (status = 'cancelling' OR status = 'reserved' AND attempts >= max_attempts))
FROM kept`

// sqlCancel cancels the listed jobs: pending ones move to finished_jobs
// as cancelled, reserved ones become cancelling.
//
//	$1 ids bigint[]
//
// Returns (id bigint, outcome int, attempts int, workflow_id bigint) per
// distinct id: outcome is backend.CancelOutcome's value (1 cancelled, 2
// requested, 3 already, 4 completed, 5 failed, 6 not found); workflow_id,
// set for a task's job this statement cancelled, tells JobCancel to end the
// task in the same transaction. The live rows are locked first, so
// a concurrent claim or completion is waited for and seen.
var sqlCancel = `
WITH ids AS (
	SELECT DISTINCT unnest($1::bigint[]) AS id
),
live AS MATERIALIZED (
	SELECT j.id, j.status, j.attempts FROM {schema}.jobs j JOIN ids USING (id)
	FOR UPDATE OF j
),
moved AS (
	DELETE FROM {schema}.jobs j USING live l
	WHERE j.id = l.id AND l.status = 'pending'
	RETURNING j.*
),
kept AS (
	` + finishInsert("moved", "cancelled") + `
),
requested AS (
	UPDATE {schema}.jobs j SET status = 'cancelling'
	FROM live l
	WHERE j.id = l.id AND l.status = 'reserved'
	RETURNING j.id
)
SELECT i.id,
       CASE WHEN l.status = 'pending' THEN 1
            WHEN l.status = 'reserved' THEN 2
            WHEN l.status = 'cancelling' THEN 3
            WHEN f.state = 'cancelled' THEN 3
            WHEN f.state = 'completed' THEN 4
            WHEN EXISTS (SELECT 1 FROM {schema}.failed_jobs x WHERE x.job_id = i.id) THEN 5
            ELSE 6 END,
       coalesce(l.attempts, f.attempts, 0), m.workflow_id
FROM ids i
LEFT JOIN live l ON l.id = i.id
LEFT JOIN moved m ON m.id = i.id
LEFT JOIN {schema}.finished_jobs f ON f.id = i.id`

// sqlCancelling lists the cancelling claims (jobs_cancelling_idx).
//
// Returns (id bigint, attempts int, claim_token bigint) per job.
const sqlCancelling = `SELECT id, attempts, claim_token FROM {schema}.jobs WHERE status = 'cancelling'`

// sqlFinishedList pages through finished jobs of one state, newest first.
//
//	$1 state text, $2 queue text (NULL: any), $3 type text (NULL: any),
//	$4 since timestamptz (NULL: any), $5 until timestamptz (NULL: any),
//	$6 before_id bigint (NULL: no bound), $7 limit int,
//	$8 key text (NULL: any key or none), $9 results boolean (read each
//	job's result; false: NULL, so a list never fetches them)
//
// Returns up to $7 rows (finishedColumns) by id descending.
const sqlFinishedList = `
SELECT ` + finishedColumns + ` FROM {schema}.finished_jobs f
WHERE f.state = $1
  AND ($2::text IS NULL OR f.queue = $2)
  AND ($3::text IS NULL OR f.type = $3)
  AND ($4::timestamptz IS NULL OR f.finished_at >= $4)
  AND ($5::timestamptz IS NULL OR f.finished_at < $5)
  AND ($6::bigint IS NULL OR f.id < $6)
  AND ($8::text IS NULL OR f.key = $8)
ORDER BY f.id DESC
LIMIT $7`

// sqlJobList pages through live jobs of one state, newest first. The
// listed time is available_at for pending and scheduled jobs, reserved_at
// for reserved ones.
//
//	$1 state text ('pending', 'scheduled' or 'reserved'), $2..$8 as
//	sqlFinishedList
//
// Returns up to $7 rows (jobColumns) by id descending.
const sqlJobList = `
SELECT ` + jobColumns + ` FROM {schema}.jobs j
WHERE CASE $1::text
        WHEN 'pending' THEN j.status = 'pending' AND j.available_at <= now()
        WHEN 'scheduled' THEN j.status = 'pending' AND j.available_at > now()
        ELSE j.status IN ('reserved', 'cancelling') END
  AND ($2::text IS NULL OR j.queue = $2)
  AND ($3::text IS NULL OR j.type = $3)
  AND ($4::timestamptz IS NULL OR CASE WHEN $1 = 'reserved' THEN j.reserved_at ELSE j.available_at END >= $4)
  AND ($5::timestamptz IS NULL OR CASE WHEN $1 = 'reserved' THEN j.reserved_at ELSE j.available_at END < $5)
  AND ($6::bigint IS NULL OR j.id < $6)
  AND ($8::text IS NULL OR j.key = $8)
ORDER BY j.id DESC
LIMIT $7`

// sqlFinishedPrune deletes up to $3 finished jobs of state $1 that
// finished more than $2 microseconds ago by the database clock.
//
//	$1 state text, $2 older_than_us bigint, $3 limit int
//
// Returns the command tag; its row count is the number deleted.
const sqlFinishedPrune = `
WITH sel AS (
	SELECT id FROM {schema}.finished_jobs
	WHERE state = $1 AND finished_at < now() - $2::bigint * interval '1 microsecond'
	LIMIT $3
)
DELETE FROM {schema}.finished_jobs f USING sel WHERE f.id = sel.id`

// finishedPruneOf frames the prunes of some job types by their own age:
// up to $3 finished jobs of state $1 that finished more than $2
// microseconds ago by the database clock, at or after $5, and whose type
// matches $4 as the term after it says, the oldest first.
//
//	$1 state text, $2 older_than_us bigint, $3 limit int, $4 types
//	text[], $5 from timestamptz
//
// Returns one row: how many it deleted and the latest finished_at of
// them (NULL for none), the $5 of the next chunk. With no index on type
// the finished_at index is walked and the other types' rows are skipped:
// the $5 of each chunk after the first starts past the rows the one
// before skipped, so a prune reads them once, not once per chunk.
const (
	finishedPruneOf = `
WITH sel AS (
	SELECT id FROM {schema}.finished_jobs
	WHERE state = $1 AND finished_at < now() - $2::bigint * interval '1 microsecond'
	  AND finished_at >= $5::timestamptz AND `
	finishedPruneOfEnd = `
	ORDER BY finished_at
	LIMIT $3
), del AS (
	DELETE FROM {schema}.finished_jobs f USING sel WHERE f.id = sel.id RETURNING f.finished_at
)
SELECT count(*), max(finished_at) FROM del`
)

// sqlFinishedPruneTypes: as finishedPruneOf, the jobs of the types in $4.
const sqlFinishedPruneTypes = finishedPruneOf + `type = ANY($4::text[])` + finishedPruneOfEnd

// sqlFinishedPruneExcept: as finishedPruneOf, the jobs of every type but
// those in $4.
const sqlFinishedPruneExcept = finishedPruneOf + `type <> ALL($4::text[])` + finishedPruneOfEnd

// sqlPruneTurn takes the 'prune' turn for $1 until $2 microseconds from
// now, when nobody holds it, $1 does, or its time ran out.
//
//	$1 holder text, $2 ttl_us bigint
//
// Returns the command tag: 1 row when $1 has the turn.
const sqlPruneTurn = `
INSERT INTO {schema}.jobq_turns (name, holder, until)
VALUES ('prune', $1, now() + $2::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
WHERE jobq_turns.holder = excluded.holder OR jobq_turns.until <= now()`

// retQueries holds the statements of this file with the schema filled in.
type retQueries struct {
	completeKeep, finishCancelled, sweepCancelled, cancel, cancelling string
	finishedList, jobList, finishedPrune, pruneTurn                   string
	finishedPruneTypes, finishedPruneExcept                           string
	uniqueRecheck, uniqueHeld                                         string // unique_completed.go
}

func newRetQueries(schema string) retQueries {
	r := strings.NewReplacer("{schema}", quoteIdent(schema))
	return retQueries{
		completeKeep:        r.Replace(sqlCompleteKeep),
		finishCancelled:     r.Replace(sqlFinishCancelled),
		sweepCancelled:      r.Replace(sqlSweepCancelled),
		cancel:              r.Replace(sqlCancel),
		cancelling:          r.Replace(sqlCancelling),
		finishedList:        r.Replace(sqlFinishedList),
		jobList:             r.Replace(sqlJobList),
		finishedPrune:       r.Replace(sqlFinishedPrune),
		finishedPruneTypes:  r.Replace(sqlFinishedPruneTypes),
		finishedPruneExcept: r.Replace(sqlFinishedPruneExcept),
		pruneTurn:           r.Replace(sqlPruneTurn),
		uniqueRecheck:       r.Replace(sqlUniqueRecheck),
		uniqueHeld:          r.Replace(sqlUniqueHeld),
	}
}
