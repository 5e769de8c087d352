package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

var _ backend.ProgressReporter = (*Backend)(nil)

// JobProgress implements backend.ProgressReporter with one fenced UPDATE
// (sqlProgress), tagged with the claim's token so that no other statement
// has to clear it (see 017_progress.sql). Sent twice it writes the same
// values again, so a retry after a lost reply is harmless.
func (b *Backend) JobProgress(ctx context.Context, ref backend.JobRef, p backend.Progress) error {
	return backend.ReportProgress(ref, p, func(op string) (bool, error) {
		if err := b.checkOpen(op); err != nil {
			return false, err
		}
		held := false
		err := b.do(ctx, op, func(ctx context.Context) error {
			var id int64
			err := b.pool.QueryRow(ctx, b.q.progress, ref.ID, ref.Token, p.Percent, p.Message).Scan(&id)
			held = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		return held, err
	})
}
