package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
	"github.com/jobq/jobq/internal/storetest"
)

// wfSecret is the password no answer may show.
const wfSecret = storetest.WorkflowSecret

// etlWorkflow: see storetest.ETLWorkflow.
func etlWorkflow(t *testing.T, b backend.Backend) int64 {
	return storetest.ETLWorkflow(t, b, []byte(`{"rows":3}`))
}

// endTask: see storetest.EndTask.
func endTask(t *testing.T, b backend.Backend, queue string, out backend.Outcome) {
	storetest.EndTask(t, b, queue, out)
}

// oneTaskWorkflow inserts a workflow of one task on queue and returns its
// ID.
func oneTaskWorkflow(t *testing.T, b backend.Backend, name, queue string) int64 {
	t.Helper()
	wf, _ := backend.As[backend.Workflower](b)
	ins, err := wf.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: name, Tasks: []backend.TaskParams{
		{Name: "only", Job: backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return ins.ID
}

// taskLine returns the line of 'workflows show' for task.
func taskLine(t *testing.T, out, task string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, task+" ") {
			return l
		}
	}
	t.Fatalf("no line for task %s in:\n%s", task, out)
	return ""
}

// TestWorkflowCommands: list, show (text and JSON), the replay the show
// names, and cancel, on SQLite: what each prints and how it exits.
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	b := openDB(t, db)
	id := etlWorkflow(t, b)
	done := oneTaskWorkflow(t, b, "", "wf-done")
	endTask(t, b, "wf-done", backend.Outcome{Kind: backend.OutcomeDone})
	sid, did := fmt.Sprint(id), fmt.Sprint(done)

	// list: newest first, one row each with the counts.
	r := run(t, "--db", db, "workflows", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("list printed:\n%s", r.out)
	}
	if f := strings.Fields(lines[1]); len(f) < 10 || f[0] != did || f[1] != "-" || f[2] != "succeeded" || f[3] != "1" || f[6] != "1" {
		t.Errorf("row of the one-task workflow: %q", lines[1])
	}
	// ID NAME STATE TASKS WAITING ACTIVE SUCCEEDED FAILED CANCELLED
	if f := strings.Fields(lines[2]); len(f) < 10 || strings.Join(f[:9], " ") != sid+" etl running 5 1 1 1 1 1" {
		t.Errorf("row of etl: %q", lines[2])
	}
	r = run(t, "--db", db, "workflows", "list", "--state", "succeeded", "--json")
	var listed []jobview.Workflow
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil || len(listed) != 1 || listed[0].ID != done || listed[0].Tasks != nil {
		t.Fatalf("list --state succeeded --json: %v\n%s", err, r.out)
	}
	if r = run(t, "--db", db, "workflows", "list", "--state", "cancelled"); r.err != nil || r.out != "no cancelled workflows\n" {
		t.Errorf("empty list: %q %v", r.out, r.err)
	}
	r = run(t, "--db", db, "workflows", "list", "--limit", "1")
	if !strings.Contains(r.errOut, "more may follow: jobq workflows list --before "+did) {
		t.Errorf("a full page names the next: %q", r.errOut)
	}

	// show: one line per task, in topological order.
	r = run(t, "--db", db, "workflows", "show", sid)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.HasPrefix(r.out, fmt.Sprintf("Workflow %d \"etl\": running\n", id)) || !strings.Contains(r.out, "5: 1 succeeded, 1 failed, 1 cancelled, 1 active, 1 waiting") {
		t.Errorf("show's head:\n%s", r.out)
	}
	if strings.Contains(r.out, wfSecret) {
		t.Errorf("show printed the URL's password:\n%s", r.out)
	}
	failed, err := jobq.NewInspector(b).FailedPage(t.Context(), jobq.FailedFilter{Queue: "wf-transform"}, 10, 0)
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed jobs: %d, %v", len(failed), err)
	}
	for task, want := range map[string]string{
		"extract":   `^extract +succeeded +\d+ +wf-extract/extract\.run +-$`,
		"transform": `^transform +failed +\d+ +wf-transform/transform\.run +after extract; failed: post https://etl:\*\*\*@warehouse\.example/load: boom; replay: jobq failed retry ` + fmt.Sprint(failed[0].JobID) + `$`,
		"audit":     `^audit +active +\d+ +wf-audit/audit\.run +after extract$`,
		"load":      `^load +cancelled +- +wf-load/load\.run +after transform, audit \(continue\); cancelled: dependency "transform" failed$`,
		"notify":    `^notify +waiting +- +wf-notify/notify\.run +after audit; waiting on audit$`,
	} {
		if l := taskLine(t, r.out, task); !regexp.MustCompile(want).MatchString(l) {
			t.Errorf("task %s:\n got %q\nwant %s", task, l, want)
		}
	}
	if strings.Index(r.out, "\nextract ") > strings.Index(r.out, "\nload ") {
		t.Errorf("tasks not in topological order:\n%s", r.out)
	}

	r = run(t, "--db", db, "workflows", "show", sid, "--json")
	var shown jobview.Workflow
	if err := json.Unmarshal([]byte(r.out), &shown); err != nil || len(shown.Tasks) != 5 {
		t.Fatalf("show --json: %v\n%s", err, r.out)
	}
	byName := map[string]jobview.WorkflowTask{}
	for _, tk := range shown.Tasks {
		byName[tk.Name] = tk
	}
	var result bytes.Buffer
	if got := byName["extract"]; json.Compact(&result, got.Result) != nil || result.String() != `{"rows":3}` || got.FinishedAt == nil || got.JobID == 0 {
		t.Errorf("extract as JSON: %+v", got)
	}
	if got := byName["load"]; got.JobID != 0 || got.Reason != `dependency "transform" failed` || len(got.Deps) != 2 || got.Deps[1] != (jobview.TaskDep{Task: "audit", Policy: "continue"}) {
		t.Errorf("load as JSON: %+v", got)
	}
	if got := byName["notify"]; len(got.WaitingOn) != 1 || got.WaitingOn[0] != "audit" {
		t.Errorf("notify as JSON: %+v", got)
	}
	if strings.Contains(r.out, wfSecret) {
		t.Errorf("show --json printed the URL's password")
	}

	// The replay show names runs the task again, and the tasks its
	// failure cancelled wait again.
	if r = run(t, "--db", db, "failed", "retry", fmt.Sprint(failed[0].JobID)); r.err != nil || r.out != "replayed 1, skipped 0\n" {
		t.Fatalf("failed retry: %q %v", r.out, r.err)
	}
	r = run(t, "--db", db, "workflows", "show", sid)
	if l := taskLine(t, r.out, "transform"); !regexp.MustCompile(`^transform +active +\d+ +\S+ +after extract$`).MatchString(l) {
		t.Errorf("transform after its replay: %q", l)
	}
	if l := taskLine(t, r.out, "load"); !strings.HasSuffix(l, "after transform, audit (continue); waiting on transform, audit") {
		t.Errorf("load after the replay: %q", l)
	}

	// cancel: once it changes the workflow, then exits 3 saying why not.
	r = run(t, "--db", db, "workflows", "cancel", sid)
	if r.err != nil || r.out != fmt.Sprintf("workflow %d: cancelled: 4 tasks cancelled\n", id) {
		t.Errorf("cancel: %q %v", r.out, r.err)
	}
	r = run(t, "--db", db, "workflows", "cancel", sid, "--json")
	var cj workflowCancelJSON
	if r.code() != exitNotCancelled || json.Unmarshal([]byte(r.out), &cj) != nil || cj != (workflowCancelJSON{ID: id, State: "cancelled"}) {
		t.Errorf("second cancel: exit %d %q", r.code(), r.out)
	}
	r = run(t, "--db", db, "workflows", "cancel", did)
	if r.code() != exitNotCancelled || r.out != fmt.Sprintf("workflow %d: not cancelled: it already ended succeeded\n", done) {
		t.Errorf("cancel of an ended workflow: exit %d %q", r.code(), r.out)
	}
	r = run(t, "--db", db, "workflows", "show", sid)
	for _, task := range []string{"transform", "audit", "load", "notify"} {
		if l := taskLine(t, r.out, task); !strings.Contains(l, " cancelled ") || !strings.HasSuffix(l, "cancelled: workflow cancelled") {
			t.Errorf("task %s after the cancel: %q", task, l)
		}
	}
}

// TestWorkflowCommandErrors: an unknown ID is one line and exit 1; usage
// mistakes exit 2 before the store is opened; reading never creates one;
// a backend without workflows is one line that says so.
func TestWorkflowCommandErrors(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	for _, args := range [][]string{{"show", "999"}, {"cancel", "999"}} {
		r := run(t, append([]string{"--db", db, "workflows"}, args...)...)
		if r.code() != exitError || r.err.Error() != "workflow 999 not found: see 'jobq workflows list' for the IDs" || r.out != "" {
			t.Errorf("%v: exit %d, %v, out %q", args, r.code(), r.err, r.out)
		}
	}
	missing := tempDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "abc"}, "is not a workflow ID"},
		{[]string{"show"}, "one workflow ID"},
		{[]string{"cancel", "0"}, "is not a workflow ID"},
		{[]string{"list", "--state", "done"}, `--state "done": use running, succeeded, failed or cancelled`},
		{[]string{"list", "--limit", "0"}, "--limit 0"},
		{[]string{"list", "--before", "-1"}, "--before -1"},
		{[]string{"list", "extra"}, "no arguments"},
		{[]string{"list", "--nope"}, "unknown flag: --nope"},
		{[]string{"nope"}, "use one of cancel, list, show"},
	} {
		r := run(t, append([]string{"--db", missing, "workflows"}, c.args...)...)
		if r.code() != exitUsage || strings.Contains(r.err.Error(), "\n") || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%v: exit %d, error %v; want exit 2 and one line with %q", c.args, r.code(), r.err, c.want)
		}
	}
	r := run(t, "--db", missing, "workflows", "list")
	if r.code() != exitError || !strings.Contains(r.err.Error(), "jobq migrate --db") {
		t.Errorf("list of a missing store: exit %d, %v", r.code(), r.err)
	}
	if _, err := os.Stat(strings.TrimPrefix(missing, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("workflows list created the store: %v", err)
	}
	if r := run(t, "--db", "memory:", "workflows", "list"); r.code() != exitUsage || !strings.Contains(r.err.Error(), "vanish") {
		t.Errorf("memory: %d %v", r.code(), r.err)
	}

	a := &app{db: "redis://localhost:6379/0"}
	err := a.workflowErr(7, fmt.Errorf("get workflow: %w: *redis.Backend does not implement backend.Workflower", jobq.ErrNoWorkflows))
	if err == nil || err.Error() != "--db redis: this backend does not run workflows" {
		t.Errorf("no workflows: %v", err)
	}
}

// TestCheckWorkflows: with workflows in the store and no drift, check is
// as before; a drift is CRITICAL whatever the thresholds, named on the
// one line.
func TestCheckWorkflows(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	etlWorkflow(t, openDB(t, db))
	r := run(t, "--db", db, "check", "--max-failed", "1")
	if r.err != nil || !strings.HasPrefix(r.out, "JOBQ OK - 2 queues, 1 due, oldest waiting ") || !strings.Contains(r.out, "s, 1 failed | ") {
		t.Fatalf("check with workflows: %q %v", r.out, r.err)
	}

	drift := []jobq.WorkflowDrift{
		{WorkflowID: 7, Stored: 3, Want: 2},
		{WorkflowID: 7, Task: "load", Stored: 1, Want: 0},
		{WorkflowID: 8, Stored: 1, Want: 0},
		{WorkflowID: 9, Stored: 1, Want: 0},
	}
	state, line := judgeDrift(checkOK, "1 queue, 0 due", drift)
	want := `workflow counts drifted (critical): workflow 7: 3 unfinished tasks stored, 2 recomputed; ` +
		`workflow 7 task "load": waits on 1 dependencies stored, 0 recomputed; workflow 8: 1 unfinished tasks stored, 0 recomputed; ` +
		`1 more; 1 queue, 0 due`
	if state != checkCritical || line != want {
		t.Errorf("judgeDrift = %d %q\nwant %q", state, line, want)
	}
	if state, line := judgeDrift(checkWarning, "x", nil); state != checkWarning || line != "x" {
		t.Errorf("no drift changed the result: %d %q", state, line)
	}
}

// TestShowNamesTask: 'jobq failed show' (text and --json) of a failed
// task's job names its workflow and task, and of a plain failed job
// neither; 'jobq jobs show' of a live task's job names them too.
func TestShowNamesTask(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := etlWorkflow(t, b) // transform failed; audit is pending
	plain := failThrice(t, b, true)
	wf, _ := backend.As[backend.Workflower](b)
	got, err := wf.WorkflowGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	jobOf := map[string]int64{}
	for _, task := range got.Tasks {
		jobOf[task.Name] = task.JobID
	}
	named := func(what, out, task string) {
		t.Helper()
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^Workflow:\s+%d \(task %s\)$`, id, task))
		if !want.MatchString(out) {
			t.Errorf("%s lacks /%s/:\n%s", what, want, out)
		}
	}
	r := run(t, "--db", db, "failed", "show", fmt.Sprint(jobOf["transform"]))
	if r.err != nil {
		t.Fatal(r.err)
	}
	named("failed show of a task's job", r.out, "transform")
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(jobOf["audit"]))
	if r.err != nil {
		t.Fatal(r.err)
	}
	named("jobs show of a live task's job", r.out, "audit")
	r = run(t, "--db", db, "failed", "show", fmt.Sprint(jobOf["transform"]), "--json")
	var f jobview.Failed
	if err := json.Unmarshal([]byte(r.out), &f); err != nil || f.WorkflowID != id || f.Task != "transform" {
		t.Errorf("failed show --json of a task's job = %q (%v), want workflow_id %d and task transform", r.out, err, id)
	}

	r = run(t, "--db", db, "failed", "show", fmt.Sprint(plain))
	if r.err != nil || strings.Contains(r.out, "Workflow:") {
		t.Errorf("failed show of a plain job = %q, %v; want no workflow line", r.out, r.err)
	}
	r = run(t, "--db", db, "failed", "show", fmt.Sprint(plain), "--json")
	if r.err != nil || strings.Contains(r.out, `"workflow_id"`) || strings.Contains(r.out, `"task"`) {
		t.Errorf("failed show --json of a plain job = %q, %v; want no workflow_id or task", r.out, r.err)
	}
}
