package sqlite

import (
	"strings"

	"github.com/jobq/jobq/backend"
)

// The statements of cancelling and of keeping finished jobs (see
// queries.go for the conventions).

// finishedColumns is the column list scanFinished reads, in order, but
// its last: result, or NULL where the read asks for no results.
const finishedColumns = `id, state, queue, type, payload, attempts, max_attempts, priority,
	last_error, unique_key, metadata, created_at, finished_at, key`

// finishInto and finishFrom frame the statements that copy a live job
// into finished_jobs: ?2 state, ?3 finished_at; the WHERE that follows
// names the job (?1 id) and its fence.
const (
	finishInto = `INSERT INTO finished_jobs
	(id, state, queue, type, payload, attempts, max_attempts, priority, last_error, unique_key, metadata, created_at, finished_at, key`
	finishFrom = `
SELECT id, ?2, queue, type, payload, attempts, max_attempts, priority, last_error, unique_key, metadata, created_at, ?3, key`
	finishCopy = finishInto + `)` + finishFrom + `
FROM jobs `
)

// qFinishKeep: ?1 id, ?2 state ('completed'), ?3 finished_at, ?4
// claim_token (the fence), ?5 the handler's result or NULL, ?6
// backend.UniqueCompleted. Copies the held job into finished_jobs with its
// result, so the result is written by the completion's own statement and
// a stale holder's is refused with it; RowsAffected is 0 when stale or
// cancelling. qJobDelete must follow in the same transaction.
//
// A job still holding its unique key (nobody took it over) whose set has
// ?6 takes the key with it (unique_held, see 015_unique_completed.sql),
// unless a completed job holds it already, which only a producer of an
// older build, blind to completed holders, can have let happen: the older
// holder keeps it, and the completion goes through rather than fail on
// finished_jobs_unique_held. The CASE stops at its first true WHEN, so a
// job of no set (nearly all) reads its unique_states alone.
const qFinishKeep = finishInto + `, result, unique_held)` + finishFrom + `, ?5,
	CASE WHEN unique_key IS NULL OR coalesce(unique_states, 0) & ?6 = 0 THEN NULL
		WHEN EXISTS (SELECT 1 FROM finished_jobs d WHERE d.unique_key = jobs.unique_key AND d.unique_held IS NOT NULL) THEN NULL
		ELSE 1 END
FROM jobs WHERE id = ?1 AND claim_token = ?4 AND status = 'reserved' AND cancelled_at IS NULL`

// qFinishCancelled: ?1 id, ?2 state ('cancelled'), ?3 finished_at, ?4
// claim_token. Copies the cancelling claim into finished_jobs (any write of
// its holder, or the sweep, ends it so); RowsAffected is 0 when ?4 is not
// the token of a cancelling claim, so an earlier holder's write is stale,
// not a cancel. qJobDelete must follow.
const qFinishCancelled = finishCopy + `WHERE id = ?1 AND claim_token = ?4 AND status = 'reserved' AND cancelled_at IS NOT NULL`

// qFinishPending: ?1 id, ?2 state ('cancelled'), ?3 finished_at. Copies a
// pending job into finished_jobs; RowsAffected is 0 when it is not
// pending. qJobDelete must follow.
const qFinishPending = finishCopy + `WHERE id = ?1 AND status = 'pending'`

// qCancelLookup: ?1 id. Returns the live job's status, attempts and
// whether its cancel was requested, or no row.
const qCancelLookup = `SELECT status, attempts, cancelled_at IS NOT NULL FROM jobs WHERE id = ?1`

// qCancelRequest: ?1 id, ?2 cancelled_at. Marks a reserved job cancelling.
const qCancelRequest = `UPDATE jobs SET cancelled_at = ?2 WHERE id = ?1 AND status = 'reserved' AND cancelled_at IS NULL`

// qFinishedLookup: ?1 id. Returns the kept job's state and attempts, or
// no row.
const qFinishedLookup = `SELECT state, attempts FROM finished_jobs WHERE id = ?1`

// qFailedByJob: ?1 job id. Returns one row when the job is in failed_jobs
// (uses failed_jobs_job_id).
const qFailedByJob = `SELECT 1 FROM failed_jobs WHERE job_id = ?1 LIMIT 1`

// qCancelling: no parameters. Returns id, attempts and claim_token of
// every cancelling job (uses jobs_cancelling).
const qCancelling = `SELECT id, attempts, claim_token FROM jobs WHERE cancelled_at IS NOT NULL`

// qFinishedPrune: ?1 state, ?2 cutoff, ?3 chunk size. Deletes up to ?3
// jobs of ?1 that finished before ?2; RowsAffected counts them.
const qFinishedPrune = `DELETE FROM finished_jobs WHERE id IN (
	SELECT id FROM finished_jobs WHERE state = ?1 AND finished_at < ?2 LIMIT ?3)`

// finishedPruneScan frames the reads of a prune of some job types by
// their own age: ?1 state, ?2 cutoff, ?3 chunk size, ?4 a JSON array of
// types, ?5 the lowest finished_at to look at. It returns id and
// finished_at of up to ?3 jobs of ?1 that finished in [?5, ?2) and whose
// type matches ?4 as the term in between says, the oldest first. With no
// index on type the finished_at index is walked and the other types'
// rows are skipped: it runs on a read connection, so that the walk never
// holds the write lock, and the ?5 of each chunk after the first is the
// latest finished_at of the one before, so a prune reads the skipped rows
// once, not once per chunk. qFinishedPruneIDs deletes what it found.
const (
	finishedPruneScan = `SELECT id, finished_at FROM finished_jobs
WHERE state = ?1 AND finished_at < ?2 AND finished_at >= ?5 AND type `
	finishedPruneScanEnd = ` IN (SELECT value FROM json_each(?4))
ORDER BY finished_at LIMIT ?3`
)

// qFinishedPruneTypes: as finishedPruneScan, the jobs of the types in ?4.
const qFinishedPruneTypes = finishedPruneScan + finishedPruneScanEnd

// qFinishedPruneExcept: as finishedPruneScan, the jobs of every type but
// those in ?4.
const qFinishedPruneExcept = finishedPruneScan + `NOT` + finishedPruneScanEnd

// qFinishedPruneIDs: ?1 a JSON array of IDs, ?2 state, ?3 cutoff. Deletes
// the jobs of ?1 that are of ?2 and finished before ?3 (as when
// qFinishedPruneTypes or qFinishedPruneExcept found them: a kept job
// changes not, but it may have gone meanwhile); RowsAffected counts them.
// The unary + keeps the planner from walking finished_jobs_finished_at
// for the terms that only check each row found by its ID.
const qFinishedPruneIDs = `DELETE FROM finished_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND +state = ?2 AND +finished_at < ?3`

// qPruneTurn: ?1 holder, ?2 until, ?3 now. Takes the 'prune' turn when
// nobody holds it, its holder is ?1 or its time ran out; RowsAffected is 1
// when ?1 has it.
const qPruneTurn = `INSERT INTO jobq_turns (name, holder, until) VALUES ('prune', ?1, ?2)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
WHERE jobq_turns.holder = excluded.holder OR jobq_turns.until <= ?3`

// listWhere builds the filter terms (without WHERE) and arguments of a
// list: f's queue, type and key, its time range on column at, and id < beforeID
// when beforeID > 0. terms holds the state's own conditions first.
func listWhere(terms []string, args []any, f backend.JobFilter, at string, beforeID int64) (string, []any) {
	if f.Queue != "" {
		terms, args = append(terms, "queue = ?"), append(args, f.Queue)
	}
	if f.Type != "" {
		terms, args = append(terms, "type = ?"), append(args, f.Type)
	}
	if f.Key != "" {
		terms, args = append(terms, "key = ?"), append(args, f.Key)
	}
	if !f.Since.IsZero() {
		terms, args = append(terms, at+" >= ?"), append(args, micros(f.Since))
	}
	if !f.Until.IsZero() {
		terms, args = append(terms, at+" < ?"), append(args, micros(f.Until))
	}
	if beforeID > 0 {
		terms, args = append(terms, "id < ?"), append(args, beforeID)
	}
	return strings.Join(terms, " AND "), args
}

// finishedListSQL: the listWhere arguments, then the limit. Returns
// finishedColumns and the result (NULL unless results), highest ID first
// (uses finished_jobs_state).
func finishedListSQL(where string, results bool) string {
	result := "NULL"
	if results {
		result = "result"
	}
	return `SELECT ` + finishedColumns + `, ` + result + ` FROM finished_jobs WHERE ` + where + ` ORDER BY id DESC LIMIT ?`
}

// jobListSQL: the listWhere arguments, then the limit. Returns jobColumns,
// highest ID first.
func jobListSQL(where string) string {
	return `SELECT ` + jobColumns + ` FROM jobs WHERE ` + where + ` ORDER BY id DESC LIMIT ?`
}
