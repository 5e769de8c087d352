package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// JobComplete implements backend.Backend: every outcome of the batch is
// applied in one write transaction, each fenced by (id, claim token,
// reserved).
// A fail copies the row into failed_jobs and deletes it in that same
// transaction, so a job is never in both tables or in neither. Error texts
// are stored as backend.PrepareOutcomes normalised them; SQLite takes any
// text, so no outcome's text can fail the batch.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	const op = "complete jobs"
	var res backend.CompleteResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	outcomes, err := backend.PrepareOutcomes(params.Outcomes)
	if err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	if len(outcomes) == 0 {
		return res, nil
	}
	now := b.now()
	nowUS := micros(now)
	woken := map[string]struct{}{}
	err = b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res.Stale = res.Stale[:0]
		clear(woken)
		res.Cancelled = res.Cancelled[:0]
		// The driver watches a cancellable context with a goroutine of
		// its own for every statement: one per job here, the most CPU a
		// no-op job cost the writer besides SQLite itself. Each statement
		// touches one row by its key, so the rows run under a context
		// that is never cancelled. A cancel still ends the write: the
		// transaction is ctx's (database/sql rolls it back), and ctx is
		// checked between rows, so the loop stops one row later at most.
		rowCtx := context.WithoutCancel(ctx)
		var done, retry *sql.Stmt
		fails := failMover{ctx: rowCtx, tx: tx, st: st}
		fin := finisher{ctx: rowCtx, tx: tx, st: st}
		// The task of a workflow task's job ends with it, in this
		// transaction (see wfTx); other jobs never touch it.
		wt := wfTx{ctx: rowCtx, tx: tx, st: st, now: now, woken: woken}
		// A failed or cancelled head of a halting key halts it here.
		ke := keyEnds{ctx: rowCtx, tx: tx, st: st, now: nowUS, wt: &wt}
		// refused sorts an outcome the fence refused: the cancelling
		// claim it names ends cancelled, anything else is stale.
		refused := func(o backend.Outcome) error {
			cancelled, wf, err := fin.move(fin.cancelStmt(), o.Ref.ID, o.Ref.Token, backend.StateCancelled, nowUS)
			if err != nil {
				return err
			}
			if wf != 0 {
				if err := wt.jobCancelled(o.Ref.ID); err != nil {
					return err
				}
			}
			if cancelled {
				if err := ke.cancelled(o.Ref.ID); err != nil {
					return err
				}
				res.Cancelled = append(res.Cancelled, o.Ref)
			} else {
				res.Stale = append(res.Stale, o.Ref)
			}
			return nil
		}
		for _, o := range outcomes {
			if err := ctx.Err(); err != nil {
				return err
			}
			id, tok := o.Ref.ID, o.Ref.Token
			applied := true
			switch o.Kind {
			case backend.OutcomeDone:
				if o.Keep {
					moved, wf, err := fin.move(fin.keepStmt(), id, tok, backend.StateCompleted, nowUS, nullBytes(o.Result), int64(backend.UniqueCompleted))
					if err != nil {
						return err
					}
					if wf != 0 {
						if err := wt.jobDone(id, o.Result); err != nil {
							return err
						}
					}
					applied = moved
					break
				}
				if done == nil {
					done = tx.StmtContext(rowCtx, st.done)
				}
				r, err := done.ExecContext(rowCtx, id, tok)
				if err != nil {
					return err
				}
				if n, _ := r.RowsAffected(); n == 0 {
					// Stale, or a workflow task's job, which
					// qCompleteDone leaves to doneTask.
					if applied, err = wt.doneTask(id, tok, o.Result); err != nil {
						return err
					}
				}
			case backend.OutcomeRetry, backend.OutcomeDefer:
				if retry == nil {
					retry = tx.StmtContext(rowCtx, st.retry)
				}
				deferred := 0
				if o.Kind == backend.OutcomeDefer {
					deferred = 1
				}
				var queue string
				err := retry.QueryRowContext(rowCtx, id, tok, micros(now.Add(o.RetryDelay)), o.Error, deferred,
					nowUS, o.Duration.Microseconds(), o.Worker).Scan(&queue)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					applied = false
				case err != nil:
					return err
				case o.RetryDelay == 0:
					woken[queue] = struct{}{}
				}
			case backend.OutcomeFail:
				moved, wf, err := fails.move(id, tok, o.Error, nowUS, o.Duration, o.Worker)
				if err != nil {
					return err
				}
				if wf != 0 {
					if err := wt.jobFailed(id, o.Error); err != nil {
						return err
					}
				}
				if moved {
					if err := ke.failed(id); err != nil {
						return err
					}
				}
				applied = moved
			}
			if !applied {
				if err := refused(o); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	b.hub.notify(woken)
	if backend.Finishes(outcomes) || len(res.Cancelled) > 0 {
		b.hub.notifyFinished()
	}
	b.wakeKeyQueues()
	b.limits.EndedOutcomes(params.Outcomes)
	return res, nil
}

// JobExtendLease implements backend.Backend in one write transaction.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	const op = "extend leases"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := backend.ValidateExtendLease(params); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(params.Refs) == 0 {
		return nil, nil
	}
	until := micros(b.now().Add(params.Lease))
	var lost []backend.JobRef
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		lost = lost[:0]
		extend := tx.StmtContext(ctx, st.extend)
		for _, ref := range params.Refs {
			r, err := extend.ExecContext(ctx, ref.ID, ref.Token, until)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 0 {
				lost = append(lost, ref)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lost, nil
}

// JobRelease implements backend.Backend in one write transaction and wakes
// the released queues' subscribers. The release rule (free releases, then
// counted ones) is qRelease's; a counted release that spends the last
// attempt moves the job to failed_jobs with backend.ReleasedError.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	const op = "release jobs"
	if err := b.checkOpen(op); err != nil {
		return backend.CompleteResult{}, err
	}
	if len(refs) == 0 {
		return backend.CompleteResult{}, nil
	}
	now := micros(b.now())
	var res backend.CompleteResult
	woken := map[string]struct{}{}
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res = backend.CompleteResult{}
		clear(woken)
		release := tx.StmtContext(ctx, st.release)
		fails := failMover{ctx: ctx, tx: tx, st: st}
		fin := finisher{ctx: ctx, tx: tx, st: st}
		// A task's job that ends here ends its task (see wfTx).
		wt := wfTx{ctx: ctx, tx: tx, st: st, now: fromMicros(now), woken: woken}
		ke := keyEnds{ctx: ctx, tx: tx, st: st, now: now, wt: &wt}
		for _, ref := range refs {
			id, tok := ref.ID, ref.Token
			var queue string
			err := release.QueryRowContext(ctx, id, tok, now, backend.MaxFreeReleases, backend.ReleasedError).Scan(&queue)
			switch {
			case err == nil:
				woken[queue] = struct{}{}
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			// Stale, or its last attempt is spent: the fenced move tells.
			moved, wf, err := fails.move(id, tok, backend.ReleasedError, now, 0, "")
			if err != nil {
				return err
			}
			if wf != 0 {
				if err := wt.jobFailed(id, backend.ReleasedError); err != nil {
					return err
				}
			}
			if moved {
				if err := ke.failed(id); err != nil {
					return err
				}
				continue
			}
			// The cancelling claim it names ends cancelled.
			if moved, wf, err = fin.move(fin.cancelStmt(), id, tok, backend.StateCancelled, now); err != nil {
				return err
			}
			if wf != 0 {
				if err := wt.jobCancelled(id); err != nil {
					return err
				}
			}
			if moved {
				if err := ke.cancelled(id); err != nil {
					return err
				}
				res.Cancelled = append(res.Cancelled, ref)
			} else {
				res.Stale = append(res.Stale, ref)
			}
		}
		return nil
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	b.hub.notify(woken)
	// A release may fail or cancel jobs: a hint costs a waiter one look.
	b.hub.notifyFinished()
	b.wakeKeyQueues()
	b.limits.Ended(refs)
	return res, nil
}

// failMover moves held jobs to failed_jobs inside one write transaction,
// binding its statements to the transaction on first use.
type failMover struct {
	ctx       context.Context
	tx        *sql.Tx
	st        *stmts
	copy, del *sql.Stmt
}

// move copies the job into failed_jobs with error text and deletes it, if
// the claim with token still holds it (the fence), appending the attempt's
// error (text, took, worker) to its errors; moved is false when it
// does not. wf is the job's workflow_id, 0 unless it is a workflow task's
// (whose task the caller then ends).
func (m *failMover) move(id, token int64, text string, now int64, took time.Duration, worker string) (moved bool, wf int64, err error) {
	if m.copy == nil {
		m.copy, m.del = m.tx.StmtContext(m.ctx, m.st.failCopy), m.tx.StmtContext(m.ctx, m.st.jobDelete)
	}
	r, err := m.copy.ExecContext(m.ctx, id, token, text, now, took.Microseconds(), worker)
	if err != nil {
		return false, 0, err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return false, 0, nil
	}
	wf, err = deleteJob(m.ctx, m.tx, m.del, id)
	return err == nil, wf, err
}

// deleteJob deletes job id, which a copy into failed_jobs or finished_jobs
// just found, with del (qJobDelete bound to tx; nil runs its text) and
// returns its workflow_id: 0 for a job that is no workflow task's, the
// common case, which costs what the delete did before workflows.
func deleteJob(ctx context.Context, tx *sql.Tx, del *sql.Stmt, id int64) (int64, error) {
	var r sql.Result
	var err error
	if del != nil {
		r, err = del.ExecContext(ctx, id)
	} else {
		r, err = tx.ExecContext(ctx, qJobDelete, id)
	}
	if err != nil {
		return 0, err
	}
	if n, err := r.RowsAffected(); err != nil || n == 1 {
		return 0, err
	}
	var wf sql.NullInt64
	if err := tx.QueryRowContext(ctx, qJobDeleteTask, id).Scan(&wf); err != nil {
		return 0, fmt.Errorf("delete job %d: %w", id, err)
	}
	return wf.Int64, nil
}

// finisher moves jobs into finished_jobs inside one write transaction,
// binding its statements to the transaction on first use.
type finisher struct {
	ctx               context.Context
	tx                *sql.Tx
	st                *stmts
	keep, cancel, del *sql.Stmt
}

func (f *finisher) keepStmt() *sql.Stmt {
	if f.keep == nil {
		f.keep = f.tx.StmtContext(f.ctx, f.st.finishKeep)
	}
	return f.keep
}

func (f *finisher) cancelStmt() *sql.Stmt {
	if f.cancel == nil {
		f.cancel = f.tx.StmtContext(f.ctx, f.st.finishCancel)
	}
	return f.cancel
}

// move copies the job into finished_jobs as state with copy (qFinishKeep
// or qFinishCancelled, whose fence names the claim by its token) and
// deletes it; moved is false when the fence refused. wf is the job's
// workflow_id, 0 unless it is a workflow task's (whose task the caller
// then ends). extra are copy's parameters after the token (qFinishKeep's
// result and unique state).
func (f *finisher) move(copy *sql.Stmt, id, token int64, state backend.JobState, now int64, extra ...any) (moved bool, wf int64, err error) {
	r, err := copy.ExecContext(f.ctx, append([]any{id, string(state), now, token}, extra...)...)
	if err != nil {
		return false, 0, err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return false, 0, nil
	}
	if f.del == nil {
		f.del = f.tx.StmtContext(f.ctx, f.st.jobDelete)
	}
	wf, err = deleteJob(f.ctx, f.tx, f.del, id)
	return err == nil, wf, err
}
