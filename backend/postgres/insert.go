package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// rowQuerier runs a statement, scans each row into dest and calls each: it
// lets the insert code serve the pool, a pgx.Tx and a *sql.Tx alike.
type rowQuerier func(ctx context.Context, sql string, args, dest []any, each func() error) error

// pgxQuerier is what pgxRows needs: a pool, a pgx.Conn or a pgx.Tx.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgxRows adapts a pgx pool, connection or transaction.
func pgxRows(q pgxQuerier) rowQuerier {
	return func(ctx context.Context, sql string, args, dest []any, each func() error) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, dest, each)
		return err
	}
}

// sqlRows adapts a database/sql transaction (pgx stdlib driver).
func sqlRows(tx *sql.Tx) rowQuerier {
	return func(ctx context.Context, query string, args, dest []any, each func() error) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if err := each(); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// JobInsertMany implements backend.Backend: one multi-row INSERT fed by
// arrays (unnest), so a batch of any size costs one round trip. Jobs due at
// once wake subscribers through NOTIFY (and this process's directly).
//
// A batch is all or nothing however a call fails, a lost reply included: a
// single statement commits alone, COPY and batches that may take several
// statements (see insertRounds) run in one transaction, and do retries
// only what rolled back or was never sent.
func (b *Backend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if err := b.checkOpen("insert jobs"); err != nil {
		return nil, err
	}
	if err := validateInserts(params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return []backend.InsertResult{}, nil
	}
	var results []backend.InsertResult
	var due []string
	err := b.do(ctx, "insert jobs", func(ctx context.Context) error {
		var err error
		switch {
		case copyable(params):
			err = b.inTx(ctx, func(tx pgx.Tx) error {
				var err error
				results, due, err = b.copyInsert(ctx, tx, params)
				return err
			})
		case mayTakeRounds(params) || hasDeadline(params):
			err = b.inTx(ctx, func(tx pgx.Tx) error {
				var err error
				results, due, err = b.insert(ctx, pgxRows(tx), tx, b.q.insert, "", params)
				return err
			})
		default:
			results, due, err = b.insert(ctx, pgxRows(b.pool), b.pool, b.q.insert, b.q.insertOne, params)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	b.wake(due)
	return results, nil
}

// validateInserts checks every item before anything is written.
func validateInserts(params []backend.InsertParams) error {
	for i, p := range params {
		if err := backend.ValidateInsert(p); err != nil {
			return fmt.Errorf("insert job %d: %w", i, err)
		}
	}
	return nil
}

// hasDeadline reports whether an item of params has a deadline: such a
// batch runs in a transaction (the deadlines are set by a statement
// after the insert, see setDeadlines) and never through COPY.
func hasDeadline(params []backend.InsertParams) bool {
	return slices.ContainsFunc(params, func(p backend.InsertParams) bool { return !p.Deadline.IsZero() })
}

// checkDeadlines checks the items' deadlines against the database's
// clock (now(): the insert's transaction time, the one its due times
// are computed from) before anything is written.
func (b *Backend) checkDeadlines(ctx context.Context, query rowQuerier, params []backend.InsertParams) error {
	var now time.Time
	if err := query(ctx, `SELECT now()`, nil, []any{&now}, func() error { return nil }); err != nil {
		return err
	}
	return backend.CheckDeadlines(params, now)
}

// setDeadlines gives the jobs the items inserted (not the duplicates)
// their deadlines, through query, in the insert's transaction.
func (b *Backend) setDeadlines(ctx context.Context, query rowQuerier, params []backend.InsertParams, results []backend.InsertResult) error {
	var ids []int64
	var at []time.Time
	for i, p := range params {
		if !p.Deadline.IsZero() && !results[i].Duplicate {
			ids, at = append(ids, results[i].ID), append(at, p.Deadline)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var id int64
	n := 0
	err := query(ctx, b.q.setDeadlines, []any{ids, at}, []any{&id}, func() error { n++; return nil })
	if err == nil && n != len(ids) {
		err = fmt.Errorf("set %d deadlines of %d", n, len(ids))
	}
	if err != nil {
		return fmt.Errorf("set deadlines: %w", err)
	}
	return nil
}

// mayTakeRounds reports whether an insert of params outside a transaction
// could commit part of the batch and still fail: a second round (see
// insert) comes after the first committed its jobs, so its error, a lost
// reply or one do retries by running the whole insert again, would leave
// those jobs in or insert them twice. Only an item with a unique key can
// need a second round, and a batch of one item commits nothing in a round
// that leaves it for the next. Such batches run in a transaction, which
// costs them a round trip for BEGIN and one for COMMIT.
func mayTakeRounds(params []backend.InsertParams) bool {
	return len(params) > 1 && slices.ContainsFunc(params, func(p backend.InsertParams) bool { return p.UniqueKey != "" })
}

// insert runs stmt (sqlInsert or sqlInsertNotify) through query, or
// stmtOne (sqlInsertOne) when non-empty and a single item without a unique
// key is to be sent, and returns the results and the queues that got a
// job due now. Items repeating a unique key of an earlier item in the
// batch are not sent: they take the earlier item's ID as duplicates,
// unless the earlier item was a duplicate whose holder does not keep them
// out (see refollow). batch is query's pool or transaction when it is
// the backend's own, nil in a caller's: a round with unique keys is
// followed by sqlUniqueRecheck, pipelined on batch when there is one
// (see insertChecked).
func (b *Backend) insert(ctx context.Context, query rowQuerier, batch batchSender, stmt, stmtOne string, params []backend.InsertParams) ([]backend.InsertResult, []string, error) {
	deadlines := hasDeadline(params)
	if deadlines {
		if err := b.checkDeadlines(ctx, query, params); err != nil {
			return nil, nil, err
		}
	}
	params, replaced := backend.FoldConflicts(params)
	in := &inserter{
		b: b, query: query, batch: batch, stmt: stmt, stmtOne: stmtOne, params: params,
		keyed:     slices.ContainsFunc(params, func(p backend.InsertParams) bool { return p.Key != "" }),
		unique:    slices.ContainsFunc(params, func(p backend.InsertParams) bool { return p.UniqueKey != "" }),
		results:   make([]backend.InsertResult, len(params)),
		dueQueues: map[string]bool{},
	}
	firstWithKey := map[string]int{}
	var send []int // indexes into params
	var followers [][2]int
	for i, p := range params {
		if p.UniqueKey != "" {
			if first, dup := firstWithKey[p.UniqueKey]; dup {
				followers = append(followers, [2]int{i, first})
				continue
			}
			firstWithKey[p.UniqueKey] = i
		}
		send = append(send, i)
	}
	if err := in.rounds(ctx, send, nil); err != nil {
		return nil, nil, err
	}
	results := in.results
	for _, f := range followers {
		results[f[0]] = backend.InsertResult{ID: results[f[1]].ID, Duplicate: true, Replaced: replaced != nil && replaced[f[0]]}
	}
	woken, moved, err := b.applyConflicts(ctx, query, params, results, nil)
	if err != nil {
		return nil, nil, err
	}
	in.wake(woken)
	if len(followers) > 0 {
		if err := in.refollow(ctx, followers, moved); err != nil {
			return nil, nil, err
		}
	}
	if deadlines {
		if err := b.setDeadlines(ctx, query, params, results); err != nil {
			return nil, nil, err
		}
	}
	return results, in.queues, nil
}

// applyConflicts gives the stored jobs that the duplicates among results
// name what the duplicates' conflict modes ask (sqlConflict), marking
// those it changed Replaced, and returns the queues of those now due. Only
// a duplicate with a conflict mode costs this statement: after the insert,
// in the caller's transaction when there is one; otherwise on its own,
// which is safe to repeat (a retried insert finds the same holder) and
// answers "not replaced" for a holder claimed in between, as it would
// have been a moment later.
//
// It considers the items only (all when nil), and returns, by job ID, the
// due times of the jobs it changed.
func (b *Backend) applyConflicts(ctx context.Context, query rowQuerier, params []backend.InsertParams, results []backend.InsertResult, only []int) ([]string, map[int64]time.Time, error) {
	var ids, delays []int64
	var payloads []string
	var runAt []pgtype.Timestamptz
	var boundSet []pgtype.Int8
	items := map[int64][]int{}
	for i, p := range params {
		if only != nil && !slices.Contains(only, i) {
			continue
		}
		if !results[i].Duplicate || results[i].Replaced || p.OnConflict == backend.ConflictSkip {
			continue
		}
		id := results[i].ID
		if _, seen := items[id]; !seen {
			delay, at, bound := p.Delay, p.RunAt, pgtype.Int8{}
			if p.OnConflict == backend.ConflictDebounce {
				delay, at, bound = p.Debounce, time.Time{}, pgtype.Int8{Int64: micros(p.DebounceMax), Valid: true}
			}
			ids, payloads, delays = append(ids, id), append(payloads, string(p.Payload)), append(delays, micros(delay))
			runAt = append(runAt, pgtype.Timestamptz{Time: at, Valid: !at.IsZero()})
			boundSet = append(boundSet, bound)
		}
		items[id] = append(items[id], i)
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	var (
		id    int64
		queue string
		due   bool
		at    time.Time
		woken []string
		moved = map[int64]time.Time{}
	)
	err := query(ctx, b.q.conflict, []any{ids, payloads, delays, runAt, boundSet}, []any{&id, &queue, &due, &at}, func() error {
		for _, i := range items[id] {
			results[i].Replaced = true
		}
		moved[id] = at
		if due {
			woken = append(woken, queue)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("apply conflict modes: %w", err)
	}
	return woken, moved, nil
}

// insertArgs builds sqlInsert's parallel arrays for params[idx...].
func insertArgs(params []backend.InsertParams, idx []int) []any {
	n := len(idx)
	queues := make([]string, n)
	types := make([]string, n)
	payloads := make([]string, n)
	priorities := make([]int32, n)
	maxAttempts := make([]int32, n)
	delays := make([]int64, n)
	runAt := make([]pgtype.Timestamptz, n)
	keys := make([]pgtype.Text, n)
	var metadata []pgtype.Text // NULL, which unnest pads with NULLs, unless some job has metadata
	var states []pgtype.Int2   // NULL (every state) unless some job has a smaller set
	for j, i := range idx {
		p := params[i]
		queues[j] = p.Queue
		types[j] = p.Type
		payloads[j] = string(p.Payload)
		priorities[j] = int32(p.Priority)
		maxAttempts[j] = int32(p.MaxAttempts)
		delays[j] = micros(p.Delay)
		runAt[j] = pgtype.Timestamptz{Time: p.RunAt, Valid: !p.RunAt.IsZero()}
		keys[j] = pgtype.Text{String: p.UniqueKey, Valid: p.UniqueKey != ""}
		if len(p.Metadata) > 0 {
			if metadata == nil {
				metadata = make([]pgtype.Text, n)
			}
			metadata[j] = encodeMetadata(p.Metadata)
		}
		if s := p.UniqueStates.All(); p.UniqueKey != "" && s != backend.UniqueAllStates {
			if states == nil {
				states = make([]pgtype.Int2, n)
			}
			states[j] = pgtype.Int2{Int16: int16(s), Valid: true}
		}
	}
	return []any{queues, types, payloads, priorities, maxAttempts, delays, runAt, keys, metadata, states}
}

// keyArg builds sqlInsertKeyed's $11, the keys of params[idx...].
func keyArg(params []backend.InsertParams, idx []int) []pgtype.Text {
	keys := make([]pgtype.Text, len(idx))
	for j, i := range idx {
		keys[j] = pgtype.Text{String: params[i].Key, Valid: params[i].Key != ""}
	}
	return keys
}

// insertOneArgs builds sqlInsertOne's parameters.
func insertOneArgs(p backend.InsertParams) []any {
	var metadata any // NULL
	if len(p.Metadata) > 0 {
		metadata = encodeMetadata(p.Metadata)
	}
	return []any{p.Queue, p.Type, string(p.Payload), int32(p.Priority), int32(p.MaxAttempts),
		micros(p.Delay), pgtype.Timestamptz{Time: p.RunAt, Valid: !p.RunAt.IsZero()}, metadata}
}

// copyMinRows is the batch size from which COPY beats the one-statement
// insert: below it, COPY's extra round trips (begin, ids, copy, commit)
// cost more than they save.
const copyMinRows = 64

// copyable reports whether a batch can go through COPY: large, due now
// (COPY cannot compute now() + delay on the server), without unique keys
// (COPY has no ON CONFLICT) and without keys.
func copyable(params []backend.InsertParams) bool {
	if len(params) < copyMinRows {
		return false
	}
	for _, p := range params {
		// A keyed job's turn is computed by the statement (see keyTurns).
		if p.UniqueKey != "" || p.Key != "" || p.Delay != 0 || !p.RunAt.IsZero() || !p.Deadline.IsZero() {
			return false
		}
	}
	return true
}

// copyInsert inserts a batch with COPY in the transaction tx: ids are
// drawn first (COPY returns nothing), then the rows stream in binary,
// which the server parses much faster than an unnest of arrays
// (BenchmarkInsertBatch1000 against BenchmarkBaselineInsertBatch1000).
func (b *Backend) copyInsert(ctx context.Context, tx pgx.Tx, params []backend.InsertParams) ([]backend.InsertResult, []string, error) {
	var ids []int64
	if err := tx.QueryRow(ctx, b.q.reserveIDs, len(params)).Scan(&ids); err != nil {
		return nil, nil, err
	}
	slices.Sort(ids) // so ids increase in input order, as a plain insert's do
	columns := copyColumns
	withMetadata := slices.ContainsFunc(params, func(p backend.InsertParams) bool { return len(p.Metadata) > 0 })
	if withMetadata {
		columns = append(slices.Clip(copyColumns), copyMetadataColumn)
	}
	rows := make([][]any, len(params))
	results := make([]backend.InsertResult, len(params))
	seen := map[string]bool{}
	var queues []string
	for i, p := range params {
		rows[i] = []any{ids[i], p.Queue, p.Type, json.RawMessage(p.Payload), p.Priority, p.MaxAttempts}
		if withMetadata {
			var metadata any // NULL
			if m := encodeMetadata(p.Metadata); m.Valid {
				metadata = json.RawMessage(m.String)
			}
			rows[i] = append(rows[i], metadata)
		}
		results[i] = backend.InsertResult{ID: ids[i]}
		if !seen[p.Queue] {
			seen[p.Queue] = true
			queues = append(queues, p.Queue)
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{b.opts.Schema, "jobs"}, columns, pgx.CopyFromRows(rows)); err != nil {
		return nil, nil, err
	}
	return results, queues, nil
}
