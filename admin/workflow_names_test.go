package admin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTaskNamed: a failed task's job names its workflow and task in GET
// /api/v1/failed/{id}, the failed list and GET /api/v1/jobs/{id}, and its
// dashboard page links to the workflow; a live task's job does too, on
// the API and the job page; a plain failed job names neither anywhere.
func TestTaskNamed(t *testing.T) {
	e := newEnvOn(t, openSQLite(t), Options{})
	id := etlWorkflow(t, e.b) // transform failed; audit is pending
	plain := e.failTwice("q")
	failed := taskOf(t, e.insp, id, "transform").JobID
	live := taskOf(t, e.insp, id, "audit").JobID

	named := func(what string, obj map[string]any, task string) {
		t.Helper()
		if num(obj["workflow_id"]) != id || obj["task"] != task {
			t.Errorf("%s: workflow_id %v, task %v; want %d and %s", what, obj["workflow_id"], obj["task"], id, task)
		}
	}
	unnamed := func(what string, obj map[string]any) {
		t.Helper()
		if _, ok := obj["workflow_id"]; ok {
			t.Errorf("%s of a plain job has workflow_id %v", what, obj["workflow_id"])
		}
		if _, ok := obj["task"]; ok {
			t.Errorf("%s of a plain job has task %v", what, obj["task"])
		}
	}
	first := func(r resp) map[string]any {
		t.Helper()
		list, _ := r.body["failed"].([]any)
		if len(list) != 1 {
			t.Fatalf("failed list: %s, want one job", r.raw)
		}
		return list[0].(map[string]any)
	}
	ok := func(path string) resp {
		t.Helper()
		r := e.do(req{path: path})
		e.want(r, http.StatusOK, "")
		return r
	}
	named("GET failed/{id}", ok(fmt.Sprintf("/api/v1/failed/%d", failed)).body, "transform")
	named("failed list", first(ok("/api/v1/failed?queue=wf-transform")), "transform")
	named("GET jobs/{id} of the failed task", ok(fmt.Sprintf("/api/v1/jobs/%d", failed)).body, "transform")
	named("GET jobs/{id} of the live task", ok(fmt.Sprintf("/api/v1/jobs/%d", live)).body, "audit")
	unnamed("GET failed/{id}", ok(fmt.Sprintf("/api/v1/failed/%d", plain)).body)
	unnamed("failed list", first(ok("/api/v1/failed?queue=q")))
	unnamed("GET jobs/{id}", ok(fmt.Sprintf("/api/v1/jobs/%d", plain)).body)

	link := func(task string) string {
		return fmt.Sprintf(`<dt>Workflow</dt><dd id="workflow"><a href="/workflows/%d">%d</a>, task <span class="mono">%s</span></dd>`, id, id, task)
	}
	for path, want := range map[string]string{
		fmt.Sprintf("/failed/%d", failed): link("transform"),
		fmt.Sprintf("/jobs/%d", live):     link("audit"),
	} {
		code, body := get(t, e.srv, path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, lacks %s", path, code, want)
		}
	}
	if code, body := get(t, e.srv, fmt.Sprintf("/failed/%d", plain)); code != http.StatusOK || strings.Contains(body, `id="workflow"`) {
		t.Errorf("the plain failed job's page: %d, names a workflow: %v", code, strings.Contains(body, `id="workflow"`))
	}
}
