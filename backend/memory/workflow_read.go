package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jobq/jobq/backend"
)

// defaultWorkflowListLimit is WorkflowListParams.Limit when it is 0.
const defaultWorkflowListLimit = 100

// WorkflowGet implements backend.Workflower.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.Workflow, error) {
	op := fmt.Sprintf("get workflow %d", id)
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	w := b.wf.byID[id]
	if w == nil {
		return nil, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	out := w.row()
	out.Tasks = make([]*backend.WorkflowTask, len(w.tasks))
	for i, t := range w.tasks {
		wt := &backend.WorkflowTask{
			Name:       t.name,
			State:      t.state,
			JobID:      t.jobID,
			Queue:      t.job.Queue,
			Type:       t.job.Type,
			Priority:   t.job.Priority,
			Result:     bytes.Clone(t.result),
			Reason:     t.reason,
			FinishedAt: t.finishedAt,
		}
		if len(t.deps) > 0 {
			wt.Deps = make([]backend.Dep, len(t.deps))
		}
		for k, e := range t.deps {
			wt.Deps[k] = backend.Dep{Task: e.task.name, Policy: e.policy}
			if t.state == backend.TaskWaiting && !e.task.state.Ended() {
				wt.WaitingOn = append(wt.WaitingOn, e.task.name)
			}
		}
		out.Tasks[i] = wt
	}
	return out, nil
}

// row is w without its tasks.
func (w *workflow) row() *backend.Workflow {
	return &backend.Workflow{
		ID:         w.id,
		Name:       w.name,
		State:      w.state,
		CreatedAt:  w.createdAt,
		FinishedAt: w.finishedAt,
		Counts:     w.counts,
	}
}

// WorkflowList implements backend.Workflower. An unknown state filter is
// an *InputError.
func (b *Backend) WorkflowList(ctx context.Context, params backend.WorkflowListParams) ([]*backend.Workflow, error) {
	const op = "list workflows"
	limit, err := backend.PageLimit(params.Limit, defaultWorkflowListLimit)
	if err == nil {
		err = validateWorkflowState(params.State)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	list := b.wf.list
	end := len(list)
	if params.BeforeID > 0 {
		end = sort.Search(len(list), func(i int) bool { return list[i].id >= params.BeforeID })
	}
	var out []*backend.Workflow
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		if w := list[i]; params.State == "" || w.state == params.State {
			out = append(out, w.row())
		}
	}
	return out, nil
}

// validateWorkflowState refuses a state filter that is not "" or a
// workflow state.
func validateWorkflowState(s backend.WorkflowState) error {
	switch s {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
		return nil
	}
	return &backend.InputError{Field: "state", Reason: fmt.Sprintf("%q: not a workflow state (running, succeeded, failed, cancelled)", s)}
}

// WorkflowDeps implements backend.Workflower.
func (b *Backend) WorkflowDeps(ctx context.Context, jobID int64) ([]backend.TaskOutcome, error) {
	op := fmt.Sprintf("read dependencies of job %d", jobID)
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	t := b.wf.byJob[jobID]
	if t == nil || b.wf.byID[t.wf.id] != t.wf {
		// A pruned workflow's failed task keeps its entry (see
		// WorkflowPrune), but the workflow is gone.
		return nil, fmt.Errorf("%s: %w (not a workflow task's job)", op, backend.ErrNotFound)
	}
	out := make([]backend.TaskOutcome, len(t.deps))
	for i, e := range t.deps {
		d := e.task
		out[i] = backend.TaskOutcome{Name: d.name, Policy: e.policy, State: d.state, Reason: d.reason}
		if d.state == backend.TaskSucceeded {
			out[i].Result = bytes.Clone(d.result)
		}
	}
	return out, nil
}

// WorkflowStats implements backend.Workflower. It scans the workflows:
// stats are read once per scrape, not per job.
func (b *Backend) WorkflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	if err := b.lock(ctx, "workflow stats"); err != nil {
		return backend.WorkflowStats{}, err
	}
	defer b.mu.Unlock()
	var s backend.WorkflowStats
	for _, w := range b.wf.list {
		switch w.state {
		case backend.WorkflowRunning:
			s.Running++
			s.TasksWaiting += int64(w.counts.Waiting)
		case backend.WorkflowSucceeded:
			s.Succeeded++
		case backend.WorkflowFailed:
			s.Failed++
		case backend.WorkflowCancelled:
			s.Cancelled++
		}
	}
	return s, nil
}

// WorkflowCheck implements backend.Workflower: it recounts from the tasks'
// states, not from the counters it checks. A dependency counts while it
// has not ended; one that ended, however and whatever its policy, no
// longer does (one that failed with DepCancel would have cancelled a
// waiting dependant: that shows as the dependant's own state, not here).
func (b *Backend) WorkflowCheck(ctx context.Context) ([]backend.WorkflowDrift, error) {
	if err := b.lock(ctx, "check workflows"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []backend.WorkflowDrift
	for _, w := range b.wf.list {
		if w.state != backend.WorkflowRunning {
			continue
		}
		unfinished := 0
		for _, t := range w.tasks {
			if t.state.Ended() {
				continue
			}
			unfinished++
			if t.state != backend.TaskWaiting {
				continue
			}
			want := 0
			for _, e := range t.deps {
				if !e.task.state.Ended() {
					want++
				}
			}
			if want != t.waiting {
				out = append(out, backend.WorkflowDrift{WorkflowID: w.id, Task: t.name, Stored: t.waiting, Want: want})
			}
		}
		if unfinished != w.unfinished {
			out = append(out, backend.WorkflowDrift{WorkflowID: w.id, Stored: w.unfinished, Want: unfinished})
		}
	}
	return out, nil
}

// WorkflowPrune implements backend.Workflower. Memory holds no lock that
// others wait on for long, so it prunes in one pass rather than in chunks.
// A pruned task's job that is still live (a cancelling one) or in
// failed_jobs becomes a plain job.
func (b *Backend) WorkflowPrune(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "prune workflows"
	if err := backend.ValidateWorkflowPrune(olderThan); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	cutoff := b.now().Add(-olderThan)
	s := &b.wf
	n := 0
	// A failed workflow with a task whose job is in failed_jobs can still
	// be replayed and stays.
	replayable := func(w *workflow) bool {
		for _, t := range w.tasks {
			if _, failed := b.failedByJob[t.jobID]; failed && t.state == backend.TaskFailed {
				return true
			}
		}
		return false
	}
	s.list = slices.DeleteFunc(s.list, func(w *workflow) bool {
		if w.state == backend.WorkflowRunning || !w.finishedAt.Before(cutoff) ||
			(w.state == backend.WorkflowFailed && replayable(w)) {
			return false
		}
		for _, t := range w.tasks {
			// A failed task's job still in failed_jobs (a cancelled
			// workflow's) keeps its entry, so that a replay still finds
			// its workflow cancelled and refuses.
			if _, failed := b.failedByJob[t.jobID]; t.jobID != 0 && !failed {
				delete(s.byJob, t.jobID)
			}
		}
		delete(s.byID, w.id)
		n++
		return true
	})
	if c := cap(s.list); c > 64 && len(s.list) < c/4 {
		s.list = slices.Clip(slices.Clone(s.list))
	}
	return n, nil
}
