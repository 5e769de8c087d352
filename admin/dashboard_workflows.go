package admin

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// registerWorkflows registers the workflow pages and their actions.
func (d *dashboard) registerWorkflows() {
	s := d.s
	s.handle("GET /workflows", ScopeRead, d.workflows)
	s.handle("GET /workflows/{id}", ScopeRead, d.workflow)
	s.handle("GET /workflows/{id}/failed", ScopeRead, d.workflowFailed)
	s.handle("POST /workflows/{id}/cancel", ScopeAdmin, d.post(d.cancelWorkflow))
	s.handle("POST /workflows/{id}/replay", ScopeAdmin, d.post(d.replayTask))
}

// noWorkflows is what the pages say of a backend without workflows.
const noWorkflows = "This backend does not run workflows."

// workflowFailErr renders an inspector error of a workflow page; a backend
// without workflows is 501, as any capability a backend lacks.
func (d *dashboard) workflowFailErr(w http.ResponseWriter, r *http.Request, doing string, err error) {
	if errors.Is(err, jobq.ErrNoWorkflows) {
		d.fail(w, r, http.StatusNotImplemented, "Not supported", noWorkflows)
		return
	}
	d.failErr(w, r, doing, err)
}

// stateTab is one tab of the workflow list: a state and how many
// workflows are in it.
type stateTab struct {
	State string
	Count int64
}

// workflowRow is one workflow of the list.
type workflowRow struct {
	*jobq.WorkflowInfo
	Total int
}

// workflowsData is the workflow list's data.
type workflowsData struct {
	State string
	Tabs  []stateTab
	Rows  []workflowRow
	Next  template.URL // query of the next page (url.Values encoded)
	Error string       // a backend without workflows
}

// workflows lists workflows of one state (all by default), newest first,
// paged by the last ID shown.
func (d *dashboard) workflows(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := workflowsData{State: q.Get("state")}
	switch backend.WorkflowState(data.State) {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
	default:
		d.fail(w, r, http.StatusBadRequest, "Bad input", "state: one of running, succeeded, failed, cancelled.")
		return
	}
	before, ok := cursor(q.Get("before"))
	if !ok {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "before: give the ID of the last workflow shown, a positive number.")
		return
	}
	in := d.s.opts.Inspector
	st, err := in.WorkflowStats(r.Context())
	if errors.Is(err, jobq.ErrNoWorkflows) {
		data.Error = noWorkflows
		d.render(w, r, http.StatusOK, "workflows", "Workflows", "workflows", data)
		return
	}
	if err != nil {
		d.failErr(w, r, "count workflows", err)
		return
	}
	data.Tabs = []stateTab{{"running", st.Running}, {"succeeded", st.Succeeded}, {"failed", st.Failed}, {"cancelled", st.Cancelled}}
	rows, err := in.Workflows(r.Context(), data.State, pageSize, before)
	if err != nil {
		d.workflowFailErr(w, r, "list workflows", err)
		return
	}
	for _, wf := range rows {
		c := wf.Counts
		data.Rows = append(data.Rows, workflowRow{WorkflowInfo: wf, Total: c.Waiting + c.Active + c.Succeeded + c.Failed + c.Cancelled})
	}
	if len(rows) == pageSize {
		n := url.Values{"before": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		if data.State != "" {
			n.Set("state", data.State)
		}
		data.Next = template.URL(n.Encode())
	}
	d.render(w, r, http.StatusOK, "workflows", "Workflows", "workflows", data)
}

// taskDep is one dependency as the workflow page shows it.
type taskDep struct {
	Task     string
	Continue bool // the task runs even if this dependency fails
}

// taskRow is one task of the workflow page.
type taskRow struct {
	Name       string
	State      string
	JobID      int64
	Queue      string
	Type       string
	After      []taskDep
	WaitingOn  []string
	Reason     string
	FinishedAt time.Time
	// Replay offers the failed task's replay: not for a workflow a user
	// cancelled, whose failed tasks stay failed.
	Replay bool
}

// workflowData is the workflow page's data.
type workflowData struct {
	*jobq.WorkflowInfo
	Total   int
	Running bool // cancellable
	Tasks   []taskRow
}

// workflow shows one workflow and its tasks: states, what each waits on,
// and why one failed or was cancelled.
func (d *dashboard) workflow(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "workflow")
	if !ok {
		return
	}
	wf, err := d.s.opts.Inspector.Workflow(r.Context(), id)
	if errors.Is(err, jobq.ErrNotFound) {
		d.fail(w, r, http.StatusNotFound, "Workflow not found",
			"Workflow "+strconv.FormatInt(id, 10)+" does not exist: it never did, or it ended and was pruned.")
		return
	}
	if err != nil {
		d.workflowFailErr(w, r, "read workflow "+strconv.FormatInt(id, 10), err)
		return
	}
	c := wf.Counts
	data := workflowData{WorkflowInfo: wf, Total: c.Waiting + c.Active + c.Succeeded + c.Failed + c.Cancelled,
		Running: wf.State == backend.WorkflowRunning, Tasks: make([]taskRow, len(wf.Tasks))}
	for i, t := range wf.Tasks {
		row := taskRow{Name: t.Name, State: string(t.State), JobID: t.JobID, Queue: t.Queue, Type: t.Type,
			WaitingOn: t.WaitingOn, Reason: shortReason(d.s.maskedText(t.Reason)), FinishedAt: t.FinishedAt,
			Replay: t.State == backend.TaskFailed && wf.State != backend.WorkflowCancelled}
		for _, dep := range t.Deps {
			row.After = append(row.After, taskDep{Task: dep.Task, Continue: dep.Policy == backend.DepContinue})
		}
		data.Tasks[i] = row
	}
	d.render(w, r, http.StatusOK, "workflow", "Workflow "+strconv.FormatInt(id, 10), "workflows", data)
}

// failedTask reads the workflow of the request's path and its task named
// by the "task" parameter (query or form). On failure it has answered and
// ok is false.
func (d *dashboard) failedTask(w http.ResponseWriter, r *http.Request, doing string) (id int64, task *jobq.WorkflowTask, ok bool) {
	id, ok = d.pathID(w, r, "workflow")
	if !ok {
		return 0, nil, false
	}
	name := r.Form.Get("task")
	wf, err := d.s.opts.Inspector.Workflow(r.Context(), id)
	if err != nil {
		d.workflowFailErr(w, r, doing+" of workflow "+strconv.FormatInt(id, 10), err)
		return 0, nil, false
	}
	for _, t := range wf.Tasks {
		if t.Name == name {
			return id, t, true
		}
	}
	d.fail(w, r, http.StatusNotFound, "Task not found", fmt.Sprintf("Workflow %d has no task named %q.", id, name))
	return 0, nil, false
}

// workflowFailed sends the browser to the failed job of the task named by
// ?task=, where its error, payload and attempts are.
func (d *dashboard) workflowFailed(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "The query could not be read.")
		return
	}
	id, t, ok := d.failedTask(w, r, "find the failed job of a task")
	if !ok {
		return
	}
	replayable, err := jobview.Replayable(r.Context(), d.s.opts.Inspector, []*jobq.WorkflowTask{t})
	if err != nil {
		d.failErr(w, r, "find the failed job of task "+t.Name, err)
		return
	}
	if !replayable[t.JobID] {
		d.redirect(w, r, "/workflows/"+strconv.FormatInt(id, 10), nil, taskNotFailedMsg(t))
		return
	}
	d.redirect(w, r, "/failed/"+strconv.FormatInt(t.JobID, 10), nil, "")
}

// taskNotFailedMsg says why a task has no failed job to show or replay.
func taskNotFailedMsg(t *jobq.WorkflowTask) string {
	if t.State != backend.TaskFailed {
		return fmt.Sprintf("Task %s is %s: only a failed task has a failed job to replay.", t.Name, t.State)
	}
	return fmt.Sprintf("The failed job of task %s is no longer among the failed jobs: it was purged or replayed.", t.Name)
}

// replayTask replays the failed job of the failed task named by the form's
// "task": the task runs again and the workflow is running again.
func (d *dashboard) replayTask(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.failedTask(w, r, "replay a task")
	if !ok {
		return
	}
	back := "/workflows/" + strconv.FormatInt(id, 10)
	if t.State != backend.TaskFailed || t.JobID == 0 {
		d.redirect(w, r, back, nil, "Nothing replayed. "+taskNotFailedMsg(t))
		return
	}
	// The failed job has its task's job ID.
	replayed, _, err := d.s.opts.Inspector.Replay(r.Context(), t.JobID)
	d.counts.invalidate()
	switch {
	case errors.Is(err, jobq.ErrNotFound):
		// Purged, or replayed by someone else since the task was read.
		d.redirect(w, r, back, nil, "Nothing replayed. "+taskNotFailedMsg(t))
	case err != nil:
		d.failErr(w, r, "replay task "+t.Name, err)
	case replayed == 0:
		d.redirect(w, r, back, nil, fmt.Sprintf("Task %s was not replayed: its workflow was cancelled.", t.Name))
	default:
		d.redirect(w, r, back, nil, fmt.Sprintf("Replayed task %s: its job is pending again and the workflow is running.", t.Name))
	}
}

// cancelWorkflow cancels a running workflow.
func (d *dashboard) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "workflow")
	if !ok {
		return
	}
	res, err := d.s.opts.Inspector.CancelWorkflow(r.Context(), id)
	d.counts.invalidate()
	if err != nil {
		d.workflowFailErr(w, r, "cancel workflow "+strconv.FormatInt(id, 10), err)
		return
	}
	msg := fmt.Sprintf("Nothing changed: workflow %d had already ended %s.", id, res.State)
	if res.Changed {
		msg = fmt.Sprintf("Cancelled workflow %d: %s cancelled", id, plural(res.Cancelled, "task"))
		if res.Requested > 0 {
			msg += fmt.Sprintf(", %s told to stop", plural(res.Requested, "running job"))
		}
		msg += "."
	}
	d.redirect(w, r, "/workflows/"+strconv.FormatInt(id, 10), nil, msg)
}

// maxReason bounds the reason a task's row shows: a failed task's reason
// is its job's error, which may hold a panic's whole stack; the failed
// job's page (the job ID's link) shows all of it.
const maxReason = 200

// shortReason is the first line of a reason, cut to maxReason runes.
func shortReason(s string) string {
	s, _, more := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > maxReason {
		return string(r[:maxReason-1]) + "…"
	}
	if more {
		return s + " …"
	}
	return s
}
