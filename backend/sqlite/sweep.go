package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// leaseExpiredError is the error recorded for jobs whose holder vanished.
const leaseExpiredError = "lease expired"

// LeaseSweep implements backend.Backend in one write transaction: expired
// jobs with attempts left go back to pending (available now, last_error
// "lease expired"), the others move to failed_jobs.
func (b *Backend) LeaseSweep(ctx context.Context, params backend.SweepParams) (backend.SweepResult, error) {
	const op = "sweep leases"
	var res backend.SweepResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultSweepLimit)
	if err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	now := micros(b.now())
	woken := map[string]struct{}{}
	err = b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res = backend.SweepResult{}
		clear(woken)
		type expired struct {
			id, attempts, maxAttempts int64
			queue                     string
		}
		rows, err := tx.StmtContext(ctx, st.sweepExpired).QueryContext(ctx, now, int64(limit))
		if err != nil {
			return err
		}
		var found []expired
		for rows.Next() {
			var e expired
			if err := rows.Scan(&e.id, &e.attempts, &e.maxAttempts, &e.queue); err != nil {
				_ = rows.Close()
				return err
			}
			found = append(found, e)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(found) == 0 {
			return nil
		}
		rescue := tx.StmtContext(ctx, st.sweepRescue)
		failCopy, del := tx.StmtContext(ctx, st.failCopy), tx.StmtContext(ctx, st.jobDelete)
		for _, e := range found {
			if e.attempts < e.maxAttempts {
				if _, err := rescue.ExecContext(ctx, e.id, e.attempts, now, leaseExpiredError); err != nil {
					return err
				}
				res.Rescued++
				woken[e.queue] = struct{}{}
				continue
			}
			if _, err := failCopy.ExecContext(ctx, e.id, e.attempts, leaseExpiredError, now); err != nil {
				return err
			}
			if _, err := del.ExecContext(ctx, e.id); err != nil {
				return err
			}
			res.Failed++
		}
		return nil
	})
	if err != nil {
		return backend.SweepResult{}, err
	}
	b.hub.notify(woken)
	return res, nil
}
