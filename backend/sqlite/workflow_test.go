package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// The workflow tests of this backend: what the conformance suite
// (backendtest, area Workflow) does not reach: the stored columns, a count
// left wrong on purpose, a prune's chunks and the query plans (the
// migration of an existing file is in workflow_migrate_test.go).

func openWF(t testing.TB) *Backend {
	t.Helper()
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// wfTask is a task of queue "w" whose type is its name, depending on deps
// with DepCancel.
func wfTask(name string, deps ...string) backend.TaskParams {
	p := backend.TaskParams{Name: name, Job: backend.InsertParams{Queue: "w", Type: name, Payload: []byte(`{}`), MaxAttempts: 3}}
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d})
	}
	return p
}

func insertWF(t testing.TB, b *Backend, tasks ...backend.TaskParams) int64 {
	t.Helper()
	res, err := b.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "test", Tasks: tasks})
	if err != nil {
		t.Fatalf("WorkflowInsert: %v", err)
	}
	return res.ID
}

// claimAll claims up to max jobs of queue "w" and returns them by type.
func claimAll(t testing.TB, b *Backend, max int) map[string]*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: max, Lease: time.Hour})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	got := make(map[string]*backend.JobRow, len(rows))
	for _, r := range rows {
		got[r.Type] = r
	}
	return got
}

// finish applies one outcome of kind to each job, failing on a stale one.
func finish(t testing.TB, b *Backend, kind backend.OutcomeKind, rows ...*backend.JobRow) {
	t.Helper()
	outs := make([]backend.Outcome, len(rows))
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: kind, Error: "broke"}
	}
	res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
	if err != nil || len(res.Stale)+len(res.Cancelled) != 0 {
		t.Fatalf("JobComplete: %+v, %v", res, err)
	}
}

// taskStates returns the workflow's task states by name, checking that no
// count drifted.
func taskStates(t testing.TB, b *Backend, id int64) (*backend.Workflow, map[string]backend.TaskState) {
	t.Helper()
	wf, err := b.WorkflowGet(t.Context(), id)
	if err != nil {
		t.Fatalf("WorkflowGet: %v", err)
	}
	states := make(map[string]backend.TaskState, len(wf.Tasks))
	for _, tk := range wf.Tasks {
		states[tk.Name] = tk.State
	}
	if drift, err := b.WorkflowCheck(t.Context()); err != nil || len(drift) != 0 {
		t.Fatalf("WorkflowCheck = %v, %v; want no drift", drift, err)
	}
	return wf, states
}

func wantStates(t testing.TB, b *Backend, id int64, want string) *backend.Workflow {
	t.Helper()
	wf, states := taskStates(t, b, id)
	var got []string
	for _, tk := range wf.Tasks {
		got = append(got, tk.Name+"="+string(states[tk.Name]))
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("workflow %d (%s): tasks %s, want %s", id, wf.State, strings.Join(got, " "), want)
	}
	return wf
}

// TestWorkflowChainStoresWorkflowID: a task's job carries its workflow's
// ID, in jobs and in failed_jobs, and a job that is no task's has none.
func TestWorkflowChainStoresWorkflowID(t *testing.T) {
	t.Parallel()
	b := openWF(t)
	ctx := t.Context()
	plain, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "p", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := insertWF(t, b, wfTask("a"), wfTask("b", "a"), wfTask("c", "b"))
	jobWF := func(table string, job int64) (wf sql.NullInt64) {
		t.Helper()
		col := "id"
		if table == "failed_jobs" {
			col = "job_id"
		}
		if err := b.w.QueryRowContext(ctx, `SELECT workflow_id FROM `+table+` WHERE `+col+` = ?`, job).Scan(&wf); err != nil {
			t.Fatalf("%s %d: %v", table, job, err)
		}
		return wf
	}
	if wf := jobWF("jobs", plain[0].ID); wf.Valid {
		t.Fatalf("a plain job has workflow_id %d", wf.Int64)
	}
	a := claimAll(t, b, 10)["a"]
	if wf := jobWF("jobs", a.ID); wf.Int64 != id {
		t.Fatalf("task a's job has workflow_id %v, want %d", wf, id)
	}
	finish(t, b, backend.OutcomeDone, a)
	bj := claimAll(t, b, 10)["b"]
	if wf := jobWF("jobs", bj.ID); wf.Int64 != id {
		t.Fatalf("released task b's job has workflow_id %v, want %d", wf, id)
	}
	finish(t, b, backend.OutcomeFail, bj)
	if wf := jobWF("failed_jobs", bj.ID); wf.Int64 != id {
		t.Fatalf("task b's failed job has workflow_id %v, want %d", wf, id)
	}
}

// TestWorkflowCheckReports: counts set wrong behind the backend's back are
// reported, each once, and nothing else.
func TestWorkflowCheckReports(t *testing.T) {
	t.Parallel()
	b := openWF(t)
	ctx := t.Context()
	id := insertWF(t, b, wfTask("a"), wfTask("b"), wfTask("c", "a", "b"))
	if _, err := b.w.ExecContext(ctx, `UPDATE workflow_tasks SET waiting = 5 WHERE workflow_id = ? AND name = 'c'`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.w.ExecContext(ctx, `UPDATE workflows SET unfinished = 7 WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	drift, err := b.WorkflowCheck(ctx)
	want := []backend.WorkflowDrift{{WorkflowID: id, Stored: 7, Want: 3}, {WorkflowID: id, Task: "c", Stored: 5, Want: 2}}
	if err != nil || fmt.Sprint(drift) != fmt.Sprint(want) {
		t.Fatalf("WorkflowCheck = %v, %v; want %v", drift, err, want)
	}
}

// TestWorkflowPruneChunks: a prune takes whole workflows in chunks of
// about backend.ChunkSize tasks and deletes their tasks and edges with
// them.
func TestWorkflowPruneChunks(t *testing.T) {
	t.Parallel()
	b := openWF(t)
	ctx := t.Context()
	for range 3 {
		tasks := []backend.TaskParams{wfTask("root")}
		for i := range 600 {
			tasks = append(tasks, wfTask(fmt.Sprintf("t%d", i), "root"))
		}
		id := insertWF(t, b, tasks...)
		if res, err := b.WorkflowCancel(ctx, id); err != nil || res.Cancelled != 601 {
			t.Fatalf("WorkflowCancel = %+v, %v", res, err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if n, err := b.WorkflowPrune(ctx, time.Millisecond); err != nil || n != 3 {
		t.Fatalf("WorkflowPrune = %d, %v; want 3", n, err)
	}
	for _, table := range []string{"workflows", "workflow_tasks", "workflow_edges"} {
		var n int
		if err := b.w.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s after the prune: %d rows, %v", table, n, err)
		}
	}
}

// TestWorkflowQueryPlans pins the statements run per task ended or
// released to keys and indexes that find the task's own rows, so no task
// end reads the rest of its workflow.
func TestWorkflowQueryPlans(t *testing.T) {
	t.Parallel()
	b := openWF(t)
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
		not         []string
	}{
		{"task end", qTaskEnd, []any{1, "succeeded", nil, "", nil, 1},
			[]string{"workflow_tasks_job (job_id=?)"}, []string{"SCAN"}},
		{"count down", qEdgesCountDown, []any{1, 1, 0},
			[]string{"sqlite_autoindex_workflow_tasks_1 (workflow_id=? AND idx=?)", "workflow_edges USING PRIMARY KEY (workflow_id=? AND from_idx=?)"}, []string{"SCAN workflow"}},
		{"cancel dependants", qEdgesCancel, []any{1, 1, "r", 1},
			[]string{"sqlite_autoindex_workflow_tasks_1 (workflow_id=? AND idx=?)"}, []string{"SCAN workflow"}},
		{"release", qTasksToRelease, []any{1, "[1]"},
			[]string{"sqlite_autoindex_workflow_tasks_1 (workflow_id=? AND idx=?)"}, []string{"SCAN workflow"}},
		{"activate", qTaskActivate, []any{1, 1, 1},
			[]string{"(workflow_id=? AND idx=?)"}, []string{"SCAN"}},
		{"reach", qTasksDepCancelledFrom, []any{1, 1},
			[]string{"SEARCH e USING PRIMARY KEY (workflow_id=? AND from_idx=?)"}, []string{"SCAN e", "SCAN t"}},
		{"recount", qTasksRecount, []any{1, "[1]"},
			[]string{"sqlite_autoindex_workflow_tasks_1 (workflow_id=? AND idx=?)", "workflow_edges_to (workflow_id=? AND to_idx=?)"}, []string{"SCAN workflow"}},
		{"check waiting", qCheckWaiting, nil,
			[]string{"workflow_edges_to (workflow_id=? AND to_idx=?)"}, []string{"SCAN"}},
		{"deps", qTaskDepOutcomes, []any{1, 1},
			[]string{"workflow_edges_to (workflow_id=? AND to_idx=?)"}, []string{"SCAN", "TEMP B-TREE"}},
		{"replay", qReplay, []any{1, 1},
			[]string{"SEARCH w USING INTEGER PRIMARY KEY"}, []string{"SCAN"}},
		{"prune", qWorkflowsToPrune, []any{1, 100},
			[]string{"workflows_finished (state=? AND finished_at<?)", "workflow_tasks_state (workflow_id=? AND state=?)", "failed_jobs_job_id (job_id=?)"},
			[]string{"SCAN"}},
	} {
		plan := queryPlan(t, b, c.query, c.args...)
		for _, s := range c.want {
			if !strings.Contains(plan, s) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, s, plan)
			}
		}
		for _, s := range c.not {
			if strings.Contains(plan, s) {
				t.Errorf("%s: plan has %q:\n%s", c.name, s, plan)
			}
		}
	}
}

// BenchmarkWorkflowClaimComplete: BenchmarkClaimComplete's loop (claim
// 100, complete them as done in one call) over workflow tasks: each
// completion ends its task and counts down the join of its workflow of
// 1,000 parts, whose last part releases it. The cost of a task over a
// plain job's.
func BenchmarkWorkflowClaimComplete(b *testing.B) {
	const batch, parts = 100, 1000
	be := openWF(b)
	ctx := b.Context()
	total := 0
	for total < b.N*batch {
		tasks := make([]backend.TaskParams, 0, parts+1)
		var names []string
		for i := range parts {
			names = append(names, fmt.Sprintf("p%d", i))
			tasks = append(tasks, wfTask(names[i]))
		}
		tasks = append(tasks, wfTask("join", names...))
		tasks[parts].Job.Queue = "joins"
		insertWF(b, be, tasks...)
		total += parts
	}
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for range b.N {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: batch, Lease: time.Minute})
		if err != nil || len(rows) != batch {
			b.Fatalf("claimed %d jobs, %v; want %d", len(rows), err, batch)
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		if res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes}); err != nil || len(res.Stale) != 0 {
			b.Fatalf("complete: %+v, %v", res, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
