package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/jobq/jobq/backend"
)

// JobGet implements backend.Backend on the read connections.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	op := fmt.Sprintf("get job %d", id)
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	st, err := b.statements(ctx)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	j, err := scanJob(st.jobGet.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return j, nil
}

// QueueStats implements backend.Backend: every count comes from one read
// snapshot. It reads the pending jobs' index entries (not their rows), so
// its cost still grows with the backlog (BenchmarkQueueStats measures it).
func (b *Backend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	const op = "queue stats"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	now := micros(b.now())
	byQueue := map[string]*backend.QueueStats{}
	get := func(q string) *backend.QueueStats {
		s, ok := byQueue[q]
		if !ok {
			s = &backend.QueueStats{Queue: q}
			byQueue[q] = s
		}
		return s
	}
	err := b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, qStatsPending, now)
		if err != nil {
			return err
		}
		for rows.Next() {
			var q string
			var pending, scheduled int64
			var oldest sql.NullInt64
			if err := rows.Scan(&q, &pending, &scheduled, &oldest); err != nil {
				_ = rows.Close()
				return err
			}
			s := get(q)
			s.Pending, s.Scheduled = pending, scheduled
			if oldest.Valid {
				s.OldestDue = fromMicros(oldest.Int64)
			}
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, qStatsReserved)
		if err != nil {
			return err
		}
		for rows.Next() {
			var q string
			var reserved int64
			if err := rows.Scan(&q, &reserved); err != nil {
				_ = rows.Close()
				return err
			}
			get(q).Reserved = reserved
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, qStatsFailed)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			var failed int64
			if err := rows.Scan(&q, &failed); err != nil {
				return err
			}
			get(q).Failed = failed
		}
		return rows.Err()
	})
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	out := make([]backend.QueueStats, 0, len(byQueue))
	for _, s := range byQueue {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Queue < out[k].Queue })
	return out, nil
}

// read runs fn in a read transaction on the read connections, so every
// query in it sees one snapshot.
func (b *Backend) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := b.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// closeRows closes rows and returns the first error of the iteration or
// the close.
func closeRows(rows *sql.Rows) error {
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// listRows runs a listing query on the read connections and scans each
// row with scan: the shape of every list the backend answers. The result
// is empty, not nil, when no row matches.
func listRows[T any](ctx context.Context, b *Backend, op, query string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := b.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, b.mapErr(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}
