package jobview

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/redact"
)

// Workflow is a workflow as the admin API and 'jobq workflows --json'
// show it; Tasks is left out of lists.
type Workflow struct {
	ID         int64          `json:"id"`
	Name       string         `json:"name"`
	State      string         `json:"state"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	Counts     TaskCounts     `json:"counts"`
	Tasks      []WorkflowTask `json:"tasks,omitempty"`
}

// TaskCounts counts a workflow's tasks by state.
type TaskCounts struct {
	Waiting   int `json:"waiting"`
	Active    int `json:"active"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// WorkflowTask is one task of a workflow.
type WorkflowTask struct {
	Name     string    `json:"name"`
	State    string    `json:"state"`
	JobID    int64     `json:"job_id,omitempty"` // absent until the task's job exists
	Queue    string    `json:"queue"`
	Type     string    `json:"type"`
	Priority int       `json:"priority"`
	Deps     []TaskDep `json:"deps"`
	// WaitingOn names the dependencies not ended yet (waiting tasks only).
	WaitingOn  []string        `json:"waiting_on,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// TaskDep is one dependency of a task and its policy: "cancel" (the
// task is cancelled if the dependency does not succeed) or "continue".
type TaskDep struct {
	Task   string `json:"task"`
	Policy string `json:"policy"`
}

// WorkflowOf is w with its tasks (when it has them), results masked like
// payloads and reasons like error texts: a reason is a job's error.
func WorkflowOf(m *redact.Masker, w *backend.Workflow) Workflow {
	out := Workflow{
		ID: w.ID, Name: w.Name, State: string(w.State), CreatedAt: w.CreatedAt, FinishedAt: timePtr(w.FinishedAt),
		Counts: TaskCounts{Waiting: w.Counts.Waiting, Active: w.Counts.Active, Succeeded: w.Counts.Succeeded,
			Failed: w.Counts.Failed, Cancelled: w.Counts.Cancelled},
	}
	for _, t := range w.Tasks {
		out.Tasks = append(out.Tasks, TaskOf(m, t))
	}
	return out
}

// TaskOf is one task as WorkflowTask.
func TaskOf(m *redact.Masker, t *backend.WorkflowTask) WorkflowTask {
	out := WorkflowTask{
		Name: t.Name, State: string(t.State), JobID: t.JobID, Queue: t.Queue, Type: t.Type, Priority: t.Priority,
		Deps: make([]TaskDep, len(t.Deps)), WaitingOn: t.WaitingOn, Reason: m.Text(t.Reason), FinishedAt: timePtr(t.FinishedAt),
	}
	for i, d := range t.Deps {
		out.Deps[i] = TaskDep{Task: d.Task, Policy: d.Policy.String()}
	}
	if len(t.Result) > 0 {
		out.Result = Payload(m, t.Result)
	}
	return out
}

// WorkflowList is rows as WorkflowOf shows them.
func WorkflowList(m *redact.Masker, rows []*backend.Workflow) []Workflow {
	return each(rows, func(w *backend.Workflow) Workflow { return WorkflowOf(m, w) })
}

// Replayable returns the job IDs of the failed tasks among tasks whose
// job is still among the failed jobs (not purged, nor replayed since the
// tasks were read): what 'jobq failed retry' and the replay routes take
// to run such a task again. One lookup of a failed job per failed task.
func Replayable(ctx context.Context, in *jobq.Inspector, tasks []*backend.WorkflowTask) (map[int64]bool, error) {
	out := map[int64]bool{}
	for _, t := range tasks {
		if t.State != backend.TaskFailed || t.JobID == 0 {
			continue
		}
		switch _, err := in.Failed(ctx, t.JobID); {
		case err == nil:
			out[t.JobID] = true
		case !errors.Is(err, jobq.ErrNotFound):
			return out, err
		}
	}
	return out, nil
}
