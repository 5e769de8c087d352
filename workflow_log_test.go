package jobq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jobq/jobq"
)

// TestWorkflowTaskLogs: the outcome lines of a task's job name its
// workflow and task, so a failed task can be found from the log; a plain
// job's lines carry neither attribute. The handler sees the same in Job.
func TestWorkflowTaskLogs(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var seen atomic.Pointer[jobq.Job]
	reg.HandleFunc("wf.flaky", func(_ context.Context, j *jobq.Job) error {
		seen.Store(j)
		return errors.New("upstream 503")
	})
	reg.HandleFunc("plain.bad", func(context.Context, *jobq.Job) error {
		return jobq.Permanent(errors.New("no such account"))
	})
	c := mustClient(t, b, jobq.ClientConfig{})
	wfID, err := c.EnqueueWorkflow(t.Context(), jobq.NewWorkflow("nightly").
		AddJob("fetch", "wf.flaky", nil, jobq.MaxAttempts(2)))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Enqueue(t.Context(), "plain.bad", nil)
	if err != nil {
		t.Fatal(err)
	}

	buf := runLogged(t, b, reg, fastConfig(), 3, nil)

	if j := seen.Load(); j == nil || j.WorkflowID != wfID || j.Task != "fetch" {
		t.Errorf("the task's handler saw %+v, want WorkflowID %d, Task fetch", j, wfID)
	}
	type line struct {
		Msg        string
		Type       string
		JobID      int64  `json:"job_id"`
		Attempt    int    `json:"attempt"`
		WorkflowID *int64 `json:"workflow_id"`
		Task       *string
	}
	got := map[string]line{} // by type and message
	for _, l := range jsonLines[line](t, buf.String()) {
		if l.JobID != 0 {
			got[l.Type+": "+l.Msg] = l
		}
	}
	for _, msg := range []string{"job failed; will retry", "job failed; moved to failed jobs"} {
		l, ok := got["wf.flaky: "+msg]
		if !ok {
			t.Errorf("no %q line for the task's job:\n%s", msg, buf.String())
			continue
		}
		if l.WorkflowID == nil || *l.WorkflowID != wfID || l.Task == nil || *l.Task != "fetch" {
			t.Errorf("%q line of the task's job (attempt %d) names workflow %v task %v, want %d and fetch:\n%s",
				msg, l.Attempt, deref(l.WorkflowID), deref(l.Task), wfID, buf.String())
		}
	}
	l, ok := got["plain.bad: job failed; moved to failed jobs"]
	if !ok || l.JobID != plain {
		t.Fatalf("no failure line for the plain job %d:\n%s", plain, buf.String())
	}
	if l.WorkflowID != nil || l.Task != nil {
		t.Errorf("the plain job's line names workflow %v task %v, want neither attribute", deref(l.WorkflowID), deref(l.Task))
	}
}

// deref is *p, or nil for a nil p, for messages.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
