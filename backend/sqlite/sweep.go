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
			return expireTx(ctx, tx, now, limit, &res)
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
		return expireTx(ctx, tx, now, limit-len(found), &res)
	})
	if err != nil {
		return backend.SweepResult{}, err
	}
	// The jobs this process's claims expired are reported here, with
	// the sweep's own, for the worker's hooks and metrics.
	b.expiredMu.Lock()
	n := min(len(b.expired), max(0, limit-len(res.Jobs)))
	res.Jobs = append(res.Jobs, b.expired[:n]...)
	res.Expired += n
	b.expired = append([]backend.SweptJob(nil), b.expired[n:]...)
	b.expiredMu.Unlock()
	b.hub.notify(woken)
	if res.Failed+res.Cancelled+res.Expired > 0 {
		b.hub.notifyFinished()
	}
	if len(res.Jobs) > 0 || res.Cancelled > 0 {
		b.wakeKeyQueues()
	}
	return res, nil
}

// expireTx moves up to limit pending jobs whose deadline has passed by
// now (µs) to failed_jobs inside the sweep's transaction, as they are:
// no attempt was made. Jobs with a deadline are never keyed nor a
// workflow task's (ValidateInsert, ValidateWorkflow), so nothing else
// ends with them.
func expireTx(ctx context.Context, tx *sql.Tx, now int64, limit int, res *backend.SweepResult) error {
	if limit <= 0 {
		return nil
	}
	type expired struct {
		ref        backend.JobRef
		queue, typ string
		deadline   int64
	}
	rows, err := tx.QueryContext(ctx, qExpiredPending, now, int64(limit))
	if err != nil {
		return err
	}
	var found []expired
	for rows.Next() {
		var e expired
		var attempts int64
		if err := rows.Scan(&e.ref.ID, &attempts, &e.ref.Token, &e.queue, &e.typ, &e.deadline); err != nil {
			_ = rows.Close()
			return err
		}
		e.ref.Attempt = int(attempts)
		found = append(found, e)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, e := range found {
		r, err := tx.ExecContext(ctx, qExpireCopy, e.ref.ID, backend.DeadlineError(fromMicros(e.deadline)), now)
		if err != nil {
			return fmt.Errorf("expire job %d: %w", e.ref.ID, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, qJobDelete, e.ref.ID); err != nil {
			return fmt.Errorf("expire job %d: %w", e.ref.ID, err)
		}
		res.Expired++
		res.Jobs = append(res.Jobs, backend.SweptJob{Ref: e.ref, Queue: e.queue, Type: e.typ, Failed: true, Expired: true})
	}
	return nil
}
