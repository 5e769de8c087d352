package sqlite

import (
	"context"
	"database/sql"

	"github.com/jobq/jobq/backend"
)

var _ backend.ProgressReporter = (*Backend)(nil)

// JobProgress implements backend.ProgressReporter with one fenced UPDATE
// of the job's progress columns, tagged with the claim's token so that no
// other path has to clear them (see 013_progress.sql).
func (b *Backend) JobProgress(ctx context.Context, ref backend.JobRef, p backend.Progress) error {
	return backend.ReportProgress(ref, p, func(op string) (bool, error) {
		var n int64
		err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
			r, err := tx.StmtContext(ctx, st.progress).ExecContext(ctx, ref.ID, ref.Token, p.Percent, p.Message, micros(b.now()))
			if err != nil {
				return err
			}
			n, err = r.RowsAffected()
			return err
		})
		return n > 0, err
	})
}
