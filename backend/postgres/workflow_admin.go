package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// WorkflowCancel implements backend.Workflower in one transaction that
// locks in the order ending a task does (workflow_sql.go): the live jobs of
// the workflow's active tasks, then all its tasks, then the workflow row.
// Once the tasks are locked no task of the workflow can end, release or
// come back from a replay until the cancel commits, so the states it reads
// then are the ones it changes. The jobs of active tasks are cancelled by
// the statement JobCancel runs (sqlCancel): pending ones end cancelled at
// once, reserved ones become cancelling; each task ends cancelled now, and
// when a cancelling job ends later its task, no longer active, is left as
// it is.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (backend.WorkflowCancelResult, error) {
	op := fmt.Sprintf("cancel workflow %d", id)
	wq := b.wq()
	var res backend.WorkflowCancelResult
	err := b.do(ctx, op, func(ctx context.Context) error {
		res = backend.WorkflowCancelResult{}
		var state string
		if err := b.pool.QueryRow(ctx, wq.state, id).Scan(&state); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("no workflow %d: %w", id, backend.ErrNotFound)
			}
			return err
		}
		res.State = backend.WorkflowState(state)
		if res.State != backend.WorkflowRunning {
			return nil
		}
		return b.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, wq.cancelJobs, id); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, wq.cancelTasks, id)
			if err != nil {
				return err
			}
			var (
				waiting int
				ids     []int64
				idx     int32
				st      string
				job     pgtype.Int8
			)
			_, err = pgx.ForEachRow(rows, []any{&idx, &st, &job}, func() error {
				switch backend.TaskState(st) {
				case backend.TaskWaiting:
					waiting++
				case backend.TaskActive:
					if job.Valid {
						ids = append(ids, job.Int64)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, wq.lock, id).Scan(&state); err != nil {
				return err
			}
			res.State = backend.WorkflowState(state)
			if res.State != backend.WorkflowRunning {
				return nil // it ended while the tasks were being locked
			}
			res.Cancelled = waiting
			if len(ids) > 0 {
				rows, err := tx.Query(ctx, b.rq.cancel, ids)
				if err != nil {
					return err
				}
				var jid int64
				var outcome, attempt int32
				var wf pgtype.Int8
				_, err = pgx.ForEachRow(rows, []any{&jid, &outcome, &attempt, &wf}, func() error {
					switch backend.CancelOutcome(outcome) {
					case backend.CancelRequested, backend.CancelAlready:
						// Running: its holder is told to stop.
						res.Requested++
					default:
						res.Cancelled++
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, wq.cancelEnd, id, backend.CancelReasonWorkflow); err != nil {
				return err
			}
			res.Changed, res.State = true, backend.WorkflowCancelled
			return nil
		})
	})
	if err != nil {
		return backend.WorkflowCancelResult{}, err
	}
	return res, nil
}

// WorkflowPrune implements backend.Workflower in chunks (sqlWorkflowPrune),
// each its own statement: at most backend.ChunkSize tasks' rows per chunk,
// past the first workflow of a chunk, so no transaction holds a large
// workflow's locks along with many others.
func (b *Backend) WorkflowPrune(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "prune workflows"
	if err := backend.ValidateWorkflowPrune(olderThan); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	total := 0
	for {
		var n int64
		err := b.do(ctx, op, func(ctx context.Context) error {
			return b.pool.QueryRow(ctx, b.wq().prune, micros(olderThan), backend.ChunkSize).Scan(&n)
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n == 0 {
			return total, nil
		}
	}
}
