package sqlite

import (
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// The SQL of the jobs' paths lives in this file (the workflows' in
// workflow_queries.go, retention's in queries_retention.go, the schema in
// migrations/; stmts.go prepares them). Each carries a header naming its parameters (?N is
// the Nth argument) and what it returns. Times are INTEGER unix microseconds
// taken from the backend's clock. Statements that filter on status use the
// literal 'pending' or 'reserved' so SQLite can match the partial indexes.

// claimColumns is the column list a claim returns and rowScan reads, in
// order: every column but the three the claim sets itself (status,
// reserved_at, lease_until), whose reading back cost a claim measurably
// (docs/performance.md). claim_token is read back although the
// claim sets it: its value is the job's own (the last claim's plus one).
// The next two name the job's workflow task (NULL for a plain job, which
// the CASE keeps to the column it reads anyway: only a task's job probes
// workflow_tasks_job for its name); the last two are its key and turn.
const claimColumns = `id, queue, type, payload, attempts, max_attempts, priority,
	available_at, created_at, last_error, unique_key, releases, metadata, claim_token,
	workflow_id, CASE WHEN workflow_id IS NULL THEN NULL
		ELSE (SELECT t.name FROM workflow_tasks t WHERE t.job_id = jobs.id) END, key, turn`

// jobColumns is the column list scanJob reads, in order. The progress
// columns (the last three) count only while the claim that reported them
// holds the job: NULL otherwise (see 013_progress.sql).
const jobColumns = claimColumns + `, status, reserved_at, lease_until, cancelled_at IS NOT NULL, errors, deadline,
	CASE WHEN status = 'reserved' AND progress_token = claim_token THEN progress_percent END,
	progress_message, progress_at`

// failedColumns is the column list scanFailed reads, in order. The
// workflow_id and CASE name the failed job's workflow task as claimColumns
// do, the CASE sparing a plain job's row the probe of workflow_tasks_job;
// key and turn follow.
const failedColumns = `id, job_id, queue, type, payload, attempts, max_attempts, priority,
	error, unique_key, created_at, failed_at, metadata, errors,
	workflow_id, CASE WHEN workflow_id IS NULL THEN NULL
		ELSE (SELECT t.name FROM workflow_tasks t WHERE t.job_id = failed_jobs.job_id) END, key, turn`

// appendErrorSQL is the errors column of the row being written with one
// backend.AttemptError appended (the oldest dropped past
// backend.MaxAttemptErrors), for the attempt the row's attempts counts:
// at, took and worker are the SQL of its time (µs), duration (µs) and
// worker name, msg that of its error text. The entry's fields are those
// internal/attemptlog reads. Only the statements that record an error use
// it: a done job never reads or writes the column.
func appendErrorSQL(at, took, worker, msg string) string {
	return `json_insert(CASE WHEN json_array_length(coalesce(errors, '[]')) >= ` + strconv.Itoa(backend.MaxAttemptErrors) +
		` THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END, '$[#]', json_object('attempt', attempts, 'at_us', ` +
		at + `, 'duration_us', ` + took + `, 'worker', ` + worker + `, 'error', ` + msg + `))`
}

// --- schema bookkeeping ---

// qSchemaTableExists: no parameters. Returns one row: 1 when the jobq_schema
// table exists, else 0.
const qSchemaTableExists = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobq_schema'`

// qSchemaCreate: no parameters. Creates the version table if missing.
const qSchemaCreate = `CREATE TABLE IF NOT EXISTS jobq_schema (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL
)`

// qJobqTables: no parameters. Returns one row: how many of jobq's tables
// (jobq_schema, jobs, failed_jobs) the file holds.
const qJobqTables = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('jobq_schema', 'jobs', 'failed_jobs')`

// qSchemaVersion: no parameters. Returns one row: the highest applied
// migration version, 0 when none.
const qSchemaVersion = `SELECT COALESCE(MAX(version), 0) FROM jobq_schema`

// qSchemaRecord: ?1 version, ?2 applied_at. Records one applied migration.
const qSchemaRecord = `INSERT INTO jobq_schema (version, applied_at) VALUES (?1, ?2)`

// --- insert ---

// insertColumnsPerRow is the most parameters insertSQL or insertKeyedSQL
// binds per job.
const insertColumnsPerRow = 11

// insertSQL returns a multi-row INSERT of n pending jobs. Parameters, for
// each row in turn: queue, type, payload, max_attempts, priority,
// available_at, created_at, unique_key (NULL for none) and, when metadata
// is set, metadata (JSON text, NULL for none). Jobs without metadata, the
// common case, go through the statement without that column (it defaults
// to NULL): a ninth parameter per row cost a batch insert measurably
// (BenchmarkInsertBatch1000; docs/performance.md). Returns no
// rows; with AUTOINCREMENT under the write lock the rows get consecutive
// IDs in VALUES order, ending at the result's LastInsertId.
func insertSQL(n int, metadata bool) string {
	cols, row := `unique_key) VALUES `, `(?,?,?,?,?,'pending',?,?,?)`
	if metadata {
		cols, row = `unique_key, metadata) VALUES `, `(?,?,?,?,?,'pending',?,?,?,?)`
	}
	return multiInsert(cols, row, n)
}

// insertKeyedSQL is insertSQL for a chunk holding a keyed job: each row
// has metadata, key and turn after the unique key (NULL, NULL and 0 for a
// job without a key). Only such chunks pay for the three columns.
func insertKeyedSQL(n int) string {
	return multiInsert(`unique_key, metadata, key, turn) VALUES `, `(?,?,?,?,?,'pending',?,?,?,?,?,?)`, n)
}

// multiInsert writes the INSERT of n rows into jobs with columns cols
// after the eight every row has, each row being row.
func multiInsert(cols, row string, n int) string {
	var sb strings.Builder
	sb.Grow(128 + n*(len(row)+1))
	sb.WriteString(`INSERT INTO jobs (queue, type, payload, max_attempts, priority, status, available_at, created_at, `)
	sb.WriteString(cols)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(row)
	}
	return sb.String()
}

// qUniqueLookup: ?1 a JSON array of unique keys, ?2 whether some item
// asks KeepLast. Returns each key held by a live job with that job's ID
// and, when the holder has a set of states (unique_states is not NULL:
// every state) or ?2, what judges whether it keeps a new job of the key
// out (backend.UniqueStates.Keeps): its set, whether it is reserved, its
// attempts and its due time, as one text ("set reserved attempts due",
// see parseHolder), then 0. A holder in every state keeps every item not
// asking KeepLast out whatever its state: the common case scans no more
// than NULL. Each key a completed job holds (backend.UniqueCompleted)
// comes with that job's ID, NULL and 1, from the second arm: a probe of
// finished_jobs_unique_held per key, which holds only such jobs, after a
// first step into that index that finds it empty (nearly always: no
// set asks for the state) and skips the arm, the keys' list included,
// whose build and probes would cost the lookup half as much again; the
// CROSS JOIN keeps that step in the outer loop. One statement for a whole
// batch, since a statement costs more than the index probes it makes.
const qUniqueLookup = `SELECT unique_key, id,
	CASE WHEN unique_states IS NOT NULL OR ?2 THEN
		coalesce(unique_states, 0) || ' ' || (status <> 'pending') || ' ' || attempts || ' ' || available_at END, 0
FROM jobs WHERE unique_key IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT d.unique_key, d.id, NULL, 1
FROM (SELECT 1 FROM finished_jobs WHERE unique_held IS NOT NULL LIMIT 1) CROSS JOIN finished_jobs d
WHERE d.unique_key IN (SELECT value FROM json_each(?1)) AND d.unique_held IS NOT NULL`

// qUniqueTakeover: ?1 a JSON array of job IDs. The jobs give their unique
// keys up to the jobs the same transaction inserts next: they run on,
// holding no key, so jobs_unique_key keeps admitting one holder a key.
const qUniqueTakeover = `UPDATE jobs SET unique_key = NULL WHERE id IN (SELECT value FROM json_each(?1))`

// qSetUniqueStates: ?1 a set of states (backend.UniqueStates), ?2 a JSON
// array of job IDs. Gives the jobs just inserted that set, a statement
// after the insert, so the insert statements and the jobs holding their
// keys in every state (nearly all) pay nothing for the column.
const qSetUniqueStates = `UPDATE jobs SET unique_states = ?1 WHERE id IN (SELECT value FROM json_each(?2))`

// qConflict gives the waiting job ?1 holding a unique key what a
// duplicate's conflict mode asks (backend.Conflict): payload ?2 and due
// time ?3 (µs), no later than created_at + ?4 when ?4 is not NULL
// (debounce). A running job is left alone, and so is a keyed or
// workflow job (its place is fixed at insert): no row changes. Returns
// the new due time of the job it changed: a later item of the batch
// judges the job's state by it (see insertTx).
const qConflict = `UPDATE jobs SET payload = ?2,
	available_at = CASE WHEN ?4 IS NULL THEN ?3 ELSE MIN(?3, created_at + ?4) END
WHERE id = ?1 AND status = 'pending' AND key IS NULL AND workflow_id IS NULL
RETURNING available_at`

// --- claim ---

// claimSQL returns the claim statement for n distinct queues. Parameters:
// ?1 now, ?2 lease_until, ?3 max jobs, ?4.. the queue names. It reserves up
// to ?3 due pending jobs in claim order (highest priority, then lowest
// turn, then earliest available_at, then lowest ID), counting the attempt and raising the claim
// token, and returns them (claimColumns, in no particular order).
//
// The limit is written "?3 + 0" because SQLite re-prepares a statement
// whose bound LIMIT value changed (it feeds the planner), and the claimer's
// batch size changes on nearly every claim: that re-prepare was a large
// share of each claim (docs/performance.md).
//
// With one queue the subquery walks jobs_claim in order and stops at the
// limit. With several, each queue's arm is limited on its own index range
// before the arms are merged, so a claim never sorts a whole backlog.
// Within a priority and turn the index holds the due jobs first
// (available_at ascending), so the walk reaches the jobs scheduled for
// later only once it has taken every due job of that turn: a queue without
// keys has one turn (0), walked as before turns. It takes no notice of key
// rules: a queue with some is claimed by claimKeyed.
func claimSQL(n int) string {
	var sb strings.Builder
	sb.WriteString(`UPDATE jobs SET status = 'reserved', attempts = attempts + 1, claim_token = claim_token + 1,
	reserved_at = ?1, lease_until = ?2
WHERE id IN (`)
	if n == 1 {
		sb.WriteString(`SELECT id FROM jobs
	WHERE status = 'pending' AND queue = ?4 AND available_at <= ?1
	ORDER BY priority DESC, turn, available_at, id LIMIT ?3 + 0`)
	} else {
		sb.WriteString(`SELECT id FROM (`)
		for i := range n {
			if i > 0 {
				sb.WriteString("\n\tUNION ALL ")
			}
			sb.WriteString(`SELECT id, priority, turn, available_at FROM (SELECT id, priority, turn, available_at FROM jobs
		WHERE status = 'pending' AND queue = ?`)
			sb.WriteString(strconv.Itoa(4 + i))
			sb.WriteString(` AND available_at <= ?1
		ORDER BY priority DESC, turn, available_at, id LIMIT ?3 + 0)`)
		}
		sb.WriteString("\n\tORDER BY priority DESC, turn, available_at, id LIMIT ?3 + 0)")
	}
	sb.WriteString(`) AND ` + notExpired("?1") + `
RETURNING ` + claimColumns)
	return sb.String()
}

// notExpired is the claim's test that a job's deadline (if any) has not
// passed by now, the SQL of the claim's time. It filters the rows the
// UPDATE reads anyway, outside the walk of jobs_claim, which stays an
// index-only read: a job without a deadline pays one NULL test. An
// expired job the walk chose is left pending, shortening that claim,
// until the lease sweep moves it to failed_jobs.
func notExpired(now string) string {
	return `(deadline IS NULL OR deadline >= ` + now + `)`
}

// qSetDeadline: ?1 id, ?2 deadline (µs). Sets a job's deadline after its
// insert.
const qSetDeadline = `UPDATE jobs SET deadline = ?2 WHERE id = ?1`

// qExpiredPending: ?1 now, ?2 limit. Returns id, attempts, claim_token,
// queue, type and deadline of pending jobs whose deadline has passed,
// the earliest first, at most ?2 (uses jobs_deadline).
const qExpiredPending = `SELECT id, attempts, claim_token, queue, type, deadline FROM jobs INDEXED BY jobs_deadline
WHERE status = 'pending' AND deadline IS NOT NULL AND deadline < ?1
ORDER BY deadline LIMIT ?2`

// qExpiredAny: ?1 now. Returns one row when a pending job's deadline
// has passed (a probe of jobs_deadline), else none.
const qExpiredAny = `SELECT 1 FROM jobs INDEXED BY jobs_deadline
WHERE status = 'pending' AND deadline IS NOT NULL AND deadline < ?1 LIMIT 1`

// qExpireCopy: ?1 id, ?2 error, ?3 failed_at. Copies a pending job into
// failed_jobs as it is (attempts and errors unchanged: no attempt was
// made); RowsAffected is 0 when it is no longer pending. qJobDelete must
// follow in the same transaction.
const qExpireCopy = `INSERT INTO failed_jobs
	(job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, workflow_id, key, turn, errors)
SELECT id, queue, type, payload, attempts, max_attempts, priority, ?2, unique_key, created_at, ?3, metadata, claim_token, workflow_id, key, turn, errors
FROM jobs WHERE id = ?1 AND status = 'pending'`

// --- completion, leases, release ---

// The fence of a holder's writes is (id, claim_token, status reserved, no
// cancel requested): the token, not the attempt, names the claim, since a
// free release un-counts the attempt and a replay resets it. A cancelling
// job refuses them all, and the holder's outcome then ends it cancelled
// (see qFinishCancelled).

// qCompleteDone: ?1 id, ?2 claim_token (the fence). Deletes the job if this
// claim still holds it and it is no workflow task's; RowsAffected is 0
// when stale or a task's job, which qCompleteDoneTask then tells apart.
// The workflow_id test keeps the common path an Exec: reading the column
// back through RETURNING made every done cost more CPU.
const qCompleteDone = `DELETE FROM jobs WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL
	AND workflow_id IS NULL`

// qCompleteDoneTask: ?1 id, ?2 claim_token (the fence). qCompleteDone for
// a workflow task's job, run when qCompleteDone deleted nothing. Returns
// its workflow_id (its task then ends in the same transaction), or no row
// when stale.
const qCompleteDoneTask = `DELETE FROM jobs WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL
RETURNING workflow_id`

// qCompleteRetry: ?1 id, ?2 claim_token (the fence), ?3 available_at,
// ?4 last_error, ?5 1 for a defer (the attempt un-counted, last_error
// and errors kept), else 0, ?6 now, ?7 duration µs, ?8 worker (the
// attempt's entry in errors). Returns the job to pending; returns its
// queue, or no row when stale.
var qCompleteRetry = `UPDATE jobs
SET status = 'pending', available_at = ?3, reserved_at = NULL, lease_until = NULL,
    attempts = attempts - ?5, last_error = CASE WHEN ?5 = 1 THEN last_error ELSE ?4 END,
    errors = CASE WHEN ?5 = 1 THEN errors ELSE ` + appendErrorSQL("?6", "?7", "?8", "?4") + ` END
WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL
RETURNING queue`

// qFailCopy: ?1 id, ?2 claim_token (the fence), ?3 error, ?4 failed_at,
// ?5 duration µs, ?6 worker. Copies the held job into failed_jobs, its
// claim token with it (a replay brings it back), its workflow_id (a replay
// must know a task's job), its key and turn (a replay puts it back in its
// place) and its errors with the failing attempt's
// appended; RowsAffected is 0 when stale. qJobDelete must follow in the
// same transaction.
var qFailCopy = `INSERT INTO failed_jobs
	(job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at, metadata, claim_token, workflow_id, key, turn, errors)
SELECT id, queue, type, payload, attempts, max_attempts, priority, ?3, unique_key, created_at, ?4, metadata, claim_token, workflow_id, key, turn,
	` + appendErrorSQL("?4", "?5", "?6", "?3") + `
FROM jobs WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL`

// qJobDelete: ?1 id. Deletes the job (after qFailCopy or a copy into
// finished_jobs) unless it is a workflow task's; RowsAffected is 0 for a
// task's job, which qJobDeleteTask then deletes (see qCompleteDone).
const qJobDelete = `DELETE FROM jobs WHERE id = ?1 AND workflow_id IS NULL`

// qJobDeleteTask: ?1 id. Deletes a workflow task's job after qJobDelete
// deleted nothing. Returns its workflow_id, so the caller ends its task in
// the same transaction.
const qJobDeleteTask = `DELETE FROM jobs WHERE id = ?1 RETURNING workflow_id`

// qExtendLease: ?1 id, ?2 claim_token (the fence), ?3 lease_until. Returns
// nothing; RowsAffected is 0 when the lease was lost.
const qExtendLease = `UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL`

// qProgress: ?1 id, ?2 claim_token (the fence), ?3 percent, ?4 message,
// ?5 now. RowsAffected is 0 when the claim no longer holds the job.
const qProgress = `UPDATE jobs SET progress_token = claim_token, progress_percent = ?3, progress_message = ?4, progress_at = ?5
	WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL`

// qRelease: ?1 id, ?2 claim_token (the fence), ?3 available_at (now), ?4
// backend.MaxFreeReleases, ?5 backend.ReleasedError. Returns the job to
// pending and counts the release: while it has free releases left the
// attempt is un-counted, after that it counts (last_error ?5, appended to
// errors without a duration or worker: the holder reports none). Returns the
// queue, or no row when stale or when the counted release spent the last
// attempt (qFailCopy with ?5 then moves the job to failed_jobs). SET
// expressions read the row's values from before the update.
var qRelease = `UPDATE jobs
SET status = 'pending', available_at = ?3, reserved_at = NULL, lease_until = NULL, releases = releases + 1,
	attempts = CASE WHEN releases < ?4 THEN attempts - 1 ELSE attempts END,
	last_error = CASE WHEN releases < ?4 THEN last_error ELSE ?5 END,
	errors = CASE WHEN releases < ?4 THEN errors ELSE ` + appendErrorSQL("?3", "0", "''", "?5") + ` END
WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved' AND cancelled_at IS NULL AND (releases < ?4 OR attempts < max_attempts)
RETURNING queue`

// --- lease sweep ---

// qSweepExpired: ?1 now, ?2 limit. Returns id, attempts, claim_token,
// max_attempts, queue, type and whether its cancel was requested of
// reserved jobs whose lease has passed (lease_until < now), oldest lease
// first, at most ?2 (uses jobs_lease).
const qSweepExpired = `SELECT id, attempts, claim_token, max_attempts, queue, type, cancelled_at IS NOT NULL FROM jobs
WHERE status = 'reserved' AND lease_until < ?1
ORDER BY lease_until LIMIT ?2`

// qSweepRescue: ?1 id, ?2 claim_token, ?3 available_at (now), ?4
// last_error. Returns an expired job to pending keeping its attempt count
// and its token (the next claim raises it), ?4 appended to its errors
// (no duration, no worker); RowsAffected is 0 if it changed meanwhile.
var qSweepRescue = `UPDATE jobs
SET status = 'pending', available_at = ?3, reserved_at = NULL, lease_until = NULL, last_error = ?4,
	errors = ` + appendErrorSQL("?3", "0", "''", "?4") + `
WHERE id = ?1 AND claim_token = ?2 AND status = 'reserved'`

// --- reads ---

// qJobGet: ?1 id. Returns the live job (jobColumns) or no row.
const qJobGet = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?1`

// qStatsPending: ?1 now. Returns queue, pending (due) and scheduled
// counts and the oldest due available_at (NULL when none is due) per queue
// with a pending job. It reads the partial index jobs_claim alone (it
// holds queue and available_at of every pending job), never the rows with
// their payloads: much faster than a table scan (BenchmarkQueueStats
// measures it), and every dashboard view and metrics scrape asks.
const qStatsPending = `SELECT queue,
	SUM(available_at <= ?1),
	SUM(available_at > ?1),
	MIN(CASE WHEN available_at <= ?1 THEN available_at END)
FROM jobs INDEXED BY jobs_claim WHERE status = 'pending' GROUP BY queue`

// qStatsReserved: no parameters. Returns queue and reserved count per
// queue, through jobs_lease: reserved jobs are few (the workers' slots).
const qStatsReserved = `SELECT queue, count(*) FROM jobs INDEXED BY jobs_lease WHERE status = 'reserved' GROUP BY queue`

// qStatsFailed: no parameters. Returns queue and failed_jobs count per queue.
const qStatsFailed = `SELECT queue, count(*) FROM failed_jobs GROUP BY queue`

// qFailedGet: ?1 job id. Returns failedColumns of the job's failed row
// (through failed_jobs_job_id; a job has at most one) or no row.
const qFailedGet = `SELECT ` + failedColumns + ` FROM failed_jobs WHERE job_id = ?1 ORDER BY id DESC LIMIT 1`

// failedWhere builds the WHERE clause (without the keyword; "1" when f
// is zero) and its arguments for a failed-jobs filter whose time bound
// (FailedBefore, OlderThan) was resolved to cutoff (zero: none). beforeID >
// 0 adds id < beforeID. The queue and type terms use
// failed_jobs_queue/_type. KeepHeld reads queue_settings (a row per
// controlled queue) once per statement.
func failedWhere(f backend.FailedFilter, cutoff time.Time, beforeID int64) (string, []any) {
	var terms []string
	var args []any
	if f.Queue != "" {
		args = append(args, f.Queue)
		terms = append(terms, "queue = ?")
	}
	if f.Type != "" {
		args = append(args, f.Type)
		terms = append(terms, "type = ?")
	}
	if f.Key != "" {
		args = append(args, f.Key)
		terms = append(terms, "key = ?")
	}
	if f.KeepHeld {
		// A keyed job of a queue ordered under KeyHold may hold its key.
		terms = append(terms, `(key IS NULL OR queue NOT IN (SELECT queue FROM queue_settings
			WHERE key_ordered = 1 AND key_policy IN ('', '`+string(backend.KeyHold)+`')))`)
	}
	if !cutoff.IsZero() {
		args = append(args, micros(cutoff))
		terms = append(terms, "failed_at < ?")
	}
	if beforeID > 0 {
		args = append(args, beforeID)
		terms = append(terms, "id < ?")
	}
	if len(terms) == 0 {
		return "1", nil
	}
	return strings.Join(terms, " AND "), args
}

// failedListSQL: the failedWhere arguments, then the limit. Returns
// failedColumns of the matching failed jobs, highest ID first.
func failedListSQL(where string) string {
	return `SELECT ` + failedColumns + ` FROM failed_jobs WHERE ` + where + ` ORDER BY id DESC LIMIT ?`
}

// qFailedMaxID: no parameters. Returns the highest failed_jobs ID, 0 when
// the table is empty: the end of a replay or purge by filter, so jobs that
// fail meanwhile cannot keep it going.
const qFailedMaxID = `SELECT COALESCE(MAX(id), 0) FROM failed_jobs`

// failedKeepSQL: the failedWhere arguments, then the number kept minus one.
// Returns the ID of the oldest of the newest matching failed jobs that a
// purge with KeepNewest keeps, or no row when no more than that many match.
func failedKeepSQL(where string) string {
	return `SELECT id FROM failed_jobs WHERE ` + where + ` ORDER BY id DESC LIMIT 1 OFFSET ?`
}

// failedChunkSQL: the failedWhere arguments, then after, last and the
// chunk size. Returns the IDs of the next chunk of matching failed jobs:
// after < id <= last, lowest first. Paging by ID, not by deleting, keeps
// each chunk's scan from passing the rows earlier chunks skipped.
func failedChunkSQL(where string) string {
	return `SELECT id FROM failed_jobs WHERE ` + where + ` AND id > ? AND id <= ? ORDER BY id LIMIT ?`
}

// --- replay and purge ---

// qFailedExists: ?1 failed_jobs id. Returns one row when it exists.
const qFailedExists = `SELECT 1 FROM failed_jobs WHERE id = ?1`

// qFailedOfJob: ?1 job id. Returns the failed_jobs id of the job's failed
// row (through failed_jobs_job_id), or no row when it has none.
const qFailedOfJob = `SELECT id FROM failed_jobs WHERE job_id = ?1 ORDER BY id DESC LIMIT 1`

// qReplay: ?1 failed_jobs id, ?2 available_at (now). Re-inserts the failed
// job as pending under its original job ID with attempts and releases
// reset, keeping its metadata, its errors, its claim token (never reset: the
// holder from before the failure must stay stale), its key and turn (its
// place among its key's jobs) and its workflow_id,
// unless a live job holds that ID or its unique key, or a completed one
// its unique key (through finished_jobs_unique_held), or it is the task of
// a workflow that was cancelled (or pruned, which only a cancelled one
// with a failed task can be): a cancelled workflow stays cancelled.
// Returns the queue, type, workflow_id (NULL unless a task's: its task is
// then restored in the same transaction) and job ID, or no row when
// skipped (or the ID does not exist).
const qReplay = `INSERT INTO jobs
	(id, queue, type, payload, attempts, max_attempts, priority, status, available_at, created_at, last_error, unique_key, releases, metadata, claim_token, workflow_id, key, turn, errors)
SELECT f.job_id, f.queue, f.type, f.payload, 0, f.max_attempts, f.priority, 'pending', ?2, f.created_at, f.error, f.unique_key, 0, f.metadata, f.claim_token, f.workflow_id, f.key, f.turn, f.errors
FROM failed_jobs f
WHERE f.id = ?1
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = f.job_id)
	AND (f.unique_key IS NULL OR (NOT EXISTS (SELECT 1 FROM jobs j WHERE j.unique_key = f.unique_key)
		AND NOT EXISTS (SELECT 1 FROM finished_jobs d WHERE d.unique_key = f.unique_key AND d.unique_held IS NOT NULL)))
	AND (f.workflow_id IS NULL OR EXISTS (SELECT 1 FROM workflows w WHERE w.id = f.workflow_id AND w.state != 'cancelled'))
RETURNING queue, type, workflow_id, id`

// qFailedDelete: ?1 failed_jobs id. RowsAffected is 0 when it does not exist.
const qFailedDelete = `DELETE FROM failed_jobs WHERE id = ?1`

// qFailedDeleteJob: ?1 job id. Deletes the job's failed row (through
// failed_jobs_job_id); RowsAffected is 0 when it has none.
const qFailedDeleteJob = `DELETE FROM failed_jobs WHERE job_id = ?1`

// failedPurgeChunkSQL: the failedWhere arguments, then first and last.
// Deletes the matching failed jobs with first <= id <= last (one chunk);
// RowsAffected counts them.
func failedPurgeChunkSQL(where string) string {
	return `DELETE FROM failed_jobs WHERE ` + where + ` AND id >= ? AND id <= ?`
}
