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

// TestReplayable: the failed tasks whose failed jobs are still there are
// named by their job IDs, among jobs of the same queue and type that
// failed later; a task that did not fail, and one whose failed job was
// purged, are not.
func TestReplayable(t *testing.T) {
	ctx := t.Context()
	b := memory.New(memory.Options{})
	defer b.Close()
	job := func(queue string) backend.InsertParams {
		return backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	ins, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{
		{Name: "a", Job: job("q")}, {Name: "b", Job: job("q")}, {Name: "other", Job: job("other")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{job("q"), job("q")}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 4 {
		t.Fatalf("claimed %d, %v; want 4", len(rows), err)
	}
	outs := make([]backend.Outcome, len(rows))
	for i := range rows {
		// The plain jobs fail first: no failed row's own ID is its job's.
		r := rows[len(rows)-1-i]
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"}
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	wf, err := b.WorkflowGet(ctx, ins.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*backend.WorkflowTask{}
	for _, tk := range wf.Tasks {
		byName[tk.Name] = tk
	}
	if _, err := b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{byName["b"].JobID}}); err != nil {
		t.Fatal(err)
	}
	in := jobq.NewInspector(b)
	got, err := Replayable(ctx, in, wf.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int64]bool{byName["a"].JobID: true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Replayable = %v, want %v (task a's job alone)", got, want)
	}
	if r, _, err := in.Replay(ctx, byName["a"].JobID); err != nil || r != 1 {
		t.Fatalf("replay of task a's job %d = %d, %v; want 1 replayed", byName["a"].JobID, r, err)
	}
}
