package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// FailedList implements backend.Backend.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	before := pgtype.Int8{Int64: params.BeforeID, Valid: params.BeforeID > 0}
	queue, typ, failedBefore := filterArgs(params.Filter)
	var jobs []*backend.FailedJob
	err = b.do(ctx, "list failed jobs", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, b.q.failedList, queue, typ, failedBefore, before, limit)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, scanFailed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// FailedGet implements backend.Backend.
func (b *Backend) FailedGet(ctx context.Context, id int64) (*backend.FailedJob, error) {
	return getOne(ctx, b, fmt.Sprintf("get failed job %d", id), b.q.failedGet, id, scanFailed)
}

// FailedReplay implements backend.Backend in one transaction: when listed
// IDs are missing it rolls back and returns backend.ErrNotFound, replaying
// none of them.
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	ids := distinctIDs(params.IDs)
	queue, typ, failedBefore := filterArgs(params.Filter)
	var res backend.ReplayResult
	var due []string
	err := b.do(ctx, "replay failed jobs", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var matched, replayed int64
			err := tx.QueryRow(ctx, b.q.failedReplay, ids, queue, typ, failedBefore).
				Scan(&matched, &replayed, &due)
			if err != nil {
				return err
			}
			if ids != nil && int(matched) < len(ids) {
				return fmt.Errorf("%d of %d failed jobs: %w", len(ids)-int(matched), len(ids), backend.ErrNotFound)
			}
			res = backend.ReplayResult{Replayed: int(replayed), Skipped: int(matched - replayed)}
			return nil
		})
	})
	if err != nil {
		return backend.ReplayResult{}, err
	}
	b.wake(due)
	return res, nil
}

// FailedPurge implements backend.Backend in one statement.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	const op = "purge failed jobs"
	if err := backend.ValidatePurge(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	ids := distinctIDs(params.IDs)
	queue, typ, failedBefore := filterArgs(params.Filter)
	var n int64
	err := b.do(ctx, op, func(ctx context.Context) error {
		var tag pgconn.CommandTag
		var err error
		if params.KeepNewest > 0 {
			tag, err = b.pool.Exec(ctx, b.q.failedKeep, queue, typ, failedBefore, params.KeepNewest)
		} else {
			tag, err = b.pool.Exec(ctx, b.q.failedPurge, ids, queue, typ, failedBefore)
		}
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// filterArgs turns a filter into the nullable parameters the failed_jobs
// statements take (NULL matches everything).
func filterArgs(f backend.FailedFilter) (queue, typ pgtype.Text, failedBefore pgtype.Timestamptz) {
	return pgtype.Text{String: f.Queue, Valid: f.Queue != ""},
		pgtype.Text{String: f.Type, Valid: f.Type != ""},
		pgtype.Timestamptz{Time: f.FailedBefore, Valid: !f.FailedBefore.IsZero()}
}

// distinctIDs drops repeats; nil for none, which the statements read as
// "use the filter".
func distinctIDs(ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// scanFailed reads one row of failedColumns.
func scanFailed(row pgx.CollectableRow) (*backend.FailedJob, error) {
	var (
		f         backend.FailedJob
		uniqueKey pgtype.Text
	)
	err := row.Scan(&f.ID, &f.JobID, &f.Queue, &f.Type, &f.Payload, &f.Attempts, &f.MaxAttempts,
		&f.Priority, &f.Error, &uniqueKey, &f.CreatedAt, &f.FailedAt)
	if err != nil {
		return nil, err
	}
	f.UniqueKey = uniqueKey.String
	return &f, nil
}
