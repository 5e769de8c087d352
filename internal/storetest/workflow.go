package storetest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// WorkflowSecret is the password in the error of ETLWorkflow's failed
// task, which no answer or output may show.
const WorkflowSecret = "s3cr3t-pw"

// ETLWorkflow inserts a workflow in b and drives it to a known state, for
// the tests of what shows workflows (the command line, the admin API and
// dashboard): extract succeeded with result, transform failed (its error
// names a URL with WorkflowSecret as password), so load (after transform,
// and audit with continue) is cancelled; audit is active and notify waits
// on it. Each task has a queue of its own ("wf-" and its name), so the
// test claims exactly its job.
func ETLWorkflow(t testing.TB, b backend.Backend, result []byte) int64 {
	t.Helper()
	wf, ok := backend.As[backend.Workflower](b)
	if !ok {
		t.Fatalf("%T runs no workflows", b)
	}
	task := func(name string, deps ...backend.Dep) backend.TaskParams {
		return backend.TaskParams{Name: name, Deps: deps,
			Job: backend.InsertParams{Queue: "wf-" + name, Type: name + ".run", Payload: []byte(`{}`), MaxAttempts: 1}}
	}
	ins, err := wf.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: "etl", Tasks: []backend.TaskParams{
		task("extract"),
		task("transform", backend.Dep{Task: "extract"}),
		task("audit", backend.Dep{Task: "extract"}),
		task("load", backend.Dep{Task: "transform"}, backend.Dep{Task: "audit", Policy: backend.DepContinue}),
		task("notify", backend.Dep{Task: "audit"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	EndTask(t, b, "wf-extract", backend.Outcome{Kind: backend.OutcomeDone, Result: result})
	EndTask(t, b, "wf-transform", backend.Outcome{Kind: backend.OutcomeFail, Error: "post https://etl:" + WorkflowSecret + "@warehouse.example/load: boom"})
	return ins.ID
}

// EndTask claims the one job of queue in b and ends it with out.
func EndTask(t testing.TB, b backend.Backend, queue string, out backend.Outcome) {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim %s: %d rows, %v", queue, len(rows), err)
	}
	out.Ref = rows[0].Ref()
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
		t.Fatal(err)
	}
}
