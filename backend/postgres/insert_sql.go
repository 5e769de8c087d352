package postgres

import "fmt"

// The statements that insert jobs (see queries.go for the conventions),
// apart from queries.go to keep files short.

// sqlInsert inserts a batch of jobs in one statement.
//
//	$1 queue text[], $2 type text[], $3 payload text[] (JSON text),
//	$4 priority int[], $5 max_attempts int[],
//	$6 delay_us bigint[] (used where run_at is NULL),
//	$7 run_at timestamptz[] (NULL: now() + delay), $8 unique_key text[] (NULL: none),
//	$9 metadata text[] (JSON object text; NULL: none),
//	$10 unique_states smallint[] (backend.UniqueStates; NULL: every state)
//
// The arrays are parallel and must not repeat a unique key (the caller
// folds duplicates inside a batch). Returns one row per item, in input
// order: (ord bigint 1-based, id bigint, duplicate bool, due bool, then
// holderColumns, which plainInsert leaves out). A duplicate's id is the
// job holding its key, live or completed; it is NULL in the rare case
// the holder committed after this statement's snapshot, and the caller
// then retries that item. due is true for an
// inserted job available now (its queue wants a wake-up hint).
const sqlInsert = insertCTEs + `
SELECT i.ord, ` + holderID + `, ins.id IS NULL, coalesce(ins.available_at <= now(), false),
       ` + holderColumns + `
FROM input i
LEFT JOIN ins ON ins.id = i.id` + holderJoin + `
ORDER BY i.ord`

// plainInsert is stmt (sqlInsert, sqlInsertNotify or their keyed forms)
// for a batch without unique keys: the rows end after due, and no item
// is a duplicate, so nothing looks for holders, live or completed. The
// batches without unique keys, nearly all, pay nothing for the holder
// columns.
func plainInsert(stmt string) string {
	s := mustReplace(stmt, finishedFree, "")
	s = mustReplace(s, holderID, "ins.id")
	s = mustReplace(s, ",\n       "+holderColumns, "")
	return mustReplace(s, holderJoin, "")
}

// holderColumns are the last columns of sqlInsert's rows: for a
// duplicate, what judges whether its holder keeps it out
// (backend.UniqueStates.Keeps): the holder's set (NULL: every state),
// whether it is reserved, its attempts, its due time, and now(), the
// clock it is judged by. All NULL for an inserted job, and for a
// completed holder, which nothing judges (see holderID).
const holderColumns = `h.unique_states, h.reserved, h.attempts, h.available_at, h.now`

// holderJoin finds the live holder of each duplicate's key: one probe of
// jobs_unique_key per duplicate, none for an inserted job. OFFSET 0 keeps
// the planner from pulling the subquery up into a join, which it would
// then run as a hash join over a scan of every job: kept apart, it is a
// nested loop whose probe runs only when ins.id IS NULL (a one-time
// filter per row). A duplicate no live job holds is named by holderID.
const holderJoin = `
LEFT JOIN LATERAL (
	SELECT x.id, x.unique_states, x.status <> 'pending' AS reserved, x.attempts, x.available_at, now() AS now
	FROM {schema}.jobs x WHERE ins.id IS NULL AND x.unique_key = i.unique_key
	OFFSET 0
) h ON true`

// holderID is the id column of sqlInsert's rows: the inserted job, or a
// duplicate's holder, live (holderJoin) or else completed (finishedFree):
// a probe of finished_jobs_unique_held_idx, which coalesce evaluates only
// for a duplicate no live job holds. A completed holder's holder columns
// are NULL: nothing judges it, it keeps every item out.
const holderID = `coalesce(ins.id, h.id, (SELECT f.id FROM {schema}.finished_jobs f
                                         WHERE f.unique_key = i.unique_key AND f.unique_held))`

// sqlInsertNotify is sqlInsert for a caller's transaction: same parameters
// and rows, and it also sends pg_notify(channel, queue) for each queue that
// got a job due now, delivered if and when that transaction commits. The
// payload has no origin: every listener, this process's too, passes it on.
const sqlInsertNotify = insertCTEs + `,
woken AS (
	SELECT count(pg_notify({channel}, q.queue)) AS n
	FROM (SELECT DISTINCT queue FROM ins WHERE available_at <= now()) q
)
SELECT i.ord, ` + holderID + `, ins.id IS NULL, coalesce(ins.available_at <= now(), false),
       ` + holderColumns + `
FROM input i
CROSS JOIN woken
LEFT JOIN ins ON ins.id = i.id` + holderJoin + `
ORDER BY i.ord`

// sqlInsertOne inserts a single job without a unique key, the common
// Enqueue: a plain INSERT … VALUES, which the server plans in a fraction of
// the time the array form takes (that planning is most of a one-row
// insert's cost), and without ON CONFLICT's speculative insertion.
//
//	$1 queue text, $2 type text, $3 payload text (JSON text), $4 priority int,
//	$5 max_attempts int, $6 delay_us bigint (used where run_at is NULL),
//	$7 run_at timestamptz (NULL: now() + delay), $8 metadata text (JSON; NULL: none)
//
// Returns sqlInsert's row shape: (1, id, false, due).
const sqlInsertOne = `
INSERT INTO {schema}.jobs AS j (queue, type, payload, priority, max_attempts, available_at, metadata)
VALUES ($1, $2, $3::text::json, $4, $5,
        coalesce($7::timestamptz, now() + $6::bigint * interval '1 microsecond'), $8::text::jsonb)
RETURNING 1::bigint, j.id, false, j.available_at <= now()`

// insertCTEs is the common head of sqlInsert and sqlInsertNotify: ids are
// drawn in input order before inserting, so each result row can be matched
// to its item whatever order the insert returns rows in. Jobs without a
// unique key are inserted apart: ON CONFLICT makes every row a speculative
// insertion, which makes each row cost markedly more (docs/performance.md).
// A job with a unique key is not inserted while a completed job holds the
// key (finishedFree), nor while a live job does (ON CONFLICT).
const insertCTEs = `
WITH input AS MATERIALIZED (
	SELECT nextval('{schema}.jobs_id_seq') AS id, t.*
	FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[],
	            $6::bigint[], $7::timestamptz[], $8::text[], $9::text[], $10::smallint[])
	     WITH ORDINALITY AS t(queue, type, payload, priority, max_attempts,
	                          delay_us, run_at, unique_key, metadata, unique_states, ord)
),
plain AS (
	INSERT INTO {schema}.jobs AS j
	       (id, queue, type, payload, priority, max_attempts, available_at, metadata)
	SELECT id, queue, type, payload::json, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), metadata::jsonb
	FROM input
	WHERE unique_key IS NULL
	ORDER BY ord
	RETURNING j.id, j.queue, j.available_at
),
keyed AS (
	INSERT INTO {schema}.jobs AS j
	       (id, queue, type, payload, priority, max_attempts, available_at, unique_key, metadata, unique_states)
	SELECT id, queue, type, payload::json, priority, max_attempts,
	       coalesce(run_at, now() + delay_us * interval '1 microsecond'), unique_key, metadata::jsonb, unique_states
	FROM input
	WHERE unique_key IS NOT NULL` + finishedFree + `
	ORDER BY ord
	ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
	RETURNING j.id, j.queue, j.available_at
),
ins AS (
	SELECT * FROM plain UNION ALL SELECT * FROM keyed
)`

// finishedFree keeps out of the insert the rows whose unique key a
// completed job holds (backend.UniqueCompleted; see
// migrations/019_unique_completed.sql): one probe of
// finished_jobs_unique_held_idx a row with a unique key, an index of the
// held rows alone, nearly always empty. A scalar subquery, not NOT
// EXISTS: the planner would weigh an anti join, which costs a one-job
// insert a third more planning, and for a large batch may read the whole
// index. It sees the holders committed before the statement's snapshot;
// sqlUniqueRecheck, the statement after it in the same transaction,
// those it missed.
const finishedFree = `
	  AND (SELECT f.id FROM {schema}.finished_jobs f
	       WHERE f.unique_key = input.unique_key AND f.unique_held) IS NULL`

// withTakeover turns an insert statement (sqlInsert, sqlInsertNotify or
// their keyed forms) into the one of a round that takes unique keys over
// first: the holders judged out of their states (or running ones giving
// way to a KeepLast follow-up: backend.UniqueStates.Keeps) give their
// keys up, by an UPDATE that the arm inserting jobs with unique keys
// waits for, so the insert finds the keys free and jobs_unique_key still
// admits one holder a key. The old holders run on, holding no key. Its
// parameters follow the statement's own, from $n:
//
//	$n id bigint[], $n+1 reserved bool[], $n+2 attempts int[],
//	$n+3 available_at timestamptz[]
//
// the holders and the state each was judged in. A holder whose state
// changed since (claimed, retried, replaced), or whose key another insert
// took meanwhile, is left alone: its item comes back a duplicate, to be
// judged again.
func withTakeover(stmt string, n int) string {
	s := mustReplace(stmt, "\nWITH input AS MATERIALIZED (", fmt.Sprintf(`
WITH taken AS (
	UPDATE {schema}.jobs h SET unique_key = NULL
	FROM unnest($%d::bigint[], $%d::bool[], $%d::int[], $%d::timestamptz[]) AS t(id, reserved, attempts, available_at)
	WHERE h.id = t.id AND h.unique_key IS NOT NULL AND (h.status <> 'pending') = t.reserved
	  AND h.attempts = t.attempts AND h.available_at = t.available_at
	RETURNING h.id
),
input AS MATERIALIZED (`, n, n+1, n+2, n+3))
	// Referenced by the keyed arm, the UPDATE runs (as an InitPlan) before
	// it inserts a row; unreferenced, it would run after the statement.
	return mustReplace(s, "\tWHERE unique_key IS NOT NULL"+finishedFree,
		"\tWHERE unique_key IS NOT NULL AND (SELECT count(*) FROM taken) >= 0"+finishedFree)
}

// sqlConflict gives waiting jobs that hold a unique key what their
// duplicates' conflict modes ask (backend.ConflictMode): a new payload and
// due time, by the server's clock, no later than created_at + the bound
// where there is one (debounce). Running jobs, and keyed or workflow
// jobs (whose place is fixed at insert), are left alone.
//
//	$1 id bigint[], $2 payload text[], $3 delay_us bigint[] (used where
//	run_at is NULL), $4 run_at timestamptz[], $5 bound_us bigint[] (NULL:
//	none)
//
// Returns one row per job changed: (id bigint, queue text, due bool,
// available_at timestamptz).
const sqlConflict = `
UPDATE {schema}.jobs AS j
SET payload = c.payload::json,
    available_at = CASE WHEN c.bound_us IS NULL THEN c.due
                        ELSE least(c.due, j.created_at + c.bound_us * interval '1 microsecond') END
FROM (SELECT id, payload, bound_us,
             coalesce(run_at, now() + delay_us * interval '1 microsecond') AS due
      FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bigint[])
           AS t(id, payload, delay_us, run_at, bound_us)) AS c
WHERE j.id = c.id AND j.status = 'pending' AND j.key IS NULL AND j.workflow_id IS NULL
RETURNING j.id, j.queue, j.available_at <= now(), j.available_at`

// sqlReserveIDs draws ids for a COPY batch (see copyInsert): COPY returns
// nothing, so the ids are taken from the sequence first.
//
//	$1 count int
//
// Returns one row: (ids bigint[]), $1 fresh ids.
const sqlReserveIDs = `SELECT array_agg(nextval('{schema}.jobs_id_seq')) FROM generate_series(1, $1)`

// copyColumns are the jobs columns a COPY batch fills; the others take
// their defaults (pending, no attempts, available and created at now()).
// A batch in which some job has metadata adds copyMetadataColumn, so one
// without any streams no column of NULLs.
var copyColumns = []string{"id", "queue", "type", "payload", "priority", "max_attempts"}

// copyMetadataColumn is the jobs column a COPY batch with metadata adds.
const copyMetadataColumn = "metadata"
