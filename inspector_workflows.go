package jobq

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// The workflow types are the backend's, re-exported so that handlers and
// operators' code need only this package.
type (
	// WorkflowInfo is one stored workflow: its state, counts of its tasks
	// by state and (from Inspector.Workflow) the tasks themselves.
	WorkflowInfo = backend.Workflow
	// WorkflowTask is one task of a stored workflow, with its result or
	// the reason it failed or was cancelled.
	WorkflowTask = backend.WorkflowTask
	// TaskOutcome is how one dependency of a task ended (Dependencies).
	TaskOutcome = backend.TaskOutcome
	// TaskCounts counts a workflow's tasks by state.
	TaskCounts = backend.TaskCounts
	// WorkflowState is where a workflow is: running, succeeded, failed
	// or cancelled.
	WorkflowState = backend.WorkflowState
	// TaskState is where a task is: waiting, active, succeeded, failed
	// or cancelled.
	TaskState = backend.TaskState
	// WorkflowCancelResult says what CancelWorkflow did.
	WorkflowCancelResult = backend.WorkflowCancelResult
	// WorkflowStats counts workflows by state.
	WorkflowStats = backend.WorkflowStats
	// WorkflowDrift is one stored count that WorkflowCheck found wrong.
	WorkflowDrift = backend.WorkflowDrift
)

// The states of workflows and tasks, re-exported for the same reason.
const (
	WorkflowRunning   = backend.WorkflowRunning
	WorkflowSucceeded = backend.WorkflowSucceeded
	WorkflowFailed    = backend.WorkflowFailed
	WorkflowCancelled = backend.WorkflowCancelled

	TaskWaiting   = backend.TaskWaiting
	TaskActive    = backend.TaskActive
	TaskSucceeded = backend.TaskSucceeded
	TaskFailed    = backend.TaskFailed
	TaskCancelled = backend.TaskCancelled
)

// workflower returns the inspector's backend as a Workflower, or the
// error saying op needs one.
func (i *Inspector) workflower(op string) (backend.Workflower, error) {
	wf, ok := backend.As[backend.Workflower](i.b)
	if !ok {
		return nil, noWorkflows(op, i.b)
	}
	return wf, nil
}

// Workflows lists workflows in state ("" for all, or "running",
// "succeeded", "failed", "cancelled"), newest first, without their tasks
// (Counts summarises them): limit of them (0 means 100) with IDs below
// beforeID (0: from the newest). Pass the last ID of a page as beforeID to
// get the next. Another state is an error wrapping ErrInvalidInput naming
// the choices, so a typo is not an empty list.
func (i *Inspector) Workflows(ctx context.Context, state string, limit int, beforeID int64) ([]*WorkflowInfo, error) {
	wf, err := i.workflower("list workflows")
	if err != nil {
		return nil, err
	}
	switch WorkflowState(state) {
	case "", WorkflowRunning, WorkflowSucceeded, WorkflowFailed, WorkflowCancelled:
	default:
		return nil, &backend.InputError{Field: "state", Reason: fmt.Sprintf("%q: want running, succeeded, failed or cancelled (or none for all)", state)}
	}
	if limit < 0 || beforeID < 0 {
		return nil, fmt.Errorf("%w: limit and before must not be negative", ErrInvalidInput)
	}
	return wf.WorkflowList(ctx, backend.WorkflowListParams{State: WorkflowState(state), Limit: limit, BeforeID: beforeID})
}

// Workflow returns one workflow with all its tasks (in a topological
// order: every task after those it depends on), or ErrNotFound.
func (i *Inspector) Workflow(ctx context.Context, id int64) (*WorkflowInfo, error) {
	wf, err := i.workflower("get workflow")
	if err != nil {
		return nil, err
	}
	if id < 1 {
		return nil, &backend.InputError{Field: "id", Reason: fmt.Sprintf("%d: workflow IDs start at 1", id)}
	}
	return wf.WorkflowGet(ctx, id)
}

// CancelWorkflow stops a running workflow for good: its waiting tasks
// and pending jobs are cancelled at once, the handlers running its tasks
// are told to stop (their contexts end with ErrJobCancelled), and nothing
// more is released; a replay will not revive its failed tasks. A
// workflow that already ended is left as it is (Changed false). An
// unknown ID is ErrNotFound.
func (i *Inspector) CancelWorkflow(ctx context.Context, id int64) (WorkflowCancelResult, error) {
	wf, err := i.workflower("cancel workflow")
	if err != nil {
		return WorkflowCancelResult{}, err
	}
	if id < 1 {
		return WorkflowCancelResult{}, &backend.InputError{Field: "id", Reason: fmt.Sprintf("%d: workflow IDs start at 1", id)}
	}
	return wf.WorkflowCancel(ctx, id)
}

// WorkflowStats counts workflows by state and the tasks waiting on their
// dependencies: the numbers a dashboard or a metric shows.
func (i *Inspector) WorkflowStats(ctx context.Context) (WorkflowStats, error) {
	wf, err := i.workflower("workflow stats")
	if err != nil {
		return WorkflowStats{}, err
	}
	return wf.WorkflowStats(ctx)
}

// WorkflowCheck recomputes the counts the backend keeps for running
// workflows (each waiting task's dependencies left, each workflow's
// unfinished tasks) and returns those that differ. It is an alarm, not a
// repair: an empty result is the healthy one, and any drift is a bug to
// report, since a wrong count can leave a task waiting forever or end a
// workflow early. It only reads.
func (i *Inspector) WorkflowCheck(ctx context.Context) ([]WorkflowDrift, error) {
	wf, err := i.workflower("check workflows")
	if err != nil {
		return nil, err
	}
	return wf.WorkflowCheck(ctx)
}
