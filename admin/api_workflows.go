package admin

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// parseWorkflowQuery reads GET /api/v1/workflows's query: state (running,
// succeeded, failed, cancelled; all when absent), limit (1..1000) and
// cursor (the last ID of the previous page; before is the same, as the
// command line's --before names it). Unknown parameters are refused.
func parseWorkflowQuery(q url.Values) (state string, limit int, cursor int64, err error) {
	if err = onlyParams(q, "state", "limit", "cursor", "before"); err != nil {
		return "", 0, 0, err
	}
	state = q.Get("state")
	switch backend.WorkflowState(state) {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
	default:
		return "", 0, 0, badField("state", "%q: use running, succeeded, failed or cancelled", state)
	}
	if q.Has("before") {
		if q.Has("cursor") {
			return "", 0, 0, badField("before", "give cursor or before, not both")
		}
		v := q.Get("before")
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 1 {
			return "", 0, 0, badField("before", "%q: pass next_cursor from the previous page", v)
		}
		q = url.Values{"limit": q["limit"], "cursor": {v}}
	}
	limit, cursor, err = pageParams(q)
	return state, limit, cursor, err
}

// listWorkflows lists workflows without their tasks, newest first, a page
// at a time.
func (s *server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	state, limit, cursor, err := parseWorkflowQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := s.opts.Inspector.Workflows(r.Context(), state, limit, cursor)
	if err != nil {
		s.fail(w, r, err) // a backend without workflows: 501 (ErrNoWorkflows is ErrNotSupported)
		return
	}
	out := struct {
		Workflows  []jobview.Workflow `json:"workflows"`
		NextCursor int64              `json:"next_cursor,omitempty"`
	}{Workflows: jobview.WorkflowList(s.mask, rows)}
	if n := len(rows); n > 0 {
		out.NextCursor = nextCursor(n, limit, rows[n-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
}

// getWorkflow shows one workflow with its tasks.
func (s *server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wf, err := s.opts.Inspector.Workflow(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobview.WorkflowOf(s.mask, wf))
}

// cancelWorkflow cancels a running workflow; changed is false (200) when
// it had already ended, state saying how. An unknown workflow is 404.
func (s *server) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.opts.Inspector.CancelWorkflow(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID        int64  `json:"id"`
		Changed   bool   `json:"changed"`
		State     string `json:"state"`
		Cancelled int    `json:"cancelled"`
		Requested int    `json:"requested"`
	}{id, res.Changed, string(res.State), res.Cancelled, res.Requested})
}
