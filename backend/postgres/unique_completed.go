package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// Completed holders of unique keys (backend.UniqueCompleted; see
// migrations/019_unique_completed.sql for the column and its index).
//
// A kept completion of a job that keeps its key marks its finished row
// (keepsCompleted), and from then on inserts and replays of the key are
// kept out by two looks at finished_jobs, both in the transaction that
// writes the job:
//
//   - the statement that inserts (finishedFree, and holderID naming
//     the holder; the replay's own clause) sees the holders committed
//     before its snapshot;
//   - a statement after it (sqlUniqueRecheck; sqlUniqueHeld for a
//     replay) sees those it missed.
//
// The second is needed because a completion moves its job from jobs to
// finished_jobs in one transaction while an insert of the key may be
// running. Under READ COMMITTED the insert, finding the job's
// jobs_unique_key entry deleted by a transaction not yet committed, waits
// for it (ON CONFLICT, or the takeover's UPDATE); once it commits the
// entry is dead, and the insert goes on and inserts its row. The
// statement's snapshot predates that commit, so its look at finished_jobs
// missed the finished row (so does one whose completion committed after
// its snapshot but before its ON CONFLICT check, without a wait). Either
// way the completion committed before the insert statement ended, so the
// next statement of the transaction, under READ COMMITTED a fresh
// snapshot, sees it. And no completion committing later can make a
// holder of a key the insert wrote: only the job holding the key in jobs
// can, and that is the inserted job itself until the insert's
// transaction ends (a job of the key that an uncommitted transaction
// deleted makes the insert wait, as above). So a key that the second
// look finds free stays free of completed holders for as long as the
// inserted job holds it, and one it finds held undoes the insert before
// anything commits: the inserted jobs are deleted and answered as
// duplicates of the holder (a replay rolls back and runs again, and then
// leaves the job failed).

// sqlUniqueRecheck deletes the jobs an insert just wrote whose unique key
// a completed job holds (see above), in the insert's transaction, after
// its statement.
//
//	$1 unique_key text[] (the keys the insert statement sent),
//	$2 id bigint[] (the jobs it inserted; NULL: the rows the
//	transaction wrote, by xmin)
//
// Returns (id bigint, holder bigint) per job deleted. It reads
// finished_jobs_unique_held_idx, one probe a key, and jobs only for the
// keys a completed job holds (the array of them, an InitPlan, nearly
// always empty), through jobs_unique_key_idx, or jobs_pkey for the IDs.
// One table in its FROM and no CTE keep its planning short, and the keys
// read through ARRAY(SELECT unnest($1)), which the planner cannot see
// into, make every custom plan cost what the generic one does: after its
// first executions on a connection the server runs the generic plan and
// plans it no more (with the array in sight, the custom plans of a batch
// of one key looked cheaper, and each execution planned anew). With $2 NULL it must run in a
// transaction of the backend's own, with no savepoint (every row it
// wrote then has its xid as xmin), and it can then be pipelined with the
// insert, its IDs not yet known: a row of the key that a committed
// transaction wrote is not the insert's, and stays.
// txid_current_if_assigned (rather than PostgreSQL 13's
// pg_current_xact_id_if_assigned) keeps older servers in; read modulo
// 2^32, it is the xid xmin shows, and NULL when the transaction wrote
// nothing.
const sqlUniqueRecheck = `
DELETE FROM {schema}.jobs j
WHERE j.unique_key = ANY(ARRAY(SELECT f.unique_key FROM {schema}.finished_jobs f
                               WHERE f.unique_key = ANY(ARRAY(SELECT unnest($1::text[]))) AND f.unique_held))
  AND CASE WHEN $2::bigint[] IS NULL
           THEN j.xmin::text::bigint = txid_current_if_assigned() % 4294967296
           ELSE j.id = ANY($2::bigint[]) END
RETURNING j.id, (SELECT f.id FROM {schema}.finished_jobs f WHERE f.unique_key = j.unique_key AND f.unique_held)`

// sqlUniqueHeld tells whether a completed job holds one of the unique
// keys of the jobs a replay moved back (replayTail's last column): the
// replay's second look (see above), in its transaction.
//
//	$1 unique_key text[]
//
// Returns one row: (held bool).
const sqlUniqueHeld = `
SELECT EXISTS (SELECT 1 FROM {schema}.finished_jobs f
               WHERE f.unique_key = ANY($1::text[]) AND f.unique_held)`

// errKeyRace: a job completed and kept the unique key of a job a replay
// moved back, after the replay statement's snapshot. The transaction
// rolls back and runs again (retryRace), and then leaves the failed job
// where it is.
var errKeyRace = errors.New("a completed job took the unique key of a job being replayed")

// checkReplayKeys is a replay's second look (see above) at keys, the
// unique keys of the jobs it moved back, through tx: errKeyRace when a
// completed job holds one of them.
func (b *Backend) checkReplayKeys(ctx context.Context, tx pgx.Tx, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	var held bool
	if err := tx.QueryRow(ctx, b.rq.uniqueHeld, keys).Scan(&held); err != nil {
		return fmt.Errorf("look for completed holders of replayed keys: %w", err)
	}
	if held {
		return errKeyRace
	}
	return nil
}

// insertChecked runs an insert round's statement (sql, args, dest and
// each as for rowQuerier) whose items send include some with unique keys,
// keys, followed by sqlUniqueRecheck in the same transaction: pipelined
// on in.batch when the transaction is the backend's own, after it (with
// the IDs it inserted) in a caller's. The items whose jobs the recheck
// deleted become duplicates of the completed holders.
func (in *inserter) insertChecked(ctx context.Context, sql string, args, dest []any, each func() error, send []int, keys []string) error {
	var gone, holder int64
	moved := map[int64]int64{}
	got := func() error {
		moved[gone] = holder
		return nil
	}
	recheck := queued{sql: in.b.rq.uniqueRecheck, dest: []any{&gone, &holder}, each: got}
	if in.batch != nil {
		recheck.args = []any{keys, []int64(nil)}
		if err := sendBatch(ctx, in.batch, []queued{{sql: sql, args: args, dest: dest, each: each}, recheck}); err != nil {
			return err
		}
	} else {
		if err := in.query(ctx, sql, args, dest, each); err != nil {
			return err
		}
		var ids []int64
		for _, i := range send {
			if r := in.results[i]; in.params[i].UniqueKey != "" && r.ID != 0 && !r.Duplicate {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		recheck.args = []any{keys, ids}
		if err := in.query(ctx, recheck.sql, recheck.args, recheck.dest, recheck.each); err != nil {
			return fmt.Errorf("recheck completed holders: %w", err)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	for _, i := range send {
		if r := in.results[i]; !r.Duplicate {
			if h, ok := moved[r.ID]; ok {
				in.results[i] = backend.InsertResult{ID: h, Duplicate: true}
			}
		}
	}
	return nil
}
