package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobq/jobq/backend"
)

var (
	_ backend.TxInserter  = (*Backend)(nil)
	_ backend.TxCompleter = (*Backend)(nil)
)

// JobInsertManyTx implements backend.TxInserter: the jobs are inserted by
// the caller's transaction, so they exist if and only if it commits. tx must
// be a *sql.Tx on a modernc.org/sqlite connection to this backend's file,
// migrated by it; begin it with BEGIN IMMEDIATE (DSN _txlock=immediate) so it
// does not fail with SQLITE_BUSY when it upgrades to writing. While it is
// open it holds the file's write lock, so keep it short: claims and
// completions of every worker on the file wait for it. The commit is the
// caller's, so subscribers are woken by the watcher of each Backend on the
// file when it sees it (notify.go), within Options.WakeInterval.
func (b *Backend) JobInsertManyTx(ctx context.Context, tx any, params []backend.InsertParams) ([]backend.InsertResult, error) {
	const op = "insert jobs in tx"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	t, err := sqlTx(tx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := validateInserts(op, params); err != nil {
		return nil, err
	}
	results := make([]backend.InsertResult, len(params))
	if len(params) == 0 {
		return results, nil
	}
	if err := insertTx(ctx, t, nil, params, results, b.now()); err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return results, nil
}

// JobCompleteTx implements backend.TxCompleter: it deletes the held job
// inside the handler's transaction (a *sql.Tx as for JobInsertManyTx), so
// the handler's writes and the completion commit or roll back together. It
// returns backend.ErrNotFound when the claim is no longer held (fenced by
// its token, as JobComplete is); the caller should then roll back.
func (b *Backend) JobCompleteTx(ctx context.Context, tx any, ref backend.JobRef) error {
	op := fmt.Sprintf("complete job %d in tx", ref.ID)
	if err := b.checkOpen(op); err != nil {
		return err
	}
	t, err := sqlTx(tx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	res, err := t.ExecContext(ctx, qCompleteDone, ref.ID, ref.Token)
	if err != nil {
		return b.mapErr(ctx, op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return b.mapErr(ctx, op, err)
	}
	if n == 0 {
		// Stale, or a workflow task's job: its task ends (succeeded,
		// without a result) in the caller's transaction too, releasing
		// its dependants there; their workers are woken when the
		// watcher sees the commit, as for JobInsertManyTx.
		w := &wfTx{ctx: ctx, tx: t, now: b.now()}
		held, err := w.doneTask(ref.ID, ref.Token, nil)
		if err != nil {
			return b.mapErr(ctx, op, err)
		}
		if !held {
			return fmt.Errorf("%s: its claim (attempt %d, token %d) is not held: %w", op, ref.Attempt, ref.Token, backend.ErrNotFound)
		}
	}
	return nil
}

// sqlTx accepts a caller's transaction, refusing other types.
func sqlTx(tx any) (*sql.Tx, error) {
	if t, ok := tx.(*sql.Tx); ok && t != nil {
		return t, nil
	}
	return nil, &backend.InputError{Field: "tx", Reason: fmt.Sprintf("%T is not a *sql.Tx", tx)}
}
