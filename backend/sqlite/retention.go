package sqlite

import (
	"context"
	"database/sql"
	"fmt"
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

// FinishedPrune implements backend.Retainer: one write transaction per
// chunk, so a large prune never holds the write lock for long.
func (b *Backend) FinishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	const op = "prune finished jobs"
	if err := backend.ValidatePrune(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	cutoff := micros(b.now().Add(-params.OlderThan))
	total := 0
	for {
		var n int64
		err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
			r, err := tx.ExecContext(ctx, qFinishedPrune, string(params.State), cutoff, backend.ChunkSize)
			if err != nil {
				return err
			}
			n, err = r.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < backend.ChunkSize {
			return total, nil
		}
	}
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
