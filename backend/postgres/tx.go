package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// JobInsertManyTx implements backend.TxInserter: the jobs are inserted by
// the caller's transaction, so they exist if and only if it commits, and
// workers are notified only then. tx is a pgx.Tx, or a *sql.Tx opened
// through the pgx stdlib driver (github.com/jackc/pgx/v5/stdlib; other
// database/sql drivers cannot pass the array parameters). The transaction
// must be on the database holding the backend's schema. A failed insert
// aborts the caller's transaction, as any failed statement does.
func (b *Backend) JobInsertManyTx(ctx context.Context, tx any, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if err := b.checkOpen("insert jobs in tx"); err != nil {
		return nil, err
	}
	query, err := txQuerier(tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs in tx: %w", err)
	}
	if err := validateInserts(params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return []backend.InsertResult{}, nil
	}
	var results []backend.InsertResult
	err = b.doInTx(ctx, "insert jobs in tx", func(ctx context.Context) error {
		results, _, err = b.insert(ctx, query, nil, b.q.insertNotify, "", params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// JobCompleteTx implements backend.TxCompleter: it deletes the held job
// inside the handler's transaction, so the handler's writes and the job's
// completion commit (or roll back) together; the job of a workflow task
// ends its task (succeeded, without a result) in that transaction too,
// and the jobs that releases wake workers at its commit. It returns
// backend.ErrNotFound when the claim (ref's token) is no longer held
// (rescued after its lease, released, re-claimed, cancelled or already
// completed); the caller should then roll back. tx is as for
// JobInsertManyTx. The deleted row stays locked until the transaction ends,
// so the lease sweep and other holders wait for it rather than race it.
func (b *Backend) JobCompleteTx(ctx context.Context, tx any, ref backend.JobRef) error {
	op := fmt.Sprintf("complete job %d in tx", ref.ID)
	query, err := txQuerier(tx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.doInTx(ctx, op, func(ctx context.Context) error {
		// sqlCompleteOne returns the job's workflow_id (NULL for a job
		// that is no task's); no row when the claim is not held.
		held := false
		var wf pgtype.Int8
		err := query(ctx, b.q.completeOne, []any{ref.ID, ref.Token}, []any{&wf}, func() error {
			held = true
			return nil
		})
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("attempt %d (claim token %d) is not held: %w", ref.Attempt, ref.Token, backend.ErrNotFound)
		}
		if wf.Valid {
			_, err = b.endTasks(ctx, query, true, []taskEnd{{workflow: wf.Int64, job: ref.ID, state: backend.TaskSucceeded}})
		}
		return err
	})
}

// txQuerier adapts a caller's transaction, refusing other types.
func txQuerier(tx any) (rowQuerier, error) {
	switch t := tx.(type) {
	case pgx.Tx:
		return pgxRows(t), nil
	case *sql.Tx:
		if t != nil {
			return sqlRows(t), nil
		}
	}
	return nil, txTypeError(tx)
}

func txTypeError(tx any) error {
	return &backend.InputError{Field: "tx", Reason: fmt.Sprintf("%T is not a pgx.Tx or *sql.Tx", tx)}
}
