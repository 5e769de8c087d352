package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// WorkflowGet implements backend.Workflower: the workflow and its tasks
// in one snapshot (sqlWorkflowGet), their edges, which never change, in
// the same round trip.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.Workflow, error) {
	op := fmt.Sprintf("get workflow %d", id)
	var wf *backend.Workflow
	err := b.do(ctx, op, func(ctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue(b.wq().get, id)
		batch.Queue(b.wq().edges, id)
		br := b.pool.SendBatch(ctx, batch)
		var err error
		wf, err = readWorkflow(br)
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return nil, err
	}
	return wf, nil
}

// readWorkflow reads WorkflowGet's batch; no workflow is
// backend.ErrNotFound.
func readWorkflow(br pgx.BatchResults) (*backend.Workflow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	var (
		wf               *backend.Workflow
		w                backend.Workflow
		state, taskState string
		finished, finAt  pgtype.Timestamptz
		idx              int32
		jobID            pgtype.Int8
		result           []byte
		reason           pgtype.Text
		name, queue, typ string
		priority         int32
	)
	dest := []any{&w.ID, &w.Name, &state, &w.CreatedAt, &finished,
		&idx, &name, &taskState, &jobID, &queue, &typ, &priority, &result, &reason, &finAt}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if wf == nil {
			w.State, w.FinishedAt = backend.WorkflowState(state), finished.Time
			wf = &w
		}
		t := &backend.WorkflowTask{
			Name: name, State: backend.TaskState(taskState), JobID: jobID.Int64,
			Queue: queue, Type: typ, Priority: int(priority),
			Reason: reason.String, FinishedAt: finAt.Time,
		}
		if result != nil {
			t.Result = append([]byte(nil), result...)
		}
		if int(idx) != len(wf.Tasks) {
			return fmt.Errorf("workflow %d: task %q has index %d, want %d", wf.ID, name, idx, len(wf.Tasks))
		}
		wf.Tasks = append(wf.Tasks, t)
		countTask(&wf.Counts, t.State)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if wf == nil {
		return nil, backend.ErrNotFound
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	var to, from int32
	var policy int16
	_, err = pgx.ForEachRow(rows, []any{&to, &from, &policy}, func() error {
		if int(to) >= len(wf.Tasks) || int(from) >= len(wf.Tasks) {
			return fmt.Errorf("workflow %d: edge %d -> %d outside its %d tasks", wf.ID, from, to, len(wf.Tasks))
		}
		t, dep := wf.Tasks[to], wf.Tasks[from]
		t.Deps = append(t.Deps, backend.Dep{Task: dep.Name, Policy: backend.DepPolicy(policy)})
		if t.State == backend.TaskWaiting && !dep.State.Ended() {
			t.WaitingOn = append(t.WaitingOn, dep.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wf, nil
}

// WorkflowList implements backend.Workflower.
func (b *Backend) WorkflowList(ctx context.Context, params backend.WorkflowListParams) ([]*backend.Workflow, error) {
	const op = "list workflows"
	limit, err := backend.ValidatePage(params.Limit, params.BeforeID)
	if err == nil {
		err = validateWorkflowState(params.State)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	state := pgtype.Text{String: string(params.State), Valid: params.State != ""}
	before := pgtype.Int8{Int64: params.BeforeID, Valid: params.BeforeID > 0}
	var out []*backend.Workflow
	err = b.do(ctx, op, func(ctx context.Context) error {
		out = nil
		rows, err := b.pool.Query(ctx, b.wq().list, state, before, limit)
		if err != nil {
			return err
		}
		var (
			w        backend.Workflow
			st       string
			finished pgtype.Timestamptz
			c        [5]int64
		)
		dest := []any{&w.ID, &w.Name, &st, &w.CreatedAt, &finished, &c[0], &c[1], &c[2], &c[3], &c[4]}
		_, err = pgx.ForEachRow(rows, dest, func() error {
			wf := w
			wf.State, wf.FinishedAt = backend.WorkflowState(st), finished.Time
			wf.Counts = backend.TaskCounts{Waiting: int(c[0]), Active: int(c[1]), Succeeded: int(c[2]), Failed: int(c[3]), Cancelled: int(c[4])}
			out = append(out, &wf)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// validateWorkflowState refuses a state filter that is not a workflow
// state ("" is none).
func validateWorkflowState(s backend.WorkflowState) error {
	switch s {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
		return nil
	}
	return &backend.InputError{Field: "state", Reason: fmt.Sprintf("%q: want running, succeeded, failed or cancelled", s)}
}

// WorkflowDeps implements backend.Workflower.
func (b *Backend) WorkflowDeps(ctx context.Context, jobID int64) ([]backend.TaskOutcome, error) {
	op := fmt.Sprintf("read dependencies of job %d", jobID)
	var out []backend.TaskOutcome
	err := b.do(ctx, op, func(ctx context.Context) error {
		out = nil
		rows, err := b.pool.Query(ctx, b.wq().deps, jobID)
		if err != nil {
			return err
		}
		found := false
		var (
			name, state, reason pgtype.Text
			policy              pgtype.Int2
			result              []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&name, &policy, &state, &result, &reason}, func() error {
			found = true
			if !name.Valid {
				return nil // a task without dependencies
			}
			o := backend.TaskOutcome{Name: name.String, Policy: backend.DepPolicy(policy.Int16), State: backend.TaskState(state.String), Reason: reason.String}
			if result != nil {
				o.Result = append([]byte(nil), result...)
			}
			out = append(out, o)
			return nil
		})
		if err == nil && !found {
			err = fmt.Errorf("job %d is no workflow task's: %w", jobID, backend.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []backend.TaskOutcome{}
	}
	return out, nil
}

// WorkflowStats implements backend.Workflower. It counts every workflow:
// an operator's call, not a hot path.
func (b *Backend) WorkflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	var s backend.WorkflowStats
	err := b.do(ctx, "workflow stats", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.wq().stats).Scan(&s.Running, &s.Succeeded, &s.Failed, &s.Cancelled, &s.TasksWaiting)
	})
	if err != nil {
		return backend.WorkflowStats{}, err
	}
	return s, nil
}

// WorkflowCheck implements backend.Workflower with one statement, so the
// counts it compares come from one snapshot.
func (b *Backend) WorkflowCheck(ctx context.Context) ([]backend.WorkflowDrift, error) {
	var out []backend.WorkflowDrift
	err := b.do(ctx, "check workflows", func(ctx context.Context) error {
		out = nil
		rows, err := b.pool.Query(ctx, b.wq().check)
		if err != nil {
			return err
		}
		var d backend.WorkflowDrift
		var stored, want int32
		_, err = pgx.ForEachRow(rows, []any{&d.WorkflowID, &d.Task, &stored, &want}, func() error {
			d.Stored, d.Want = int(stored), int(want)
			out = append(out, d)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countTask adds a task in state s to c.
func countTask(c *backend.TaskCounts, s backend.TaskState) {
	switch s {
	case backend.TaskWaiting:
		c.Waiting++
	case backend.TaskActive:
		c.Active++
	case backend.TaskSucceeded:
		c.Succeeded++
	case backend.TaskFailed:
		c.Failed++
	case backend.TaskCancelled:
		c.Cancelled++
	}
}
