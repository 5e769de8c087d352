package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"

	"github.com/jobq/jobq/backend"
)

// JobClaim implements backend.Backend with one UPDATE ... RETURNING
// statement in a write transaction: SQLite holds the write lock from BEGIN
// IMMEDIATE to COMMIT, so the select and the reservation are one atomic
// step even across processes sharing the file.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	const op = "claim jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	queues := slices.Clone(params.Queues)
	slices.Sort(queues)
	queues = slices.Compact(queues)

	now := b.now()
	args := make([]any, 0, 3+len(queues))
	args = append(args, micros(now), micros(now.Add(params.Lease)), int64(params.Max))
	for _, q := range queues {
		args = append(args, q)
	}
	// Prepared before the transaction: it holds the only write connection.
	st, err := b.statements(ctx)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	stmt, owned, err := st.claimStmt(ctx, b.w, len(queues))
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	if owned {
		defer stmt.Close()
	}
	jobs := make([]*backend.JobRow, 0, min(params.Max, 1000))
	// An explicit transaction, committed only once every returned row was
	// read: a claim cut short (context cancelled, scan error) reserves
	// nothing instead of leaving jobs reserved until their lease expires.
	err = b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		jobs = jobs[:0]
		rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	// RETURNING yields rows in no defined order.
	sort.Slice(jobs, func(i, k int) bool {
		if jobs[i].Priority != jobs[k].Priority {
			return jobs[i].Priority > jobs[k].Priority
		}
		return jobs[i].ID < jobs[k].ID
	})
	return jobs, nil
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanJob reads one row of jobColumns.
func scanJob(s scanner) (*backend.JobRow, error) {
	var (
		j                      backend.JobRow
		status                 string
		avail, created         int64
		reservedAt, leaseUntil sql.NullInt64
		uniqueKey              sql.NullString
		attempts, maxAtt, prio int64
	)
	if err := s.Scan(&j.ID, &j.Queue, &j.Type, &j.Payload, &attempts, &maxAtt, &prio, &status,
		&avail, &reservedAt, &leaseUntil, &created, &j.LastError, &uniqueKey); err != nil {
		return nil, err
	}
	j.Attempts, j.MaxAttempts, j.Priority = int(attempts), int(maxAtt), int(prio)
	j.Status = backend.Status(status)
	j.AvailableAt = fromMicros(avail)
	j.CreatedAt = fromMicros(created)
	if reservedAt.Valid {
		j.ReservedAt = fromMicros(reservedAt.Int64)
	}
	if leaseUntil.Valid {
		j.LeaseUntil = fromMicros(leaseUntil.Int64)
	}
	j.UniqueKey = uniqueKey.String
	return &j, nil
}
