package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jobq/jobq/backend"
)

// FailedList implements backend.Backend on the read connections.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	const op = "list failed jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	where, args := failedWhere(params.Filter, params.BeforeID)
	rows, err := b.r.QueryContext(ctx, failedListSQL(where), append(args, int64(limit))...)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	defer rows.Close()
	out := make([]*backend.FailedJob, 0, min(limit, 64))
	for rows.Next() {
		f, err := scanFailed(rows)
		if err != nil {
			return nil, b.mapErr(ctx, op, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// FailedGet implements backend.Backend on the read connections.
func (b *Backend) FailedGet(ctx context.Context, id int64) (*backend.FailedJob, error) {
	op := fmt.Sprintf("get failed job %d", id)
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	st, err := b.statements(ctx)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	f, err := scanFailed(st.failedGet.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return f, nil
}

// FailedReplay implements backend.Backend in one write transaction: each
// selected failed job is re-inserted under its original ID unless a live job
// holds its unique key, and its failed_jobs row deleted. An unknown ID in
// params.IDs rolls the whole call back with ErrNotFound.
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	const op = "replay failed jobs"
	var res backend.ReplayResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	now := micros(b.now())
	woken := map[string]struct{}{}
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res = backend.ReplayResult{}
		clear(woken)
		ids := slices.Compact(slices.Sorted(slices.Values(params.IDs)))
		if len(ids) == 0 {
			var err error
			if ids, err = matchingFailedIDs(ctx, tx, params.Filter); err != nil {
				return err
			}
		}
		replay, del, exists := tx.StmtContext(ctx, st.replay), tx.StmtContext(ctx, st.failedDelete), tx.StmtContext(ctx, st.failedExists)
		for _, id := range ids {
			var queue string
			err := replay.QueryRowContext(ctx, id, now).Scan(&queue)
			if errors.Is(err, sql.ErrNoRows) {
				var one int
				switch err := exists.QueryRowContext(ctx, id).Scan(&one); {
				case errors.Is(err, sql.ErrNoRows):
					return fmt.Errorf("failed job %d: %w", id, backend.ErrNotFound)
				case err != nil:
					return err
				}
				res.Skipped++
				continue
			}
			if err != nil {
				return err
			}
			if _, err := del.ExecContext(ctx, id); err != nil {
				return err
			}
			res.Replayed++
			woken[queue] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return backend.ReplayResult{}, err
	}
	b.hub.notify(woken)
	return res, nil
}

// FailedPurge implements backend.Backend in one write transaction. Listed
// IDs that do not exist are not counted and are not an error.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	const op = "purge failed jobs"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	if err := backend.ValidatePurge(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	purged := 0
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		purged = 0
		if len(params.IDs) == 0 {
			where, args := failedWhere(params.Filter, 0)
			query := failedPurgeSQL(where)
			if params.KeepNewest > 0 {
				query = failedPurgeKeepSQL(where)
				args = append(append(args, args...), int64(params.KeepNewest-1))
			}
			r, err := tx.ExecContext(ctx, query, args...)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			purged = int(n)
			return err
		}
		del := tx.StmtContext(ctx, st.failedDelete)
		for _, id := range params.IDs {
			r, err := del.ExecContext(ctx, id)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			purged += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return purged, nil
}

// matchingFailedIDs lists the failed job IDs matching f, oldest first.
func matchingFailedIDs(ctx context.Context, tx *sql.Tx, f backend.FailedFilter) ([]int64, error) {
	where, args := failedWhere(f, 0)
	rows, err := tx.QueryContext(ctx, failedIDsSQL(where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// scanFailed reads one row of failedColumns.
func scanFailed(s scanner) (*backend.FailedJob, error) {
	var (
		f                      backend.FailedJob
		attempts, maxAtt, prio int64
		uniqueKey              sql.NullString
		created, failed        int64
	)
	if err := s.Scan(&f.ID, &f.JobID, &f.Queue, &f.Type, &f.Payload, &attempts, &maxAtt, &prio,
		&f.Error, &uniqueKey, &created, &failed); err != nil {
		return nil, err
	}
	f.Attempts, f.MaxAttempts, f.Priority = int(attempts), int(maxAtt), int(prio)
	f.UniqueKey = uniqueKey.String
	f.CreatedAt = fromMicros(created)
	f.FailedAt = fromMicros(failed)
	return &f, nil
}
