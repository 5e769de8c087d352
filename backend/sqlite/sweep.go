package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// LeaseSweep implements backend.Backend in one write transaction: expired
// jobs with attempts left go back to pending (available now, last_error
// "lease expired"), the others move to failed_jobs; the result names each.
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
			id, attempts, token, maxAttempts int64
			queue, typ                       string
			cancelling                       bool
		}
		rows, err := tx.StmtContext(ctx, st.sweepExpired).QueryContext(ctx, now, int64(limit))
		if err != nil {
			return err
		}
		var found []expired
		for rows.Next() {
			var e expired
			if err := rows.Scan(&e.id, &e.attempts, &e.token, &e.maxAttempts, &e.queue, &e.typ, &e.cancelling); err != nil {
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
		res.Jobs = make([]backend.SweptJob, 0, len(found))
		rescue := tx.StmtContext(ctx, st.sweepRescue)
		fails := failMover{ctx: ctx, tx: tx, st: st}
		fin := finisher{ctx: ctx, tx: tx, st: st}
		// A task's job that ends here ends its task (see wfTx).
		wt := wfTx{ctx: ctx, tx: tx, st: st, now: fromMicros(now), woken: woken}
		ke := keyEnds{ctx: ctx, tx: tx, st: st, now: now, wt: &wt}
		for _, e := range found {
			if e.cancelling {
				// Its holder let the lease run out after the cancel:
				// the job ends cancelled, never rescued.
				moved, wf, err := fin.move(fin.cancelStmt(), e.id, e.token, backend.StateCancelled, now)
				if err != nil {
					return err
				}
				if wf != 0 {
					if err := wt.jobCancelled(e.id); err != nil {
						return err
					}
				}
				if moved {
					if err := ke.cancelled(e.id); err != nil {
						return err
					}
				}
				res.Cancelled++
				continue
			}
			failed := e.attempts >= e.maxAttempts
			if !failed {
				if _, err := rescue.ExecContext(ctx, e.id, e.token, now, backend.LeaseExpiredError); err != nil {
					return err
				}
				res.Rescued++
				woken[e.queue] = struct{}{}
			} else {
				moved, wf, err := fails.move(e.id, e.token, backend.LeaseExpiredError, now, 0, "")
				if err != nil {
					return err
				}
				if wf != 0 {
					if err := wt.jobFailed(e.id, backend.LeaseExpiredError); err != nil {
						return err
					}
				}
				if moved {
					if err := ke.failed(e.id); err != nil {
						return err
					}
				}
				res.Failed++
			}
			res.Jobs = append(res.Jobs, backend.SweptJob{
				Ref:    backend.JobRef{ID: e.id, Attempt: int(e.attempts), Token: e.token},
				Queue:  e.queue,
				Type:   e.typ,
				Failed: failed,
			})
		}
		return nil
	})
	if err != nil {
		return backend.SweepResult{}, err
	}
	b.hub.notify(woken)
	if res.Failed+res.Cancelled > 0 {
		b.hub.notifyFinished()
	}
	if len(res.Jobs) > 0 || res.Cancelled > 0 {
		b.wakeKeyQueues()
	}
	return res, nil
}
