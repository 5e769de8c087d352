package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jobq/jobq/backend"
)

var _ backend.Retainer = (*Backend)(nil)

// FinishedList implements backend.Retainer on the read connections.
func (b *Backend) FinishedList(ctx context.Context, params backend.FinishedListParams) ([]*backend.FinishedJob, error) {
	const op = "list finished jobs"
	limit, err := backend.ValidateFinishedList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	where, args := listWhere([]string{"state = ?"}, []any{string(params.State)}, params.Filter, "finished_at", params.BeforeID)
	return listRows(ctx, b, op, finishedListSQL(where, params.Results), append(args, limit), scanFinished)
}

func scanFinished(s scanner) (*backend.FinishedJob, error) {
	var (
		f                      backend.FinishedJob
		state                  string
		attempts, maxAtt, prio int64
		uniqueKey, metadata    sql.NullString
		key                    sql.NullString
		created, finished      int64
	)
	if err := s.Scan(&f.ID, &state, &f.Queue, &f.Type, &f.Payload, &attempts, &maxAtt, &prio,
		&f.LastError, &uniqueKey, &metadata, &created, &finished, &key, &f.Result); err != nil {
		return nil, err
	}
	md, err := decodeMetadata(metadata.String, metadata.Valid)
	if err != nil {
		return nil, err
	}
	f.Metadata = md
	f.State = backend.JobState(state)
	f.Attempts, f.MaxAttempts, f.Priority = int(attempts), int(maxAtt), int(prio)
	f.UniqueKey = uniqueKey.String
	f.Key = key.String
	f.CreatedAt = fromMicros(created)
	f.FinishedAt = fromMicros(finished)
	return &f, nil
}

// FinishedPrune implements backend.Retainer: one statement per age
// (backend.PruneAges), one write transaction per chunk, so a large prune
// never holds the write lock for long; a prune by type finds each chunk
// on a read connection first.
func (b *Backend) FinishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	const op = "prune finished jobs"
	if err := backend.ValidatePrune(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	now := b.now()
	total := 0
	for _, a := range backend.PruneAges(params) {
		n, err := b.pruneAge(ctx, op, params.State, a, micros(now.Add(-a.OlderThan)))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneAge deletes the jobs of state that a covers and that finished
// before cutoff, chunk by chunk.
func (b *Backend) pruneAge(ctx context.Context, op string, state backend.JobState, a backend.PruneAge, cutoff int64) (int, error) {
	if a.Rest && len(a.Except) == 0 {
		// Every type: no row to skip, the plain prune.
		total := 0
		for {
			n, err := b.pruneChunk(ctx, op, func(tx *sql.Tx) (int64, error) {
				r, err := tx.ExecContext(ctx, qFinishedPrune, string(state), cutoff, backend.ChunkSize)
				if err != nil {
					return 0, err
				}
				return r.RowsAffected()
			})
			total += n
			if err != nil || n < backend.ChunkSize {
				return total, err
			}
		}
	}
	query, types := qFinishedPruneTypes, a.Types
	if a.Rest {
		query, types = qFinishedPruneExcept, a.Except
	}
	list, err := json.Marshal(types)
	if err != nil {
		return 0, fmt.Errorf("%s: encode types: %w", op, err)
	}
	from := int64(math.MinInt64)
	total := 0
	for {
		ids, last, err := b.pruneScan(ctx, op, query, string(state), cutoff, string(list), from)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		idList, err := json.Marshal(ids)
		if err != nil {
			return total, fmt.Errorf("%s: encode IDs: %w", op, err)
		}
		n, err := b.pruneChunk(ctx, op, func(tx *sql.Tx) (int64, error) {
			r, err := tx.ExecContext(ctx, qFinishedPruneIDs, string(idList), string(state), cutoff)
			if err != nil {
				return 0, err
			}
			return r.RowsAffected()
		})
		total += n
		if err != nil || len(ids) < backend.ChunkSize {
			return total, err
		}
		from = last
	}
}

// pruneScan reads on a read connection the IDs of the next chunk of a
// prune by type (query: qFinishedPruneTypes or qFinishedPruneExcept), and
// the latest finished_at among them.
func (b *Backend) pruneScan(ctx context.Context, op, query, state string, cutoff int64, types string, from int64) ([]int64, int64, error) {
	rows, err := b.r.QueryContext(ctx, query, state, cutoff, backend.ChunkSize, types, from)
	if err != nil {
		return nil, 0, b.mapErr(ctx, op, err)
	}
	defer rows.Close()
	var ids []int64
	last := from
	for rows.Next() {
		var id, at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, 0, b.mapErr(ctx, op, err)
		}
		ids = append(ids, id)
		last = max(last, at)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, b.mapErr(ctx, op, err)
	}
	return ids, last, nil
}

// pruneChunk runs one chunk of a prune, del, in a write transaction of
// its own and returns how many it deleted: none when it failed.
func (b *Backend) pruneChunk(ctx context.Context, op string, del func(*sql.Tx) (int64, error)) (int, error) {
	var n int64
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		var err error
		n, err = del(tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// JobList implements backend.Retainer on the read connections.
func (b *Backend) JobList(ctx context.Context, params backend.JobListParams) ([]*backend.JobRow, error) {
	const op = "list jobs"
	limit, err := backend.ValidateJobList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	now := micros(b.now())
	var terms []string
	var args []any
	at := "available_at"
	switch params.State {
	case backend.StatePending:
		terms, args = []string{"status = 'pending'", "available_at <= ?"}, []any{now}
	case backend.StateScheduled:
		terms, args = []string{"status = 'pending'", "available_at > ?"}, []any{now}
	case backend.StateReserved:
		terms, at = []string{"status = 'reserved'"}, "reserved_at"
	}
	where, args := listWhere(terms, args, params.Filter, at, params.BeforeID)
	return listRows(ctx, b, op, jobListSQL(where), append(args, limit), scanJob)
}

// PruneTurn implements backend.Retainer with a row of jobq_turns, so the
// worker processes sharing the file prune one at a time.
func (b *Backend) PruneTurn(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	const op = "take prune turn"
	if err := backend.ValidatePruneTurn(holder, ttl); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	now := b.now()
	var n int64
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		r, err := tx.ExecContext(ctx, qPruneTurn, holder, micros(now.Add(ttl)), micros(now))
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n == 1, err
}
