package metrics_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/metrics"
)

// wfCounting counts the reads of the workflow counts of a memory backend.
type wfCounting struct {
	*memory.Backend
	calls atomic.Int64
}

func (b *wfCounting) WorkflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	b.calls.Add(1)
	return b.Backend.WorkflowStats(ctx)
}

// insertWorkflow inserts a workflow of the given tasks, each on a queue
// of its own named after it, and returns its ID.
func insertWorkflow(t *testing.T, b backend.Workflower, tasks ...backend.TaskParams) int64 {
	t.Helper()
	for i := range tasks {
		tasks[i].Job = backend.InsertParams{Queue: tasks[i].Name, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	ins, err := b.WorkflowInsert(t.Context(), backend.WorkflowParams{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	return ins.ID
}

// endJob claims the one job of queue and ends it with kind.
func endJob(t *testing.T, b backend.Backend, queue string, kind backend.OutcomeKind) {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim %s: %d rows, %v", queue, len(rows), err)
	}
	out := backend.Outcome{Ref: rows[0].Ref(), Kind: kind, Error: "boom"}
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
		t.Fatal(err)
	}
}

// TestWorkflowGauges: with the depth gauges come the workflows by state
// and the tasks waiting, read once per cache period; a backend without
// workflows exports neither, is asked nothing more, and logs nothing.
func TestWorkflowGauges(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	b := &wfCounting{Backend: mem}
	// running: a is active, b and c wait on it.
	insertWorkflow(t, b, backend.TaskParams{Name: "a"},
		backend.TaskParams{Name: "b", Deps: []backend.Dep{{Task: "a"}}},
		backend.TaskParams{Name: "c", Deps: []backend.Dep{{Task: "a"}}})
	insertWorkflow(t, b, backend.TaskParams{Name: "ok"})
	endJob(t, b, "ok", backend.OutcomeDone)
	insertWorkflow(t, b, backend.TaskParams{Name: "bad"}, backend.TaskParams{Name: "after-bad", Deps: []backend.Dep{{Task: "bad"}}})
	endJob(t, b, "bad", backend.OutcomeFail) // failed; after-bad cancelled, not waiting
	gone := insertWorkflow(t, b, backend.TaskParams{Name: "x"}, backend.TaskParams{Name: "y", Deps: []backend.Dep{{Task: "x"}}})
	if _, err := b.WorkflowCancel(t.Context(), gone); err != nil {
		t.Fatal(err)
	}

	var logs strings.Builder
	var mu sync.Mutex
	m := newMetrics(t, metrics.Options{StatsCache: time.Hour, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil))})
	if err := m.ObserveQueues(jobq.NewInspector(b)); err != nil {
		t.Fatal(err)
	}
	s := scrapeOf(t, m)
	s.check(t, want{
		"jobq_workflows{state=running}":          1,
		"jobq_workflows{state=succeeded}":        1,
		"jobq_workflows{state=failed}":           1,
		"jobq_workflows{state=cancelled}":        1,
		"jobq_workflow_tasks_waiting":            2,
		"jobq_queue_jobs{queue=a,state=pending}": 1,
	})
	t.Run("promtool", func(t *testing.T) { checkMetrics(t, s.text) })

	// The cache serves the next scrapes, however the store changes.
	endJob(t, b, "a", backend.OutcomeDone)
	scrapeOf(t, m).check(t, want{"jobq_workflow_tasks_waiting": 2, "jobq_workflows{state=running}": 1})
	if n := b.calls.Load(); n != 1 {
		t.Errorf("two scrapes read the workflow counts %d times, want once", n)
	}
	fresh := newMetrics(t, metrics.Options{StatsCache: -1})
	if err := fresh.ObserveQueues(jobq.NewInspector(b)); err != nil {
		t.Fatal(err)
	}
	scrapeOf(t, fresh).check(t, want{"jobq_workflow_tasks_waiting": 0, "jobq_workflows{state=running}": 1})

	// A backend without workflows (the same store behind a wrapper that
	// hides them): no gauges, and the depth gauges as ever.
	noWorkflows := struct{ backend.Backend }{mem}
	none := newMetrics(t, metrics.Options{StatsCache: -1, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil))})
	if err := none.ObserveQueues(jobq.NewInspector(noWorkflows)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		scrapeOf(t, none).check(t, want{
			"jobq_workflows{state=running}": absent,
			"jobq_workflow_tasks_waiting":   absent,
			"jobq_queue_stats_up":           1,
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if logs.Len() > 0 {
		t.Errorf("logged: %s", logs.String())
	}
}
