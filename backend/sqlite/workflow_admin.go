package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// WorkflowCancel implements backend.Workflower in one write transaction:
// the workflow and its waiting and active tasks end cancelled at once, and
// the active tasks' jobs are cancelled as JobCancel cancels them (pending
// ones end cancelled, reserved ones become cancelling; when such a job
// ends later its task, ended already, stays as it is).
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (backend.WorkflowCancelResult, error) {
	op := fmt.Sprintf("cancel workflow %d", id)
	var res backend.WorkflowCancelResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	now := b.now()
	nowUS := micros(now)
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		res = backend.WorkflowCancelResult{}
		var state string
		if err := tx.QueryRowContext(ctx, qWorkflowState, id).Scan(&state); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return backend.ErrNotFound
			}
			return err
		}
		res.State = backend.WorkflowState(state)
		if res.State != backend.WorkflowRunning {
			return nil
		}
		if _, err := tx.ExecContext(ctx, qWorkflowCancel, id, nowUS); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, qTasksCancelWaiting, id, backend.CancelReasonWorkflow, nowUS)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		res.Cancelled = int(n)
		// The tasks end first, so cancelling their jobs finds them ended
		// and resolves nothing.
		w := &wfTx{ctx: ctx, tx: tx, st: st, now: now}
		jobs, err := queryAll(w, qTasksCancelActive, []any{id, backend.CancelReasonWorkflow, nowUS}, scanInt)
		if err != nil {
			return err
		}
		for _, job := range jobs {
			c, err := b.cancelOne(ctx, tx, job, nowUS, w)
			if err != nil {
				return fmt.Errorf("job %d: %w", job, err)
			}
			switch c.Outcome {
			case backend.CancelRequested, backend.CancelAlready:
				// Running: its holder is told to stop (or was, by an
				// earlier JobCancel).
				res.Requested++
			default:
				res.Cancelled++
			}
		}
		res.Changed, res.State = true, backend.WorkflowCancelled
		return nil
	})
	if err != nil {
		return backend.WorkflowCancelResult{}, err
	}
	return res, nil
}

// WorkflowPrune implements backend.Workflower in chunks, each in a write
// transaction of its own, so a large prune never holds the write lock for
// long: a chunk takes whole workflows, oldest first, until it holds
// backend.ChunkSize tasks (at least one workflow, however large).
func (b *Backend) WorkflowPrune(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "prune workflows"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	if err := backend.ValidateWorkflowPrune(olderThan); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	cutoff := micros(b.now().Add(-olderThan))
	total := 0
	for {
		var ids []int64
		more := false
		err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
			ids, more = ids[:0], false
			w := &wfTx{ctx: ctx, tx: tx, st: st}
			type found struct{ id, tasks int64 }
			all, err := queryAll(w, qWorkflowsToPrune, []any{cutoff, int64(backend.ChunkSize)}, func(r *sql.Rows) (f found, err error) {
				return f, r.Scan(&f.id, &f.tasks)
			})
			if err != nil || len(all) == 0 {
				return err
			}
			tasks := int64(0)
			for _, f := range all {
				if len(ids) > 0 && tasks+f.tasks > backend.ChunkSize {
					break
				}
				ids = append(ids, f.id)
				tasks += f.tasks
			}
			more = len(ids) < len(all) || len(all) == backend.ChunkSize
			list := jsonInts(ids)
			for _, q := range []string{qPruneEdges, qPruneTasks, qPruneWorkflows} {
				if _, err := tx.ExecContext(ctx, q, list); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(ids)
		if !more {
			return total, nil
		}
	}
}
