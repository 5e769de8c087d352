package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// WorkflowGet implements backend.Workflower on the read connections, from
// one snapshot.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.Workflow, error) {
	op := fmt.Sprintf("get workflow %d", id)
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	var wf *backend.Workflow
	err := b.read(ctx, func(tx *sql.Tx) error {
		var err error
		if wf, err = scanWorkflow(tx.QueryRowContext(ctx, qWorkflowGet, id)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, qWorkflowTasks, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				idx, prio       int64
				t               backend.WorkflowTask
				state           string
				jobID, finished sql.NullInt64
			)
			if err := rows.Scan(&idx, &t.Name, &state, &jobID, &t.Queue, &t.Type, &prio, &t.Result, &t.Reason, &finished); err != nil {
				_ = rows.Close()
				return err
			}
			if idx != int64(len(wf.Tasks)) {
				_ = rows.Close()
				return fmt.Errorf("task %q has index %d, want %d", t.Name, idx, len(wf.Tasks))
			}
			t.State, t.JobID, t.Priority = backend.TaskState(state), jobID.Int64, int(prio)
			if finished.Valid {
				t.FinishedAt = fromMicros(finished.Int64)
			}
			if t.State != backend.TaskSucceeded {
				t.Result = nil
			}
			wf.Tasks = append(wf.Tasks, &t)
			countTask(&wf.Counts, t.State, 1)
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, qWorkflowEdges, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var from, to, policy int64
			if err := rows.Scan(&from, &to, &policy); err != nil {
				return err
			}
			if from >= int64(len(wf.Tasks)) || to >= int64(len(wf.Tasks)) {
				return fmt.Errorf("an edge names task %d -> %d of %d", from, to, len(wf.Tasks))
			}
			d, t := wf.Tasks[from], wf.Tasks[to]
			t.Deps = append(t.Deps, backend.Dep{Task: d.Name, Policy: backend.DepPolicy(policy)})
			if t.State == backend.TaskWaiting && !d.State.Ended() {
				t.WaitingOn = append(t.WaitingOn, d.Name)
			}
		}
		return rows.Err()
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return wf, nil
}

// WorkflowList implements backend.Workflower on the read connections: a
// page of workflows, then their task counts in one query.
func (b *Backend) WorkflowList(ctx context.Context, params backend.WorkflowListParams) ([]*backend.Workflow, error) {
	const op = "list workflows"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	limit, err := backend.ValidatePage(params.Limit, params.BeforeID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	switch params.State {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
	default:
		return nil, fmt.Errorf("%s: %w", op, &backend.InputError{Field: "state", Reason: fmt.Sprintf("%q: want running, succeeded, failed or cancelled", params.State)})
	}
	var args []any
	if params.State != "" {
		args = append(args, string(params.State))
	}
	if params.BeforeID > 0 {
		args = append(args, params.BeforeID)
	}
	args = append(args, int64(limit))
	out := []*backend.Workflow{}
	err = b.read(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, workflowListSQL(params.State != "", params.BeforeID > 0), args...)
		if err != nil {
			return err
		}
		byID := map[int64]*backend.Workflow{}
		var ids []int64
		for rows.Next() {
			wf, err := scanWorkflow(rows)
			if err != nil {
				_ = rows.Close()
				return err
			}
			out = append(out, wf)
			byID[wf.ID] = wf
			ids = append(ids, wf.ID)
		}
		if err := closeRows(rows); err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.QueryContext(ctx, qWorkflowCounts, jsonInts(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, n int64
			var state string
			if err := rows.Scan(&id, &state, &n); err != nil {
				return err
			}
			if wf := byID[id]; wf != nil {
				countTask(&wf.Counts, backend.TaskState(state), int(n))
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// WorkflowDeps implements backend.Workflower on the read connections.
func (b *Backend) WorkflowDeps(ctx context.Context, jobID int64) ([]backend.TaskOutcome, error) {
	op := fmt.Sprintf("get the dependencies of job %d", jobID)
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	out := []backend.TaskOutcome{}
	err := b.read(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		var wf, idx int64
		if err := tx.QueryRowContext(ctx, qTaskOfJob, jobID).Scan(&wf, &idx); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, qTaskDepOutcomes, wf, idx)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o backend.TaskOutcome
			var policy int64
			var state string
			if err := rows.Scan(&o.Name, &policy, &state, &o.Result, &o.Reason); err != nil {
				return err
			}
			o.Policy, o.State = backend.DepPolicy(policy), backend.TaskState(state)
			if o.State != backend.TaskSucceeded {
				o.Result = nil
			}
			out = append(out, o)
		}
		return rows.Err()
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: it is not a workflow task's job: %w", op, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// WorkflowStats implements backend.Workflower on the read connections,
// from one snapshot.
func (b *Backend) WorkflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	const op = "workflow stats"
	var s backend.WorkflowStats
	if err := b.checkOpen(op); err != nil {
		return s, err
	}
	err := b.read(ctx, func(tx *sql.Tx) error {
		s = backend.WorkflowStats{}
		rows, err := tx.QueryContext(ctx, qWorkflowStats)
		if err != nil {
			return err
		}
		for rows.Next() {
			var state string
			var n int64
			if err := rows.Scan(&state, &n); err != nil {
				_ = rows.Close()
				return err
			}
			switch backend.WorkflowState(state) {
			case backend.WorkflowRunning:
				s.Running = n
			case backend.WorkflowSucceeded:
				s.Succeeded = n
			case backend.WorkflowFailed:
				s.Failed = n
			case backend.WorkflowCancelled:
				s.Cancelled = n
			}
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, qTasksWaiting).Scan(&s.TasksWaiting)
	})
	if err != nil {
		return backend.WorkflowStats{}, b.mapErr(ctx, op, err)
	}
	return s, nil
}

// WorkflowCheck implements backend.Workflower on the read connections,
// from one snapshot: it writes nothing. Drifts come by workflow ID, each
// workflow's own count before its tasks', those in index order.
func (b *Backend) WorkflowCheck(ctx context.Context) ([]backend.WorkflowDrift, error) {
	const op = "check workflows"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	var out []backend.WorkflowDrift
	err := b.read(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		var units, tasks []backend.WorkflowDrift
		for _, q := range []struct {
			query string
			dst   *[]backend.WorkflowDrift
			task  bool
		}{{qCheckUnfinished, &units, false}, {qCheckWaiting, &tasks, true}} {
			rows, err := tx.QueryContext(ctx, q.query)
			if err != nil {
				return err
			}
			for rows.Next() {
				var d backend.WorkflowDrift
				var stored, want int64
				dest := []any{&d.WorkflowID, &stored, &want}
				if q.task {
					dest = []any{&d.WorkflowID, &d.Task, &stored, &want}
				}
				if err := rows.Scan(dest...); err != nil {
					_ = rows.Close()
					return err
				}
				if stored != want {
					d.Stored, d.Want = int(stored), int(want)
					*q.dst = append(*q.dst, d)
				}
			}
			if err := closeRows(rows); err != nil {
				return err
			}
		}
		// Merge by workflow ID, both lists being in that order.
		for len(units) > 0 || len(tasks) > 0 {
			if len(tasks) == 0 || (len(units) > 0 && units[0].WorkflowID <= tasks[0].WorkflowID) {
				out, units = append(out, units[0]), units[1:]
			} else {
				out, tasks = append(out, tasks[0]), tasks[1:]
			}
		}
		return nil
	})
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// scanWorkflow reads one row of workflowColumns.
func scanWorkflow(s scanner) (*backend.Workflow, error) {
	var (
		wf       backend.Workflow
		state    string
		created  int64
		finished sql.NullInt64
	)
	if err := s.Scan(&wf.ID, &wf.Name, &state, &created, &finished); err != nil {
		return nil, err
	}
	wf.State = backend.WorkflowState(state)
	wf.CreatedAt = fromMicros(created)
	if finished.Valid {
		wf.FinishedAt = fromMicros(finished.Int64)
	}
	return &wf, nil
}

// countTask adds n tasks in state to c.
func countTask(c *backend.TaskCounts, state backend.TaskState, n int) {
	switch state {
	case backend.TaskWaiting:
		c.Waiting += n
	case backend.TaskActive:
		c.Active += n
	case backend.TaskSucceeded:
		c.Succeeded += n
	case backend.TaskFailed:
		c.Failed += n
	case backend.TaskCancelled:
		c.Cancelled += n
	}
}
