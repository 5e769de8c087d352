package postgres

import (
	"fmt"
	"strings"
)

// The statements of keys (backend.KeyController; see queries.go for the
// conventions, migrations/013_keys.sql for the columns and the halt
// trigger, 014_key_indexes.sql for the indexes). A job without a key
// never reaches any of them: the plain statements run unchanged for
// batches without keys.

// keyedInsert turns insertCTEs into the head of sqlInsertKeyed: an
// eleventh array, $11 key text[] (NULL: none), and each keyed job's turn (see
// keyTurns) written with it.
func keyedInsert(ctes string) string {
	s := mustReplace(ctes, "$9::text[], $10::smallint[])", "$9::text[], $10::smallint[], $11::text[])")
	s = mustReplace(s, "unique_key, metadata, unique_states, ord)", "unique_key, metadata, unique_states, key, ord)")
	s = mustReplace(s, "\n),\nplain AS (", "\n),\n"+keyTurns("input")+",\nplain AS (")
	// Both arms of the insert (without and with a unique key) write the
	// key and the turn; each arm's SELECT list ends with a column of its own.
	for _, arm := range []struct{ name, last string }{{"plain", "metadata"}, {"keyed", "unique_key"}} {
		s = mustReplace(s, arm.name+` AS (
	INSERT INTO {schema}.jobs AS j
	       (id, `, arm.name+` AS (
	INSERT INTO {schema}.jobs AS j
	       (key, turn, id, `)
		s = mustReplace(s, `	SELECT id, queue, type, payload::json, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), `+arm.last,
			`	SELECT input.key, coalesce(turns.turn, 0), id, queue, type, payload::json, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), `+arm.last)
		s = mustReplace(s, `	FROM input
	WHERE unique_key IS `, `	FROM input LEFT JOIN turns USING (id)
	WHERE unique_key IS `)
	}
	return s
}

// keyTurns is the CTEs that give the keyed rows of src (id, queue, key,
// ord) their turns, named turns (id, turn). A job's turn is one more than
// the higher of the highest turn among its key's live jobs and the lowest
// turn among its queue's pending keyed jobs, as if the rows were inserted
// one by one in ord order: successive jobs of a key take successive
// turns, and when the queue had no pending keyed job the first keyed row
// of the batch sets the round the other keys' rows join (kt_first).
// Concurrent inserts of one key may draw equal turns: the claim orders
// those by due time and id, so the tie costs fairness nothing that
// matters and needs no lock.
func keyTurns(src string) string {
	return `kt_in AS MATERIALIZED (
	SELECT s.id, s.queue, s.key, s.ord,
	       ` + keyTop("s") + ` AS top,
	       coalesce((SELECT min(x.turn) FROM {schema}.jobs x
	                 WHERE x.queue = s.queue AND x.key IS NOT NULL AND x.status = 'pending'), 0) AS low
	FROM ` + src + ` s WHERE s.key IS NOT NULL
),
kt_first AS (
	SELECT DISTINCT ON (queue) queue, key, top + 1 AS t0 FROM kt_in ORDER BY queue, ord
),
turns AS (
	SELECT t.id, greatest(t.top, CASE WHEN t.low > 0 THEN t.low WHEN t.key = f.key THEN 0 ELSE f.t0 END)
	       + row_number() OVER (PARTITION BY t.queue, t.key ORDER BY t.ord) AS turn
	FROM kt_in t JOIN kt_first f ON f.queue = t.queue
)`
}

// keyTop is the highest turn among the live jobs of the key of the row
// alias a (queue, key), 0 when it has none: one probe of its pending jobs
// and one of its held ones (migrations/014_key_indexes.sql).
func keyTop(a string) string {
	return `greatest(
	       coalesce((SELECT max(x.turn) FROM {schema}.jobs x
	                 WHERE x.queue = ` + a + `.queue AND x.key = ` + a + `.key AND x.status = 'pending'), 0),
	       coalesce((SELECT max(x.turn) FROM {schema}.jobs x
	                 WHERE x.queue = ` + a + `.queue AND x.key = ` + a + `.key AND x.status <> 'pending'), 0))`
}

// keyTurnInline is a keyed row's turn (see keyTurns) as an expression
// over the row alias a (queue, key), for the statements that insert a
// task's or a schedule's job from SQL: successive rows of one key in one
// statement, ordered by ord, take successive turns. 0 without a key.
func keyTurnInline(a, ord string) string {
	return `CASE WHEN ` + a + `.key IS NULL THEN 0 ELSE greatest(
	       ` + keyTop(a) + `,
	       coalesce((SELECT min(x.turn) FROM {schema}.jobs x
	                 WHERE x.queue = ` + a + `.queue AND x.key IS NOT NULL AND x.status = 'pending'), 0))
	       + row_number() OVER (PARTITION BY ` + a + `.queue, ` + a + `.key ORDER BY ` + ord + `) END`
}

// failedKeyFilter is the part of a backend.FailedFilter about keys over
// failed_jobs f, its parameters $n (key text, NULL: any key or none) and
// $n+1 (keep held bool): with KeepHeld, no keyed job of a queue whose
// keys are ordered under hold matches, since its row may be what holds
// its key (a probe of the settings row per keyed job).
func failedKeyFilter(n int) string {
	k, h := fmt.Sprintf("$%d", n), fmt.Sprintf("$%d", n+1)
	return `(` + k + `::text IS NULL OR f.key = ` + k + `)
	AND NOT (` + h + `::bool AND f.key IS NOT NULL AND EXISTS (
	    SELECT 1 FROM {schema}.queue_settings hs
	    WHERE hs.queue = f.queue AND hs.key_ordered AND hs.key_policy IN ('', 'hold')))`
}

// sqlInsertKeyed is sqlInsert for a batch with keyed jobs: its
// parameters and $11 key text[] (NULL: none); the same rows.
var sqlInsertKeyed = mustReplace(sqlInsert, insertCTEs, keyedInsert(insertCTEs))

// sqlInsertKeyedNotify is sqlInsertNotify for a batch with keyed jobs.
var sqlInsertKeyedNotify = mustReplace(sqlInsertNotify, insertCTEs, keyedInsert(insertCTEs))

// sqlClaimKeyedPlan is sqlClaimPlan for the batch of a keyed claim: the
// same settings and rows, and the keyed claim run on a generic plan. The
// statement is long, and planning it afresh for every claim (as a custom
// plan, which the server kept choosing) took about as long as running it:
// a third of a keyed drain's claim on a 2-CPU machine. Its CTEs are
// materialized and, with bitmap and sequential scans off, each read is an
// index scan whatever the parameters, so the generic plan is the custom
// one (TestKeyProbePlans checks both). The setting lasts until the batch's
// implicit transaction ends, like the others.
var sqlClaimKeyedPlan = mustReplace(sqlClaimPlan, "set_config('enable_seqscan', 'off', true),",
	"set_config('enable_seqscan', 'off', true),\n       set_config('plan_cache_mode', 'force_generic_plan', true),")

// keyQueries holds the statements of keys with the schema filled in.
type keyQueries struct {
	insert, insertNotify, claimKeyed, claimPlan string
	insertTake, insertNotifyTake                string // withTakeover
	insertPlain, insertNotifyPlain              string // plainInsert
	setKeys, keyList, heldQueues                string
}

func newKeyQueries(schema string) keyQueries {
	r := strings.NewReplacer("{schema}", quoteIdent(schema), "{channel}", "'"+channelName(schema)+"'")
	return keyQueries{
		insert:            r.Replace(sqlInsertKeyed),
		insertNotify:      r.Replace(sqlInsertKeyedNotify),
		insertTake:        r.Replace(withTakeover(sqlInsertKeyed, 12)),
		insertNotifyTake:  r.Replace(withTakeover(sqlInsertKeyedNotify, 12)),
		insertPlain:       r.Replace(plainInsert(sqlInsertKeyed)),
		insertNotifyPlain: r.Replace(plainInsert(sqlInsertKeyedNotify)),
		claimKeyed:        r.Replace(sqlClaimKeyed),
		claimPlan:         r.Replace(sqlClaimKeyedPlan),
		setKeys:           r.Replace(sqlQueueSetKeys),
		keyList:           r.Replace(sqlKeyList),
		heldQueues:        r.Replace(sqlHeldQueues),
	}
}

// sqlClaimKeyed is sqlClaimLimited for a queue with key rules: it must
// follow sqlQueueLock in the same batch, so the claimers of the queue take
// turns and each one's snapshot, taken after the lock was granted, sees
// every job the ones before it reserved: a key's count against its limit,
// or its ordered head, is then exact across every process.
//
//	$1 queue text, $2 max int, $3 lease_us bigint,
//	$4 first page int, $5 second page int
//
// It reads due pending jobs in claim order, $4 of them from the start and,
// when an earlier claim left a cursor (queue_settings.scan_*), $5 more
// from the cursor on, and claims, in claim order, those whose key lets
// them go: a job without a key always; one of a limited key while fewer
// than key_limit jobs of the key are held (reserved or cancelling, this
// claim's included); one of an ordered key only when it is the key's
// lowest live id, nothing of the key is held and, under hold, the key has
// no failed job. It weighs the jobs in claim order and stops once it has
// chosen $2 (or what the limits allow): each job weighed costs up to
// three index probes of its key (see migrations/014_key_indexes.sql),
// whatever the key's backlog, so a claim probes about as many keys as it
// claims jobs, plus the blocked ones it passes over. A claim reads at most
// $4 + $5 rows, so jobs blocked behind a held key with a long backlog
// (at a higher priority, say) are not read in full by every claim: when
// the first page comes back full and the claim short, the cursor moves to
// its end, and each later claim reads a page on from it, until the end of
// the queue puts it back to the start. Jobs behind such a backlog are then
// reached within a few claims rather than never, and never at the cost of
// one claim reading them all.
//
// The concurrency and rate limits apply as in sqlClaimLimited. Returns the
// claimed rows (claimedColumns) in no particular order.
var sqlClaimKeyed = `
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
s AS MATERIALIZED (
	SELECT paused, concurrency, rate_limit, rate_count, key_limit, key_ordered, key_policy,
	       scan_priority, scan_turn, scan_at, scan_id,
	       greatest(rate_window, CASE WHEN rate_limit > 0
	            THEN floor(extract(epoch FROM t.now) * 1000000)::bigint / rate_period_us
	            ELSE 0 END) AS win,
	       rate_window
	FROM {schema}.queue_settings, t WHERE queue = $1
),
` + sqlClaimAllow + `room AS (SELECT coalesce(max(n), $2::int) AS n FROM allow),
page_a AS MATERIALIZED (
	SELECT id, key, priority, turn, available_at FROM {schema}.jobs
	WHERE status = 'pending' AND queue = $1 AND available_at <= (SELECT now FROM t)
	ORDER BY priority DESC, turn, available_at, id
	LIMIT $4
),
page_b AS MATERIALIZED (
	SELECT * FROM (
		(SELECT id, key, priority, turn, available_at FROM {schema}.jobs
		 WHERE status = 'pending' AND queue = $1 AND available_at <= (SELECT now FROM t)
		   AND priority = (SELECT scan_priority FROM s)
		   AND (turn, available_at, id) > ((SELECT scan_turn FROM s), (SELECT scan_at FROM s), (SELECT scan_id FROM s))
		 ORDER BY priority DESC, turn, available_at, id
		 LIMIT $5)
		UNION ALL
		(SELECT id, key, priority, turn, available_at FROM {schema}.jobs
		 WHERE status = 'pending' AND queue = $1 AND available_at <= (SELECT now FROM t)
		   AND priority < (SELECT scan_priority FROM s)
		 ORDER BY priority DESC, turn, available_at, id
		 LIMIT $5)
	) b
	ORDER BY priority DESC, turn, available_at, id
	LIMIT $5
),
cand AS (
	SELECT * FROM page_a
	UNION ALL SELECT * FROM page_b WHERE id NOT IN (SELECT id FROM page_a)
),
-- The page in claim order, each job with its rank among its key's jobs
-- there and the lowest id of its key there. OFFSET 0 keeps the filter
-- of chosen out of this subquery, so it runs on the rows in this order.
ranked AS (
	SELECT c.*,
	       row_number() OVER (PARTITION BY c.key ORDER BY c.priority DESC, c.turn, c.available_at, c.id) AS rn,
	       min(c.id) OVER (PARTITION BY c.key) AS low
	FROM cand c
	ORDER BY c.priority DESC, c.turn, c.available_at, c.id
	OFFSET 0
),
-- Each job's key is probed as its turn comes, cheap tests first, and the
-- LIMIT stops the reading once room jobs are chosen: a claim of room
-- jobs probes about room keys, not every key of its page. Scalar probes,
-- not EXISTS, which the planner may turn into a hash of every failed or
-- held job of the queue.
chosen AS (
	SELECT r.id FROM ranked r
	WHERE r.key IS NULL OR (SELECT key_limit FROM s) IS NULL
	   OR CASE WHEN (SELECT key_ordered FROM s) THEN
	           -- The key's head is its lowest live id, so the lowest of the
	           -- page and, with nothing of the key held, of its pending jobs.
	           r.id = r.low
	           AND (SELECT 1 FROM {schema}.jobs x
	                WHERE x.queue = $1 AND x.key = r.key AND x.status <> 'pending' LIMIT 1) IS NULL
	           AND r.id = (SELECT h.id FROM {schema}.jobs h
	                       WHERE h.queue = $1 AND h.key = r.key AND h.status = 'pending' ORDER BY h.id LIMIT 1)
	           AND NOT ((SELECT key_policy FROM s) IN ('', 'hold')
	                    AND (SELECT 1 FROM {schema}.failed_jobs f WHERE f.queue = $1 AND f.key = r.key LIMIT 1) IS NOT NULL)
	        WHEN (SELECT key_limit FROM s) > 0 THEN
	           r.rn <= (SELECT key_limit FROM s)
	           AND r.rn <= (SELECT key_limit FROM s) - (SELECT count(*) FROM {schema}.jobs x
	                                                     WHERE x.queue = $1 AND x.key = r.key AND x.status <> 'pending')
	        ELSE true END
	LIMIT (SELECT n FROM room)
),
picked AS MATERIALIZED (
	SELECT j.id FROM {schema}.jobs j
	WHERE j.id IN (SELECT id FROM chosen) AND j.status = 'pending'
	  AND (j.deadline IS NULL OR j.deadline >= (SELECT now FROM t))
	FOR UPDATE SKIP LOCKED
),
claimed AS (
	UPDATE {schema}.jobs j
	SET status = 'reserved',
	    attempts = j.attempts + 1,
	    claim_token = j.claim_token + 1,
	    reserved_at = t.now,
	    lease_until = t.now + $3::bigint * interval '1 microsecond'
	FROM picked, t
	WHERE j.id = picked.id
	RETURNING ` + claimedColumns + `
),
nextscan AS (
	SELECT x.priority, x.turn, x.available_at, x.id
	FROM s LEFT JOIN LATERAL (
		SELECT y.* FROM (SELECT *, 'b' AS pg FROM page_b UNION ALL SELECT *, 'a' FROM page_a) y
		WHERE y.pg = CASE WHEN s.scan_id IS NOT NULL THEN
		                       CASE WHEN (SELECT count(*) FROM page_b) >= $5 THEN 'b' END
		                  WHEN (SELECT count(*) FROM page_a) >= $4
		                       AND (SELECT count(*) FROM claimed) < (SELECT n FROM room) THEN 'a' END
		ORDER BY y.priority, y.turn DESC, y.available_at DESC, y.id DESC
		LIMIT 1
	) x ON true
),
counted AS (
	UPDATE {schema}.queue_settings q
	SET rate_window = CASE WHEN q.rate_limit > 0 THEN a.win ELSE q.rate_window END,
	    rate_count = CASE WHEN q.rate_limit > 0 THEN a.used + (SELECT count(*) FROM claimed) ELSE q.rate_count END,
	    scan_priority = c.priority, scan_turn = c.turn, scan_at = c.available_at, scan_id = c.id
	FROM allow a, nextscan c
	WHERE q.queue = $1 AND (q.rate_limit > 0 OR q.scan_id IS DISTINCT FROM c.id)
	RETURNING 1
)
SELECT * FROM claimed`

// sqlQueueSetKeys replaces a queue's key rules, keeping its paused flag and
// limits, and forgets where the last keyed claim stopped reading (the
// rules it read under are gone).
//
//	$1 queue text, $2 key_limit int, $3 key_ordered bool, $4 key_policy text
//
// Returns nothing. settingsWrite prunes the row when nothing is left set.
const sqlQueueSetKeys = `
INSERT INTO {schema}.queue_settings (queue, key_limit, key_ordered, key_policy) VALUES ($1, $2, $3, $4)
ON CONFLICT (queue) DO UPDATE SET key_limit = excluded.key_limit, key_ordered = excluded.key_ordered,
	key_policy = excluded.key_policy, scan_priority = NULL, scan_turn = NULL, scan_at = NULL, scan_id = NULL,
	updated_at = now()`

// sqlHeldQueues names the queues whose keys can be held: ordered, under
// hold. No parameters; returns (queue text) per queue.
const sqlHeldQueues = `
SELECT queue FROM {schema}.queue_settings WHERE NOT paused AND key_ordered AND key_policy IN ('', 'hold')`

// sqlKeyList lists the keys with live or failed jobs, busiest first.
//
//	$1 queue text (NULL: every queue), $2 held only bool, $3 limit int
//
// Returns up to $3 rows: (queue text, key text, pending bigint, reserved
// bigint, failed bigint, held bool, head bigint: the lowest failed job
// id, NULL without one, head_failed_at timestamptz: when it failed). Held is what sqlClaimKeyed blocks on: an ordered
// queue under hold and a failed job of the key. It groups every keyed
// job (an operator's call, not a hot path), the pending and the held ones
// apart, each through its key index.
const sqlKeyList = `
WITH live AS (
	SELECT queue, key, sum(pending)::bigint AS pending, sum(reserved)::bigint AS reserved FROM (
		SELECT queue, key, count(*) AS pending, 0 AS reserved
		FROM {schema}.jobs WHERE key IS NOT NULL AND status = 'pending' AND ($1::text IS NULL OR queue = $1)
		GROUP BY queue, key
		UNION ALL
		SELECT queue, key, 0, count(*)
		FROM {schema}.jobs WHERE key IS NOT NULL AND status <> 'pending' AND ($1::text IS NULL OR queue = $1)
		GROUP BY queue, key
	) l
	GROUP BY queue, key
),
dead AS (
	SELECT queue, key, count(*) AS failed, min(job_id) AS head,
	       (array_agg(failed_at ORDER BY job_id))[1] AS head_failed_at
	FROM {schema}.failed_jobs WHERE key IS NOT NULL AND ($1::text IS NULL OR queue = $1)
	GROUP BY queue, key
),
k AS (
	SELECT coalesce(l.queue, d.queue) AS queue, coalesce(l.key, d.key) AS key,
	       coalesce(l.pending, 0) AS pending, coalesce(l.reserved, 0) AS reserved,
	       coalesce(d.failed, 0) AS failed, d.head, d.head_failed_at
	FROM live l FULL JOIN dead d ON d.queue = l.queue AND d.key = l.key
),
h AS (
	SELECT k.*, coalesce(s.key_ordered AND s.key_policy IN ('', 'hold') AND k.failed > 0, false) AS held
	FROM k LEFT JOIN {schema}.queue_settings s ON s.queue = k.queue
)
SELECT queue, key, pending, reserved, failed, held, head, head_failed_at FROM h
WHERE held OR NOT $2::bool
ORDER BY pending + reserved DESC, queue COLLATE "C", key COLLATE "C"
LIMIT $3`
