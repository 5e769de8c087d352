package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jobq/jobq/backend"
)

var _ backend.Canceller = (*Backend)(nil)

// JobCancel implements backend.Canceller in one write transaction.
func (b *Backend) JobCancel(ctx context.Context, ids []int64) ([]backend.CancelResult, error) {
	const op = "cancel jobs"
	if err := backend.ValidateCancelIDs(ids); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	now := micros(b.now())
	out := make([]backend.CancelResult, len(ids))
	// A cancelled task's job cancels its task, whose DepContinue
	// dependants may be released: their queues are woken after the commit.
	woken := map[string]struct{}{}
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		clear(woken)
		wt := &wfTx{ctx: ctx, tx: tx, st: st, now: fromMicros(now), woken: woken}
		for i, id := range ids {
			r, err := b.cancelOne(ctx, tx, id, now, wt)
			if err != nil {
				return fmt.Errorf("job %d: %w", id, err)
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.hub.notify(woken)
	b.hub.notifyFinished()
	// A cancelled head lets its key's next job go.
	b.wakeKeyQueues()
	return out, nil
}

// cancelOne cancels job id inside tx; a pending job of a workflow task
// ends its task through wt.
func (b *Backend) cancelOne(ctx context.Context, tx *sql.Tx, id, now int64, wt *wfTx) (backend.CancelResult, error) {
	r := backend.CancelResult{ID: id}
	var status string
	var attempts int64
	var cancelling bool
	err := tx.QueryRowContext(ctx, qCancelLookup, id).Scan(&status, &attempts, &cancelling)
	switch {
	case err == nil:
		r.Attempt = int(attempts)
		switch {
		case cancelling:
			r.Outcome = backend.CancelAlready
		case backend.JobState(status) == backend.StatePending:
			if _, err := tx.ExecContext(ctx, qFinishPending, id, string(backend.StateCancelled), now); err != nil {
				return r, err
			}
			wf, err := deleteJob(ctx, tx, nil, id)
			if err != nil {
				return r, err
			}
			if wf != 0 {
				if err := wt.jobCancelled(id); err != nil {
					return r, err
				}
			}
			// A cancelled head of a halting key halts it.
			ke := keyEnds{ctx: ctx, tx: tx, st: wt.st, now: now, wt: wt}
			if err := ke.cancelled(id); err != nil {
				return r, err
			}
			r.Outcome = backend.CancelCancelled
		default:
			if _, err := tx.ExecContext(ctx, qCancelRequest, id, now); err != nil {
				return r, err
			}
			r.Outcome = backend.CancelRequested
		}
		return r, nil
	case !errors.Is(err, sql.ErrNoRows):
		return r, err
	}
	var state string
	err = tx.QueryRowContext(ctx, qFinishedLookup, id).Scan(&state, &attempts)
	switch {
	case err == nil:
		r.Attempt = int(attempts)
		r.Outcome = backend.CancelCompleted
		if backend.JobState(state) == backend.StateCancelled {
			r.Outcome = backend.CancelAlready
		}
		return r, nil
	case !errors.Is(err, sql.ErrNoRows):
		return r, err
	}
	var one int
	err = tx.QueryRowContext(ctx, qFailedByJob, id).Scan(&one)
	switch {
	case err == nil:
		r.Outcome = backend.CancelFailed
	case errors.Is(err, sql.ErrNoRows):
		r.Outcome = backend.CancelNotFound
	default:
		return r, err
	}
	return r, nil
}

// JobCancelling implements backend.Canceller on a read connection: it
// never waits for the write lock.
func (b *Backend) JobCancelling(ctx context.Context) ([]backend.JobRef, error) {
	const op = "list cancelling jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	rows, err := b.r.QueryContext(ctx, qCancelling)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	defer rows.Close()
	var refs []backend.JobRef
	for rows.Next() {
		var ref backend.JobRef
		if err := rows.Scan(&ref.ID, &ref.Attempt, &ref.Token); err != nil {
			return nil, b.mapErr(ctx, op, err)
		}
		refs = append(refs, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return refs, nil
}
