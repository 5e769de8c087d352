package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// JobComplete implements backend.Backend: every outcome of the batch is
// applied in one write transaction, each fenced by (id, attempts, reserved).
// A fail copies the row into failed_jobs and deletes it in that same
// transaction, so a job is never in both tables or in neither.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	const op = "complete jobs"
	var res backend.CompleteResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	for i, o := range params.Outcomes {
		if err := backend.ValidateOutcome(o); err != nil {
			return res, fmt.Errorf("%s: outcome %d: %w", op, i, err)
		}
	}
	if len(params.Outcomes) == 0 {
		return res, nil
	}
	now := b.now()
	nowUS := micros(now)
	woken := map[string]struct{}{}
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res.Stale = res.Stale[:0]
		clear(woken)
		var done, retry, failCopy, del *sql.Stmt
		for _, o := range params.Outcomes {
			id, att := o.Ref.ID, int64(o.Ref.Attempt)
			switch o.Kind {
			case backend.OutcomeDone:
				if done == nil {
					done = tx.StmtContext(ctx, st.done)
				}
				r, err := done.ExecContext(ctx, id, att)
				if err != nil {
					return err
				}
				if n, _ := r.RowsAffected(); n == 0 {
					res.Stale = append(res.Stale, o.Ref)
				}
			case backend.OutcomeRetry:
				if retry == nil {
					retry = tx.StmtContext(ctx, st.retry)
				}
				var queue string
				err := retry.QueryRowContext(ctx, id, att, micros(now.Add(o.RetryDelay)), o.Error).Scan(&queue)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					res.Stale = append(res.Stale, o.Ref)
				case err != nil:
					return err
				case o.RetryDelay == 0:
					woken[queue] = struct{}{}
				}
			case backend.OutcomeFail:
				if failCopy == nil {
					failCopy, del = tx.StmtContext(ctx, st.failCopy), tx.StmtContext(ctx, st.jobDelete)
				}
				r, err := failCopy.ExecContext(ctx, id, att, o.Error, nowUS)
				if err != nil {
					return err
				}
				if n, _ := r.RowsAffected(); n == 0 {
					res.Stale = append(res.Stale, o.Ref)
					continue
				}
				if _, err := del.ExecContext(ctx, id); err != nil {
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
	return res, nil
}

// JobExtendLease implements backend.Backend in one write transaction.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	const op = "extend leases"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if params.Lease <= 0 {
		return nil, fmt.Errorf("%s: %w", op, &backend.InputError{Field: "lease", Reason: fmt.Sprintf("%s: must be positive", params.Lease)})
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
			r, err := extend.ExecContext(ctx, ref.ID, int64(ref.Attempt), until)
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
// the released queues' subscribers.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (int, error) {
	const op = "release jobs"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	if len(refs) == 0 {
		return 0, nil
	}
	now := micros(b.now())
	released := 0
	woken := map[string]struct{}{}
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		released = 0
		clear(woken)
		release := tx.StmtContext(ctx, st.release)
		for _, ref := range refs {
			var queue string
			err := release.QueryRowContext(ctx, ref.ID, int64(ref.Attempt), now).Scan(&queue)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			default:
				released++
				woken[queue] = struct{}{}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	b.hub.notify(woken)
	return released, nil
}
