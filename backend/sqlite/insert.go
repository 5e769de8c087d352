package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// JobInsertMany implements backend.Backend. The whole batch is one write
// transaction: unique keys are resolved first (against live jobs, kept
// completed ones holding their keys and earlier items), then the new jobs
// go in as multi-row INSERTs of up to 500 rows. In-process subscribers of
// the affected queues are woken after the commit.
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
	return nil
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
	var taken []int64       // holders out of their states, giving their keys up
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
		if h, ok := held[p.UniqueKey]; ok {
			if h.keeps(&params[i], now) {
				// An item repeating an earlier one's key and conflict mode
				// changed the earlier one (FoldConflicts): applied once.
				results[i] = backend.InsertResult{ID: h.id, Duplicate: true, Replaced: replaced != nil && replaced[i]}
				if c, asked := backend.ConflictOf(params, i, now); asked && !results[i].Replaced && !h.completed {
					due, ok, err := applyConflict(ctx, tx, h.id, c)
					if err != nil {
						return err
					}
					if results[i].Replaced = ok; ok {
						// A later item of the key judges the state the
						// holder is in now, as if inserted after this one.
						h.due = due
						held[p.UniqueKey] = h
					}
				}
				continue
			}
			taken = append(taken, h.id)
		}
		if keys == nil {
			keys = make(map[string]int)
		}
		keys[p.UniqueKey] = i
		fresh = append(fresh, i)
	}
	if err := takeUniqueKeys(ctx, tx, taken); err != nil {
		return err
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
	if keys != nil {
		if err := setUniqueStates(ctx, tx, params, fresh, results); err != nil {
			return err
		}
	}
	return setDeadlines(ctx, tx, params, fresh, results)
}

// takeUniqueKeys takes the unique keys of the jobs ids (holders out of
// their states, or running ones giving way to a follow-up) before the
// new jobs of those keys are inserted.
func takeUniqueKeys(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	arg, err := json.Marshal(ids)
	if err == nil {
		_, err = tx.ExecContext(ctx, qUniqueTakeover, string(arg))
	}
	if err != nil {
		return fmt.Errorf("take over %d unique keys: %w", len(ids), err)
	}
	return nil
}

// setUniqueStates writes the sets of the inserted items holding their
// unique keys in fewer than every state, a statement per distinct set,
// after the insert: the others (nearly all) leave the column NULL.
func setUniqueStates(ctx context.Context, tx *sql.Tx, params []backend.InsertParams, fresh []int, results []backend.InsertResult) error {
	var sets map[backend.UniqueStates][]int64
	for _, i := range fresh {
		if s := params[i].UniqueStates.All(); params[i].UniqueKey != "" && s != backend.UniqueAllStates {
			if sets == nil {
				sets = make(map[backend.UniqueStates][]int64)
			}
			sets[s] = append(sets[s], results[i].ID)
		}
	}
	for s, ids := range sets {
		arg, err := json.Marshal(ids)
		if err == nil {
			_, err = tx.ExecContext(ctx, qSetUniqueStates, int64(s), string(arg))
		}
		if err != nil {
			return fmt.Errorf("set the unique states %s of %d jobs: %w", s, len(ids), err)
		}
	}
	return nil
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

// holder is the job holding a unique key and what judges whether it
// keeps a new job of the key out (backend.UniqueStates.Keeps). all says
// that it holds its key in every state and no item of the batch asks
// KeepLast: it keeps every item out, whatever its state (which is then
// not read). completed says that it is a kept completed job
// (backend.UniqueCompleted): it keeps every item out, and nothing changes
// it.
type holder struct {
	id        int64
	all       bool
	completed bool
	states    backend.UniqueStates
	reserved  bool
	attempts  int
	due       time.Time
}

// keeps reports whether h keeps item p out at now.
func (h holder) keeps(p *backend.InsertParams, now time.Time) bool {
	return h.all || h.completed || h.states.Keeps(p, h.reserved, h.attempts, h.due, now)
}

// uniqueHolders returns the jobs holding the unique keys of params, live
// or completed, by key. The caller's write transaction keeps them from
// changing until it inserts (SQLite has one writer at a time).
func uniqueHolders(ctx context.Context, tx *sql.Tx, st *stmts, params []backend.InsertParams) (map[string]holder, error) {
	var keys []string
	keepLast := false
	for _, p := range params {
		if p.UniqueKey != "" {
			keys = append(keys, p.UniqueKey)
			keepLast = keepLast || p.KeepLast
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
		rows, err = tx.StmtContext(ctx, st.uniqueLookup).QueryContext(ctx, string(arg), keepLast)
	} else {
		rows, err = tx.QueryContext(ctx, qUniqueLookup, string(arg), keepLast)
	}
	if err != nil {
		return nil, fmt.Errorf("look up unique keys: %w", err)
	}
	defer rows.Close()
	held := make(map[string]holder)
	for rows.Next() {
		var key string
		var h holder
		var state sql.NullString
		var completed bool
		if err := rows.Scan(&key, &h.id, &state, &completed); err != nil {
			return nil, fmt.Errorf("look up unique keys: %w", err)
		}
		if completed {
			h.completed = true
		} else if h.all = !state.Valid; !h.all {
			if h, err = parseHolder(h.id, state.String); err != nil {
				return nil, fmt.Errorf("look up unique keys: key %q: %w", key, err)
			}
		}
		// A key has one holder, but a producer of an older build, blind
		// to completed holders, may have let a live job take one such
		// key: the completed job keeps it, as nothing takes a key over
		// from a completed holder.
		if !held[key].completed {
			held[key] = h
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up unique keys: %w", err)
	}
	return held, nil
}

// parseHolder reads the state qUniqueLookup gives of holder id: "set
// reserved attempts due", integers.
func parseHolder(id int64, state string) (holder, error) {
	f := strings.Fields(state)
	if len(f) != 4 {
		return holder{}, fmt.Errorf("holder state %q: want 4 fields", state)
	}
	var n [4]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return holder{}, fmt.Errorf("holder state %q: %w", state, err)
		}
		n[i] = v
	}
	return holder{id: id, states: backend.UniqueStates(n[0]), reserved: n[1] != 0, attempts: int(n[2]), due: fromMicros(n[3])}, nil
}

// applyConflict gives the waiting job id what c asks (qConflict) and
// reports whether it was waiting, with its new due time. Rare (only
// duplicates with a conflict mode), so not prepared.
func applyConflict(ctx context.Context, tx *sql.Tx, id int64, c backend.Conflict) (time.Time, bool, error) {
	var limit any
	if c.DebounceMax > 0 {
		limit = int64(c.DebounceMax / time.Microsecond)
	}
	var due int64
	switch err := tx.QueryRowContext(ctx, qConflict, id, c.Payload, micros(c.DueAt), limit).Scan(&due); {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("apply the conflict mode to job %d: %w", id, err)
	}
	return fromMicros(due), true, nil
}
