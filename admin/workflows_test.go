package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/storetest"
)

// wfSecret is the password no answer may show.
const wfSecret = storetest.WorkflowSecret

// etlWorkflow: see storetest.ETLWorkflow.
func etlWorkflow(t *testing.T, b backend.Backend) int64 {
	return storetest.ETLWorkflow(t, b, []byte(`{"rows":3,"password":"hunter2"}`))
}

// doneWorkflow inserts a workflow of one task and completes it.
func doneWorkflow(t *testing.T, b backend.Backend) int64 {
	t.Helper()
	wf, _ := backend.As[backend.Workflower](b)
	ins, err := wf.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "tiny", Tasks: []backend.TaskParams{
		{Name: "only", Job: backend.InsertParams{Queue: "wf-done", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	endTask(t, b, "wf-done", backend.Outcome{Kind: backend.OutcomeDone})
	return ins.ID
}

// endTask: see storetest.EndTask.
func endTask(t *testing.T, b backend.Backend, queue string, out backend.Outcome) {
	storetest.EndTask(t, b, queue, out)
}

// taskOf returns the task of the workflow id named name, as stored.
func taskOf(t *testing.T, insp *jobq.Inspector, id int64, name string) *jobq.WorkflowTask {
	t.Helper()
	wf, err := insp.Workflow(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range wf.Tasks {
		if tk.Name == name {
			return tk
		}
	}
	t.Fatalf("workflow %d has no task %s", id, name)
	return nil
}

// TestWorkflowAPI: the list (states, paging), one workflow with its
// tasks as JSON (results and reasons masked), cancel with its scope, and
// the error answers.
func TestWorkflowAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
	id := etlWorkflow(t, e.b)
	done := doneWorkflow(t, e.b)

	r := e.do(req{path: "/api/v1/workflows"})
	e.want(r, http.StatusOK, "")
	list, _ := r.body["workflows"].([]any)
	if len(list) != 2 || r.body["next_cursor"] != nil {
		t.Fatalf("list: %s", r.raw)
	}
	first, second := list[0].(map[string]any), list[1].(map[string]any)
	if num(first["id"]) != done || first["state"] != "succeeded" || num(second["id"]) != id || second["name"] != "etl" || second["tasks"] != nil {
		t.Fatalf("list, newest first, without tasks: %s", r.raw)
	}
	counts := second["counts"].(map[string]any)
	for k, v := range map[string]int64{"waiting": 1, "active": 1, "succeeded": 1, "failed": 1, "cancelled": 1} {
		if num(counts[k]) != v {
			t.Errorf("counts.%s = %v, want %d", k, counts[k], v)
		}
	}
	if second["finished_at"] != nil || first["finished_at"] == nil {
		t.Errorf("finished_at: only for the ended workflow: %s", r.raw)
	}

	r = e.do(req{path: "/api/v1/workflows?state=running"})
	if list, _ := r.body["workflows"].([]any); len(list) != 1 || num(list[0].(map[string]any)["id"]) != id {
		t.Errorf("state=running: %s", r.raw)
	}
	r = e.do(req{path: "/api/v1/workflows?limit=1"})
	if r.num("next_cursor") != done {
		t.Fatalf("limit=1: %s", r.raw)
	}
	for _, page := range []string{"cursor", "before"} {
		r = e.do(req{path: fmt.Sprintf("/api/v1/workflows?limit=1&%s=%d", page, done)})
		if list, _ := r.body["workflows"].([]any); len(list) != 1 || num(list[0].(map[string]any)["id"]) != id {
			t.Errorf("%s=%d: %s", page, done, r.raw)
		}
	}
	for _, c := range []struct{ query, field string }{
		{"state=done", "state"}, {"limit=0", "limit"}, {"cursor=x", "cursor"}, {"before=0", "before"},
		{"before=1&cursor=1", "before"}, {"sort=id", "sort"},
	} {
		r = e.do(req{path: "/api/v1/workflows?" + c.query})
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != c.field {
			t.Errorf("%s: field %q, want %q", c.query, r.errorField(), c.field)
		}
	}

	r = e.do(req{path: fmt.Sprintf("/api/v1/workflows/%d", id)})
	e.want(r, http.StatusOK, "")
	if strings.Contains(string(r.raw), wfSecret) || strings.Contains(string(r.raw), "hunter2") {
		t.Errorf("a secret reached the answer: %s", r.raw)
	}
	tasks, _ := r.body["tasks"].([]any)
	if len(tasks) != 5 || r.body["state"] != "running" {
		t.Fatalf("workflow: %s", r.raw)
	}
	byName := map[string]map[string]any{}
	var order []string
	for _, x := range tasks {
		tk := x.(map[string]any)
		byName[tk["name"].(string)] = tk
		order = append(order, tk["name"].(string))
	}
	if order[0] != "extract" || order[len(order)-1] == "extract" {
		t.Errorf("tasks not in topological order: %v", order)
	}
	if tk := byName["extract"]; tk["state"] != "succeeded" || num(tk["job_id"]) == 0 || tk["result"].(map[string]any)["password"] != "***" {
		t.Errorf("extract: %v", tk)
	}
	if tk := byName["transform"]; tk["state"] != "failed" || tk["reason"] != "post https://etl:***@warehouse.example/load: boom" || tk["queue"] != "wf-transform" || tk["type"] != "transform.run" {
		t.Errorf("transform: %v", tk)
	}
	if tk := byName["load"]; tk["state"] != "cancelled" || tk["reason"] != `dependency "transform" failed` || tk["job_id"] != nil {
		t.Errorf("load: %v", tk)
	}
	if deps := byName["load"]["deps"].([]any); len(deps) != 2 || deps[1].(map[string]any)["policy"] != "continue" || deps[0].(map[string]any)["policy"] != "cancel" {
		t.Errorf("load's deps: %v", deps)
	}
	if w := byName["notify"]["waiting_on"]; fmt.Sprint(w) != "[audit]" || byName["notify"]["state"] != "waiting" {
		t.Errorf("notify: %v", byName["notify"])
	}
	e.want(e.do(req{path: "/api/v1/workflows/999"}), http.StatusNotFound, "not_found")
	e.want(e.do(req{path: "/api/v1/workflows/abc"}), http.StatusBadRequest, "invalid_input")
	e.want(e.do(req{path: "/api/v1/workflows", token: tok("")}), http.StatusUnauthorized, "unauthorized")

	// Cancel needs the admin scope; it says what it did, and again that
	// nothing changed.
	cancel := fmt.Sprintf("/api/v1/workflows/%d/cancel", id)
	e.want(e.do(req{method: "POST", path: cancel, token: tok(readToken)}), http.StatusForbidden, "forbidden")
	if wf, _ := e.insp.Workflow(t.Context(), id); wf.State != jobq.WorkflowRunning {
		t.Fatalf("a refused cancel changed the workflow: %s", wf.State)
	}
	r = e.do(req{method: "POST", path: cancel})
	e.want(r, http.StatusOK, "")
	if r.body["changed"] != true || r.body["state"] != "cancelled" || r.num("cancelled") != 2 || r.num("id") != id {
		t.Errorf("cancel: %s", r.raw)
	}
	r = e.do(req{method: "POST", path: cancel})
	if r.status != http.StatusOK || r.body["changed"] != false || r.body["state"] != "cancelled" || r.num("cancelled") != 0 {
		t.Errorf("second cancel: %d %s", r.status, r.raw)
	}
	e.want(e.do(req{method: "POST", path: "/api/v1/workflows/999/cancel"}), http.StatusNotFound, "not_found")
	e.want(e.do(req{method: "DELETE", path: cancel}), http.StatusMethodNotAllowed, "method_not_allowed")

	// A backend without workflows (a wrapper hiding them): 501, like any
	// capability it lacks.
	s := newEnvOn(t, struct{ backend.Backend }{memoryBackend(t)}, Options{})
	for _, q := range []req{
		{path: "/api/v1/workflows"},
		{path: "/api/v1/workflows/1"},
		{method: "POST", path: "/api/v1/workflows/1/cancel"},
	} {
		s.want(s.do(q), http.StatusNotImplemented, "not_supported")
	}
}

// TestWorkflowDashboard: the list and the workflow's page show the tasks,
// their states, what each waits on and why one failed or was cancelled;
// Replay runs the failed task again, Cancel cancels the workflow, both
// through same-origin form posts only.
func TestWorkflowDashboard(t *testing.T) {
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	id := etlWorkflow(t, b)
	doneWorkflow(t, b)
	page := fmt.Sprintf("/workflows/%d", id)

	code, body := get(t, srv, "/workflows")
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, want := range []string{
		`href="/workflows" class="on" aria-current="page">Workflows<`,
		`class="s-running">running <span class="count">1</span>`,
		`class="s-succeeded">succeeded <span class="count">1</span>`,
		fmt.Sprintf(`<a href="%s">etl</a>`, page),
		`<span class="badge s-running">running</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("list lacks %s", want)
		}
	}
	if _, body = get(t, srv, "/workflows?state=succeeded"); strings.Contains(body, ">etl<") || !strings.Contains(body, ">tiny<") {
		t.Errorf("state=succeeded lists etl, or not tiny")
	}
	if code, _ = get(t, srv, "/workflows?state=nope"); code != http.StatusBadRequest {
		t.Errorf("bad state: %d", code)
	}

	code, body = get(t, srv, page)
	if code != http.StatusOK {
		t.Fatalf("workflow page: %d %s", code, body)
	}
	row := func(body, task string) string {
		t.Helper()
		i := strings.Index(body, `<tr data-task="`+task+`">`)
		if i < 0 {
			t.Fatalf("no row for task %s", task)
		}
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	for task, wants := range map[string][]string{
		"extract":   {`badge s-succeeded">succeeded<`, `/jobs/`},
		"transform": {`badge s-failed">failed<`, page + `/failed?task=transform"`, `post https://etl:***@warehouse.example/load: boom`, `action="` + page + `/replay"`, `name="task" value="transform"`, `>Replay</button>`},
		"audit":     {`badge s-active">active<`, `<span class="mono">extract</span>`},
		"load":      {`badge s-cancelled">cancelled<`, `<span class="mono">audit</span> <span class="muted">(continue)</span>`, `dependency &#34;transform&#34; failed`},
		"notify":    {`badge s-waiting">waiting<`, `waiting on <span class="mono">audit</span></td>`},
	} {
		r := row(body, task)
		for _, w := range wants {
			if !strings.Contains(r, w) {
				t.Errorf("task %s's row lacks %s:\n%s", task, w, r)
			}
		}
		if task != "transform" && strings.Contains(r, "Replay") {
			t.Errorf("task %s offers a replay", task)
		}
	}
	if strings.Contains(body, wfSecret) {
		t.Error("the page shows the URL's password")
	}
	if !strings.Contains(body, `action="`+page+`/cancel"`) {
		t.Error("no cancel button on a running workflow")
	}
	if code, _ = get(t, srv, "/workflows/999"); code != http.StatusNotFound {
		t.Errorf("unknown workflow: %d", code)
	}

	// The failed job's link leads to its failed job's page.
	failed, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "wf-transform"}, 10, 0)
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed: %d %v", len(failed), err)
	}
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + page + "/failed?task=transform")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/failed/"+strconv.FormatInt(failed[0].JobID, 10) {
		t.Errorf("failed link: %d to %q", resp.StatusCode, loc)
	}

	// A cross-site post changes nothing.
	code, _ = postForm(t, srv, page+"/replay", url.Values{"task": {"transform"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if code != http.StatusForbidden || taskOf(t, insp, id, "transform").State != jobq.TaskFailed {
		t.Fatalf("cross-site replay: %d", code)
	}
	// Replay of a task that did not fail: nothing, and the flash says why.
	code, loc := postForm(t, srv, page+"/replay", url.Values{"task": {"extract"}}, nil)
	if code != http.StatusSeeOther || !strings.Contains(loc, "only+a+failed+task") {
		t.Errorf("replay of extract: %d %s", code, loc)
	}
	code, loc = postForm(t, srv, page+"/replay", url.Values{"task": {"transform"}}, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, page+"?") || !strings.Contains(loc, "Replayed+task+transform") {
		t.Fatalf("replay: %d %s", code, loc)
	}
	if st := taskOf(t, insp, id, "transform").State; st != jobq.TaskActive {
		t.Errorf("transform after its replay: %s", st)
	}
	if ld := taskOf(t, insp, id, "load"); ld.State != jobq.TaskWaiting {
		t.Errorf("load after the replay: %s", ld.State)
	}
	_, body = get(t, srv, loc)
	if !strings.Contains(body, "Replayed task transform") || !strings.Contains(row(body, "load"), `waiting on <span class="mono">transform</span>, <span class="mono">audit</span></td>`) {
		t.Errorf("the page after the replay: %s", row(body, "load"))
	}
	// Replaying it twice: nothing left to replay.
	if code, loc = postForm(t, srv, page+"/replay", url.Values{"task": {"transform"}}, nil); !strings.Contains(loc, "Nothing+replayed") {
		t.Errorf("second replay: %d %s", code, loc)
	}
	if code, _ = postForm(t, srv, page+"/replay", url.Values{"task": {"nope"}}, nil); code != http.StatusNotFound {
		t.Errorf("replay of an unknown task: %d", code)
	}

	code, loc = postForm(t, srv, page+"/cancel", nil, nil)
	if code != http.StatusSeeOther || !strings.Contains(loc, "Cancelled+workflow") {
		t.Fatalf("cancel: %d %s", code, loc)
	}
	if wf, _ := insp.Workflow(t.Context(), id); wf.State != jobq.WorkflowCancelled {
		t.Errorf("after cancel: %s", wf.State)
	}
	_, body = get(t, srv, page)
	if strings.Contains(body, `/cancel"`) || !strings.Contains(body, `id="state">cancelled<`) || !strings.Contains(row(body, "notify"), "workflow cancelled") {
		t.Errorf("a cancelled workflow's page")
	}
	if code, loc = postForm(t, srv, page+"/cancel", nil, nil); !strings.Contains(loc, "Nothing+changed") {
		t.Errorf("second cancel: %d %s", code, loc)
	}

	// A backend without workflows says so.
	srv2, _ := dashServer(t, syncBackend(t))
	if code, body = get(t, srv2, "/workflows"); code != http.StatusOK || !strings.Contains(body, noWorkflows) {
		t.Errorf("workflows on sync: %d", code)
	}
	if code, _ = get(t, srv2, "/workflows/1"); code != http.StatusNotImplemented {
		t.Errorf("a workflow on sync: %d", code)
	}
}

// TestShortReason: a task's row shows the first line of its reason, cut
// short; the failed job's page has the rest.
func TestWorkflowShortReason(t *testing.T) {
	long := strings.Repeat("é", maxReason+5)
	for in, want := range map[string]string{
		"":                   "",
		"boom":               "boom",
		"panic: x\nstack...": "panic: x …",
		long:                 long[:2*(maxReason-1)] + "…",
	} {
		if got := shortReason(in); got != want {
			t.Errorf("shortReason(%.20q) = %.30q, want %.30q", in, got, want)
		}
	}
}
