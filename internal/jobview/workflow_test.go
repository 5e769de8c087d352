package jobview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/internal/redact"
)

// TestWorkflowView: results are masked like payloads, reasons like
// errors; a task without a job or a result leaves them out, and deps
// name their policy.
func TestWorkflowView(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := &backend.Workflow{ID: 3, Name: "etl", State: backend.WorkflowFailed, CreatedAt: now, FinishedAt: now,
		Counts: backend.TaskCounts{Succeeded: 1, Failed: 1, Cancelled: 1},
		Tasks: []*backend.WorkflowTask{
			{Name: "a", State: backend.TaskSucceeded, JobID: 9, Result: []byte(`{"token":"tk-1","n":1}`), FinishedAt: now},
			{Name: "b", State: backend.TaskFailed, JobID: 10, Reason: "get https://u:pw-2@h.example/: 500", Deps: []backend.Dep{{Task: "a"}}},
			{Name: "c", State: backend.TaskCancelled, Reason: `dependency "b" failed`, Deps: []backend.Dep{{Task: "a", Policy: backend.DepContinue}, {Task: "b"}}},
		}}
	raw, err := json.Marshal(WorkflowOf(redact.Default, w))
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	for _, want := range []string{
		`"id":3,"name":"etl","state":"failed"`,
		`"counts":{"waiting":0,"active":0,"succeeded":1,"failed":1,"cancelled":1}`,
		`"result":{"token":"***","n":1}`,
		`"reason":"get https://u:***@h.example/: 500"`,
		`{"name":"c","state":"cancelled","queue":"","type":"","priority":0,"deps":[{"task":"a","policy":"continue"},{"task":"b","policy":"cancel"}],"reason":"dependency \"b\" failed"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("view lacks %s:\n%s", want, got)
		}
	}
	if list, _ := json.Marshal(WorkflowList(redact.Default, []*backend.Workflow{{ID: 1}})); strings.Contains(string(list), "tasks") || strings.Contains(string(list), "finished_at") {
		t.Errorf("a listed workflow: %s", list)
	}
}

// TestFailedIDs: the failed jobs of a workflow's failed tasks are found
// across pages of the failed jobs of their queue and type, among others
// that failed later; tasks that did not fail have none.
func TestFailedIDs(t *testing.T) {
	ctx := t.Context()
	b := memory.New(memory.Options{})
	defer b.Close()
	const n = 1500 // more than a page
	tasks := make([]backend.TaskParams, n+1)
	for i := range n {
		tasks[i] = backend.TaskParams{Name: fmt.Sprint("t", i), Job: backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}
	}
	tasks[n] = backend.TaskParams{Name: "other", Job: backend.InsertParams{Queue: "other", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}
	ins, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	failAll := func() {
		for {
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1000, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) == 0 {
				return
			}
			outs := make([]backend.Outcome, len(rows))
			for i, r := range rows {
				outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"}
			}
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	failAll()
	// Jobs of the same queue and type failing after them come first in
	// the failed list.
	plain := make([]backend.InsertParams, 1200)
	for i := range plain {
		plain[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	if _, err := b.JobInsertMany(ctx, plain); err != nil {
		t.Fatal(err)
	}
	failAll()

	wf, err := b.WorkflowGet(ctx, ins.ID)
	if err != nil {
		t.Fatal(err)
	}
	in := jobq.NewInspector(b)
	ids, err := FailedIDs(ctx, in, wf.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("found %d failed jobs, want %d", len(ids), n)
	}
	for _, tk := range wf.Tasks[:3] {
		f, err := in.Failed(ctx, ids[tk.JobID])
		if err != nil || f.JobID != tk.JobID {
			t.Errorf("task %s (job %d): failed job %d is %+v, %v", tk.Name, tk.JobID, ids[tk.JobID], f, err)
		}
	}
	for _, tk := range wf.Tasks {
		if tk.Name == "other" {
			if id, err := FailedIDOf(ctx, in, tk); id != 0 || err != nil {
				t.Errorf("an active task's failed job: %d, %v", id, err)
			}
		}
	}
}
