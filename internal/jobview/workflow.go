package jobview

import (
	"context"
	"encoding/json"
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

// failedPage and failedPages bound the search for failed tasks' failed
// jobs: pages of failedPage rows, newest first from the moment the tasks
// failed, failedPages of them beyond one per failedPage tasks sought.
const (
	failedPage  = 1000
	failedPages = 10
)

// FailedIDOf returns the failed-jobs ID of a failed task's job (what
// 'jobq failed retry' and the replay routes take), 0 when the task has not
// failed or its failed job is no longer there (purged, or replayed).
func FailedIDOf(ctx context.Context, in *jobq.Inspector, t *backend.WorkflowTask) (int64, error) {
	ids, err := FailedIDs(ctx, in, []*backend.WorkflowTask{t})
	return ids[t.JobID], err
}

// FailedIDs maps the job ID of each failed task among tasks to the ID of
// its failed job, leaving out those not found (see FailedIDOf). Failed
// jobs are found by their own ID, not their job's, so it searches the
// failed jobs of each queue and type the tasks have, newest first from a
// minute after the last of them failed (the same clock wrote both times):
// a task's row is on the first pages unless thousands of jobs of its type
// failed since.
func FailedIDs(ctx context.Context, in *jobq.Inspector, tasks []*backend.WorkflowTask) (map[int64]int64, error) {
	type group struct {
		queue, typ string
	}
	want := map[group]map[int64]bool{}
	last := map[group]time.Time{}
	for _, t := range tasks {
		if t.State != backend.TaskFailed || t.JobID == 0 {
			continue
		}
		g := group{t.Queue, t.Type}
		if want[g] == nil {
			want[g] = map[int64]bool{}
		}
		want[g][t.JobID] = true
		if t.FinishedAt.After(last[g]) {
			last[g] = t.FinishedAt
		}
	}
	out := map[int64]int64{}
	for g, jobs := range want {
		f := jobq.FailedFilter{Queue: g.queue, Type: g.typ}
		if !last[g].IsZero() {
			f.FailedBefore = last[g].Add(time.Minute)
		}
		var before int64
		for range failedPages + len(jobs)/failedPage {
			rows, err := in.FailedPage(ctx, f, failedPage, before)
			if err != nil {
				return out, err
			}
			for _, r := range rows {
				if jobs[r.JobID] {
					out[r.JobID] = r.ID
					delete(jobs, r.JobID)
				}
			}
			if len(jobs) == 0 || len(rows) < failedPage {
				break
			}
			before = rows[len(rows)-1].ID
		}
	}
	return out, nil
}
