package sqlite

// The statements of keys (backend.KeyController) live here, beside
// queries.go, whose conventions they follow. Each per-key lookup is a
// probe of one of the partial indexes of migration 010, which hold keyed
// jobs only: a queue without keys never pays for them.

// keyPrios: ?1 queue, ?2 key. A CTE p(prio) of the distinct priorities
// of the key's live jobs, highest first, then a NULL: a loose scan of
// jobs_key, one probe per priority. The statements that start with it
// read each priority's first or last ID, so they cost the key's
// priorities, never its backlog.
const keyPrios = `WITH RECURSIVE p(prio) AS (
	SELECT (SELECT priority FROM jobs INDEXED BY jobs_key WHERE queue = ?1 AND key = ?2 ORDER BY priority DESC LIMIT 1)
	UNION ALL
	SELECT (SELECT j.priority FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key = ?2 AND j.priority < p.prio
		ORDER BY j.priority DESC LIMIT 1)
	FROM p WHERE p.prio IS NOT NULL
)
`

// --- turns at insert ---

// qKeysMaxTurn: ?1 queue, ?2 a JSON array of keys. Returns each key that
// has live jobs with the turn of its newest one (its highest, but for a
// replayed job's): a loose scan of jobs_key per key (keyPrios' for every
// key at once), then a probe per priority, so it costs the keys'
// priorities, never their backlogs; one statement for all the keys of an
// insert, not one per key.
const qKeysMaxTurn = `WITH RECURSIVE ks(key) AS (SELECT DISTINCT value FROM json_each(?2)),
p(key, prio) AS (
	SELECT ks.key, (SELECT priority FROM jobs INDEXED BY jobs_key WHERE queue = ?1 AND key = ks.key ORDER BY priority DESC LIMIT 1)
	FROM ks
	UNION ALL
	SELECT p.key, (SELECT j.priority FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key = p.key AND j.priority < p.prio
		ORDER BY j.priority DESC LIMIT 1)
	FROM p WHERE p.prio IS NOT NULL
),
top(key, id) AS (
	SELECT key, MAX((SELECT j.id FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key = p.key AND j.priority = p.prio
		ORDER BY j.id DESC LIMIT 1))
	FROM p WHERE p.prio IS NOT NULL GROUP BY key
)
SELECT top.key, jobs.turn FROM top JOIN jobs ON jobs.id = top.id`

// qQueueMinTurn: ?1 queue. Returns the lowest turn among the queue's
// pending keyed jobs (scheduled ones included), 0 when it has none: the
// round being worked. At each of the queue's priorities (qQueuePriorities'
// loose scan) the first keyed entry of jobs_claim has that priority's
// lowest turn, keyed jobs having turn 1 or more: no index of its own,
// which every claim would move.
const qQueueMinTurn = queuePrios + `SELECT COALESCE(MIN((SELECT j.turn FROM jobs j INDEXED BY jobs_claim
	WHERE j.status = 'pending' AND j.queue = ?1 AND j.priority = p.prio AND j.turn > 0 ORDER BY j.turn LIMIT 1)), 0)
FROM p WHERE p.prio IS NOT NULL`

// --- claims of a queue with key rules ---

// qKeyWalk: ?1 queue, ?2 now, ?3 limit. Returns id and key of the queue's
// due pending jobs in claim order, at most ?3: the start of jobs_claim,
// read from the index alone (it carries key). Each LIMIT of a claim's
// statements is written "+ 0", as claimSQL's is: a bound LIMIT value
// that changes (the walk's budget follows the claim's batch) makes SQLite
// prepare the statement again.
const qKeyWalk = `SELECT id, key FROM jobs
WHERE status = 'pending' AND queue = ?1 AND available_at <= ?2
ORDER BY priority DESC, turn, available_at, id LIMIT ?3 + 0`

// qKeyReserved: ?1 queue. Returns each key with reserved jobs and how
// many, cancelling ones included (jobs_key_reserved: as many rows as the
// queue's keyed jobs running, which the workers' slots bound).
const qKeyReserved = `SELECT key, count(*) FROM jobs WHERE status = 'reserved' AND queue = ?1 AND key IS NOT NULL GROUP BY key`

// qKeyHead: ?1 queue, ?2 key. Returns the lowest ID among the key's live
// jobs, or no row.
const qKeyHead = keyPrios + `SELECT id FROM (
	SELECT MIN((SELECT j.id FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key = ?2 AND j.priority = p.prio
		ORDER BY j.id LIMIT 1)) AS id
	FROM p WHERE p.prio IS NOT NULL) WHERE id IS NOT NULL`

// qKeyFailed: ?1 queue, ?2 key. Returns one row when the key has a job in
// failed_jobs (failed_jobs_key).
const qKeyFailed = `SELECT 1 FROM failed_jobs WHERE queue = ?1 AND key = ?2 LIMIT 1`

// qClaimIDs: ?1 reserved_at, ?2 lease_until, ?3 JSON array of job IDs.
// Reserves those of the jobs still pending as claimSQL does and returns
// them (claimColumns). A job whose deadline has passed is left out (the
// walks that chose the IDs read the index alone).
var qClaimIDs = `UPDATE jobs SET status = 'reserved', attempts = attempts + 1, claim_token = claim_token + 1,
	reserved_at = ?1, lease_until = ?2
WHERE id IN (SELECT value FROM json_each(?3)) AND status = 'pending' AND ` + notExpired("?1") + `
RETURNING ` + claimColumns

// qQueueKeys: ?1 queue. Returns the distinct keys of the queue's live
// jobs, by name: one probe of jobs_key per key, skipping each key's
// backlog (a loose index scan written as a recursive CTE). A key whose
// jobs all run is among them; the claim finds nothing due for it.
const qQueueKeys = `WITH RECURSIVE k(key) AS (
	SELECT (SELECT key FROM jobs INDEXED BY jobs_key WHERE queue = ?1 AND key IS NOT NULL ORDER BY key LIMIT 1)
	UNION ALL
	SELECT (SELECT j.key FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key > k.key ORDER BY j.key LIMIT 1)
	FROM k WHERE k.key IS NOT NULL
)
SELECT key FROM k WHERE key IS NOT NULL`

// qQueuePriorities: ?1 queue. Returns the distinct priorities of the
// queue's pending jobs, highest first: one probe of jobs_claim each.
const qQueuePriorities = queuePrios + `SELECT prio FROM p WHERE prio IS NOT NULL`

// queuePrios: ?1 queue. A CTE p(prio) of the distinct priorities of the
// queue's pending jobs, highest first, then a NULL: one probe of
// jobs_claim per priority.
const queuePrios = `WITH RECURSIVE p(prio) AS (
	SELECT (SELECT priority FROM jobs INDEXED BY jobs_claim WHERE status = 'pending' AND queue = ?1 ORDER BY priority DESC LIMIT 1)
	UNION ALL
	SELECT (SELECT j.priority FROM jobs j INDEXED BY jobs_claim WHERE j.status = 'pending' AND j.queue = ?1 AND j.priority < p.prio ORDER BY j.priority DESC LIMIT 1)
	FROM p WHERE p.prio IS NOT NULL
)
`

// qUnkeyedDue: ?1 queue, ?2 priority, ?3 now, ?4 limit. Returns id,
// priority, turn and available_at of the first due pending jobs without a
// key (turn 0: every keyed job has turn 1 or more) at that priority, in
// claim order (one range of jobs_claim).
const qUnkeyedDue = `SELECT id, priority, turn, available_at FROM jobs
WHERE status = 'pending' AND queue = ?1 AND priority = ?2 AND turn = 0 AND available_at <= ?3
ORDER BY available_at, id LIMIT ?4 + 0`

// qKeyPriorities: ?1 queue, ?2 key. Returns the distinct priorities of
// the key's live jobs, highest first.
const qKeyPriorities = keyPrios + `SELECT prio FROM p WHERE prio IS NOT NULL`

// qKeyDue: ?1 queue, ?2 key, ?3 priority, ?4 now, ?5 limit. Returns id,
// priority, turn and available_at of the key's first due pending jobs at
// that priority, by ID: its claim order there, turns growing with IDs
// within a key (a replayed job, which keeps its turn, is the exception:
// here it comes at its ID's place). It reads the key's entries at that
// priority from the first: its running jobs (at most its limit) and its
// scheduled ones are passed over, its backlog is not read.
const qKeyDue = `SELECT id, priority, turn, available_at FROM jobs INDEXED BY jobs_key
WHERE queue = ?1 AND key = ?2 AND priority = ?3 AND status = 'pending' AND available_at <= ?4
ORDER BY id LIMIT ?5 + 0`

// qJobDue: ?1 id, ?2 now. Returns id, priority, turn and available_at of
// the job when it is pending and due, or no row.
const qJobDue = `SELECT id, priority, turn, available_at FROM jobs WHERE id = ?1 AND status = 'pending' AND available_at <= ?2`

// --- halt ---

// qFailedKeyOf: ?1 job id. Returns the queue and key (NULL for none) of
// the job's newest failed row (failed_jobs_job_id), or no row.
const qFailedKeyOf = `SELECT queue, key FROM failed_jobs WHERE job_id = ?1 ORDER BY id DESC LIMIT 1`

// qFinishedKeyOf: ?1 job id. Returns the queue and key (NULL for none) of
// the kept finished job, or no row.
const qFinishedKeyOf = `SELECT queue, key FROM finished_jobs WHERE id = ?1`

// qKeyLower: ?1 queue, ?2 key, ?3 id. Returns one row when a live job of
// the key has an ID below ?3.
const qKeyLower = keyPrios + `SELECT 1 FROM p WHERE p.prio IS NOT NULL AND EXISTS (
	SELECT 1 FROM jobs j INDEXED BY jobs_key WHERE j.queue = ?1 AND j.key = ?2 AND j.priority = p.prio AND j.id < ?3)
LIMIT 1`

// qKeyPendingAfter: ?1 queue, ?2 key, ?3 id. Returns the IDs of the key's
// pending jobs above ?3, lowest first: it reads the key's jobs, which a
// halt, its one caller, then cancels.
const qKeyPendingAfter = `SELECT id FROM jobs INDEXED BY jobs_key WHERE queue = ?1 AND key = ?2 AND id > ?3 AND status = 'pending' ORDER BY id`

// qFinishHalted: ?1 id, ?2 last_error, ?3 finished_at. Copies a pending
// job into finished_jobs as cancelled with last_error ?2; RowsAffected is
// 0 when it is not pending. qJobDelete must follow.
const qFinishHalted = `INSERT INTO finished_jobs
	(id, state, queue, type, payload, attempts, max_attempts, priority, last_error, unique_key, metadata, created_at, finished_at, key)
SELECT id, 'cancelled', queue, type, payload, attempts, max_attempts, priority, ?2, unique_key, metadata, created_at, ?3, key
FROM jobs WHERE id = ?1 AND status = 'pending'`

// --- queue settings and listing ---

// qQueueSetKeys: ?1 queue, ?2 key_limit, ?3 key_ordered, ?4 key_policy, ?5
// updated_at. Replaces the queue's key rules, keeping its paused flag and
// limits.
const qQueueSetKeys = `INSERT INTO queue_settings (queue, key_limit, key_ordered, key_policy, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (queue) DO UPDATE SET key_limit = excluded.key_limit, key_ordered = excluded.key_ordered,
	key_policy = excluded.key_policy, updated_at = excluded.updated_at`

// keyListSQL: where (without WHERE, "1" for none) filters both tables by
// queue; its arguments are given twice. Returns queue, key, pending,
// reserved and failed counts, the lowest failed job ID (NULL when none)
// and when that job failed of every key with live or failed jobs: with a
// single min() SQLite takes the query's bare column (failed_at) from the
// row holding the minimum. An operator's listing reads every keyed row
// once.
func keyListSQL(where string) string {
	return `SELECT queue, key, SUM(p), SUM(r), SUM(f), MIN(head), at FROM (
	SELECT queue, key, status = 'pending' AS p, status = 'reserved' AS r, 0 AS f, NULL AS head, NULL AS at
	FROM jobs WHERE key IS NOT NULL AND ` + where + `
	UNION ALL
	SELECT queue, key, 0, 0, 1, job_id, failed_at FROM failed_jobs WHERE key IS NOT NULL AND ` + where + `
) GROUP BY queue, key`
}
