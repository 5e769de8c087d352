package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobq/jobq/backend"
)

var (
	_ backend.Workflower         = (*Backend)(nil)
	_ backend.WorkflowTxInserter = (*Backend)(nil)
)

// WorkflowInsert implements backend.Workflower: the workflow, its tasks,
// their edges and the jobs of the tasks without dependencies go in in one
// write transaction. In-process subscribers of those jobs' queues are
// woken after the commit.
func (b *Backend) WorkflowInsert(ctx context.Context, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	order, err := backend.ValidateWorkflow(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out *backend.WorkflowInserted
	woken := map[string]struct{}{}
	err = b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		clear(woken)
		w := &wfTx{ctx: ctx, tx: tx, st: st, now: b.now(), woken: woken}
		var err error
		out, err = w.insertWorkflow(params, order)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.hub.notify(woken)
	return out, nil
}

// WorkflowInsertTx implements backend.WorkflowTxInserter: the workflow is
// inserted by the caller's transaction (a *sql.Tx as for JobInsertManyTx,
// whose notes apply), so it exists if and only if that transaction
// commits. The commit is the caller's, so the subscribers of every
// Backend on the file are woken by their watcher when it sees it
// (notify.go), not at once.
func (b *Backend) WorkflowInsertTx(ctx context.Context, tx any, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow in tx"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	t, err := sqlTx(tx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	order, err := backend.ValidateWorkflow(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	w := &wfTx{ctx: ctx, tx: t, now: b.now()}
	out, err := w.insertWorkflow(params, order)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// insertWorkflow writes a validated workflow whose tasks' topological
// order is order: the workflow row, the jobs of the tasks without
// dependencies (through insertTx, like any insert), then every task in
// that order (its index is its place in it) and every edge, in multi-row
// INSERTs.
func (w *wfTx) insertWorkflow(params backend.WorkflowParams, order []int) (*backend.WorkflowInserted, error) {
	nowUS := micros(w.now)
	r, err := w.tx.ExecContext(w.ctx, qWorkflowInsert, params.Name, int64(len(params.Tasks)), nowUS)
	if err != nil {
		return nil, err
	}
	wf, err := r.LastInsertId()
	if err != nil {
		return nil, err
	}
	pos := make([]int64, len(params.Tasks)) // a task's index in order
	byName := make(map[string]int, len(params.Tasks))
	for k, i := range order {
		pos[i] = int64(k)
		byName[params.Tasks[i].Name] = i
	}
	out := &backend.WorkflowInserted{ID: wf, Jobs: map[string]int64{}}
	var roots []int
	var rootJobs []backend.InsertParams
	for _, i := range order {
		if len(params.Tasks[i].Deps) == 0 {
			roots = append(roots, i)
			rootJobs = append(rootJobs, params.Tasks[i].Job)
		}
	}
	jobOf := make(map[int]int64, len(roots))
	if len(roots) > 0 {
		ids, err := w.insertJobs(wf, rootJobs)
		if err != nil {
			return nil, err
		}
		for k, i := range roots {
			jobOf[i] = ids[k]
			out.Jobs[params.Tasks[i].Name] = ids[k]
		}
	}

	args := make([]any, 0, min(len(order), taskInsertRows)*taskInsertColumns)
	for start := 0; start < len(order); start += taskInsertRows {
		chunk := order[start:min(start+taskInsertRows, len(order))]
		args = args[:0]
		for _, i := range chunk {
			t := params.Tasks[i]
			state, job := backend.TaskWaiting, any(nil)
			if id, ok := jobOf[i]; ok {
				state, job = backend.TaskActive, id
			}
			var runAt any
			if !t.Job.RunAt.IsZero() {
				runAt = micros(t.Job.RunAt)
			}
			args = append(args, wf, pos[i], t.Name, string(state), int64(len(t.Deps)), job,
				t.Job.Queue, t.Job.Type, t.Job.Payload, int64(t.Job.Priority), int64(t.Job.MaxAttempts),
				t.Job.Delay.Microseconds(), runAt, encodeMetadata(t.Job.Metadata), nullString(t.Job.Key))
		}
		if _, err := w.tx.ExecContext(w.ctx, taskInsertSQL(len(chunk)), args...); err != nil {
			return nil, fmt.Errorf("insert tasks: %w", err)
		}
	}

	args = args[:0]
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		_, err := w.tx.ExecContext(w.ctx, edgeInsertSQL(rows), args...)
		args, rows = args[:0], 0
		if err != nil {
			return fmt.Errorf("insert dependencies: %w", err)
		}
		return nil
	}
	for i, t := range params.Tasks {
		for k, d := range t.Deps {
			args = append(args, wf, pos[byName[d.Task]], pos[i], int64(k), int64(d.Policy))
			if rows++; rows == edgeInsertRows {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
