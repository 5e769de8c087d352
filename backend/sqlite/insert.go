package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// JobInsertMany implements backend.Backend. The whole batch is one write
// transaction: unique keys are resolved first (against live jobs and
// earlier items), then the new jobs go in as multi-row INSERTs of up to
// 500 rows. In-process subscribers of the affected queues are woken after
// the commit.
func (b *Backend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	const op = "insert jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := validateInserts(op, params); err != nil {
		return nil, err
	}
	results := make([]backend.InsertResult, len(params))
	if len(params) == 0 {
		return results, nil
	}
	now := b.now()
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		return insertTx(ctx, tx, st, params, results, now)
	})
	if err != nil {
		return nil, err
	}
	queues := make(map[string]struct{}, 1)
	for i, p := range params {
		if !results[i].Duplicate || results[i].Replaced {
			queues[p.Queue] = struct{}{}
		}
	}
	b.hub.notify(queues)
	return results, nil
}

// validateInserts refuses the whole batch on its first invalid item.
func validateInserts(op string, params []backend.InsertParams) error {
	for i, p := range params {
		if err := backend.ValidateInsert(p); err != nil {
			return fmt.Errorf("%s: item %d: %w", op, i, err)
		}
	}
	// State sets need the schema's next step (see backend.UniqueStates).
	return backend.RefuseUniqueStates(params)
}

// insertTx writes params inside tx, filling results. st holds the backend's
// prepared statements when tx is the backend's own; nil for a caller's
// transaction, whose connection those statements do not belong to.
func insertTx(ctx context.Context, tx *sql.Tx, st *stmts, params []backend.InsertParams, results []backend.InsertResult, now time.Time) error {
	if err := backend.CheckDeadlines(params, now); err != nil {
		return err
	}
	nowUS := micros(now)
	params, replaced := backend.FoldConflicts(params)
	fresh := make([]int, 0, len(params)) // indexes of params to insert
	held, err := uniqueHolders(ctx, tx, st, params)
	if err != nil {
		return err
	}
	var keys map[string]int // unique key -> index of the batch item inserting it
	var dupOf map[int]int   // duplicate item -> batch item it repeats
	for i, p := range params {
		if p.UniqueKey == "" {
			fresh = append(fresh, i)
			continue
		}
		if j, ok := keys[p.UniqueKey]; ok {
			if dupOf == nil {
				dupOf = make(map[int]int)
			}
			dupOf[i] = j
			results[i].Duplicate = true
			results[i].Replaced = replaced != nil && replaced[i]
			continue
		}
		if id, ok := held[p.UniqueKey]; ok {
			results[i] = backend.InsertResult{ID: id, Duplicate: true}
			if c, asked := backend.ConflictOf(params, i, now); asked {
				var err error
				if results[i].Replaced, err = applyConflict(ctx, tx, id, c); err != nil {
					return err
				}
			}
			continue
		}
		if keys == nil {
			keys = make(map[string]int)
		}
		keys[p.UniqueKey] = i
		fresh = append(fresh, i)
	}

	// Keyed jobs take their turns in batch order, as if inserted one by
	// one (see turns).
	var tn *turns
	args := make([]any, 0, min(len(fresh), insertChunkRows)*insertColumnsPerRow)
	for start := 0; start < len(fresh); start += insertChunkRows {
		chunk := fresh[start:min(start+insertChunkRows, len(fresh))]
		metadata, keyed := false, false
		for _, i := range chunk {
			if len(params[i].Metadata) > 0 {
				metadata = true
			}
			if params[i].Key != "" {
				keyed = true
			}
		}
		if keyed && tn == nil {
			tn = &turns{ctx: ctx, tx: tx}
		}
		if keyed {
			if err := tn.prefetch(params, chunk); err != nil {
				return err
			}
		}
		args = args[:0]
		for _, i := range chunk {
			p := params[i]
			var key any
			if p.UniqueKey != "" {
				key = p.UniqueKey
			}
			args = append(args, p.Queue, p.Type, p.Payload, int64(p.MaxAttempts), int64(p.Priority),
				micros(p.AvailableAt(now)), nowUS, key)
			switch {
			case keyed:
				var jobKey any
				var turn int64
				if p.Key != "" {
					jobKey = p.Key
					var err error
					if turn, err = tn.next(p.Queue, p.Key); err != nil {
						return err
					}
				}
				args = append(args, encodeMetadata(p.Metadata), jobKey, turn)
			case metadata:
				args = append(args, encodeMetadata(p.Metadata))
			}
		}
		var res sql.Result
		var err error
		switch stmt := st.insertStmt(len(chunk), metadata); {
		case keyed:
			// Not prepared: only chunks holding a keyed job pay its parse.
			res, err = tx.ExecContext(ctx, insertKeyedSQL(len(chunk)), args...)
		case stmt != nil:
			res, err = tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
		default:
			res, err = tx.ExecContext(ctx, insertSQL(len(chunk), metadata), args...)
		}
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
			return fmt.Errorf("inserted %d rows of %d (%v)", n, len(chunk), err)
		}
		// AUTOINCREMENT under the write lock numbers the rows of one
		// statement consecutively in VALUES order.
		first := last - int64(len(chunk)) + 1
		for k, i := range chunk {
			results[i].ID = first + int64(k)
		}
	}
	for i, j := range dupOf {
		results[i].ID = results[j].ID
	}
	return setDeadlines(ctx, tx, params, fresh, results)
}

// setDeadlines writes the deadlines of the inserted items that have one,
// a statement each after the insert, so the insert statements and the
// jobs without a deadline (nearly all) pay nothing for the column.
func setDeadlines(ctx context.Context, tx *sql.Tx, params []backend.InsertParams, fresh []int, results []backend.InsertResult) error {
	for _, i := range fresh {
		if d := params[i].Deadline; !d.IsZero() {
			if _, err := tx.ExecContext(ctx, qSetDeadline, results[i].ID, micros(d)); err != nil {
				return fmt.Errorf("set the deadline of job %d: %w", results[i].ID, err)
			}
		}
	}
	return nil
}

// uniqueHolders returns the live jobs holding the unique keys of params:
// key to job ID. The caller's write transaction keeps them from changing
// until it inserts (SQLite has one writer at a time).
func uniqueHolders(ctx context.Context, tx *sql.Tx, st *stmts, params []backend.InsertParams) (map[string]int64, error) {
	var keys []string
	for _, p := range params {
		if p.UniqueKey != "" {
			keys = append(keys, p.UniqueKey)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	arg, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("look up unique keys: %w", err)
	}
	var rows *sql.Rows
	if st != nil {
		rows, err = tx.StmtContext(ctx, st.uniqueLookup).QueryContext(ctx, string(arg))
	} else {
		rows, err = tx.QueryContext(ctx, qUniqueLookup, string(arg))
	}
	if err != nil {
		return nil, fmt.Errorf("look up unique keys: %w", err)
	}
	defer rows.Close()
	held := make(map[string]int64)
	for rows.Next() {
		var key string
		var id int64
		if err := rows.Scan(&key, &id); err != nil {
			return nil, fmt.Errorf("look up unique keys: %w", err)
		}
		held[key] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up unique keys: %w", err)
	}
	return held, nil
}

// applyConflict gives the waiting job id what c asks (qConflict) and
// reports whether it was waiting. Rare (only duplicates with a conflict
// mode), so not prepared.
func applyConflict(ctx context.Context, tx *sql.Tx, id int64, c backend.Conflict) (bool, error) {
	var limit any
	if c.DebounceMax > 0 {
		limit = int64(c.DebounceMax / time.Microsecond)
	}
	res, err := tx.ExecContext(ctx, qConflict, id, c.Payload, micros(c.DueAt), limit)
	if err != nil {
		return false, fmt.Errorf("apply the conflict mode to job %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
