package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// BenchWorkflow measures what a workflow costs against plain jobs, per op
// on a fresh backend from open:
//
//	plain     1,001 jobs inserted in one batch, then claimed 10 at a time
//	          and completed until none is left
//	fan-in    a workflow of 1,000 tasks and one that depends on all of
//	          them, worked the same way until the last one is done
//
// Each reports jobs/s (1,001 per op). Backends that implement
// backend.Workflower call it from a benchmark of their own.
func BenchWorkflow(b *testing.B, open func(b *testing.B) backend.Backend) {
	const parts = 1000
	b.Run("plain", func(b *testing.B) {
		be := open(b)
		batch := make([]backend.InsertParams, parts+1)
		for i := range batch {
			batch[i] = backend.InsertParams{Queue: "bench", Type: "noop", Payload: []byte(`{"user_id":12345}`), MaxAttempts: 3}
		}
		for b.Loop() {
			if _, err := be.JobInsertMany(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			drainBench(b, be, parts+1)
		}
		b.ReportMetric(float64(b.N*(parts+1))/b.Elapsed().Seconds(), "jobs/s")
	})
	b.Run("fan-in", func(b *testing.B) {
		be := open(b)
		w, ok := be.(backend.Workflower)
		if !ok {
			b.Skip("no backend.Workflower")
		}
		p := backend.WorkflowParams{Name: "bench"}
		join := backend.TaskParams{Name: "join", Job: backend.InsertParams{Queue: "bench", Type: "join", Payload: []byte(`{}`), MaxAttempts: 3}}
		for i := range parts {
			name := fmt.Sprintf("part%d", i)
			p.Tasks = append(p.Tasks, backend.TaskParams{Name: name, Job: backend.InsertParams{Queue: "bench", Type: "noop", Payload: []byte(`{"user_id":12345}`), MaxAttempts: 3}})
			join.Deps = append(join.Deps, backend.Dep{Task: name})
		}
		p.Tasks = append(p.Tasks, join)
		for b.Loop() {
			if _, err := w.WorkflowInsert(b.Context(), p); err != nil {
				b.Fatal(err)
			}
			drainBench(b, be, parts+1)
		}
		b.ReportMetric(float64(b.N*(parts+1))/b.Elapsed().Seconds(), "jobs/s")
	})
}

// drainBench claims 10 jobs at a time from queue "bench" and completes
// them until n were done.
func drainBench(b *testing.B, be backend.Backend, n int) {
	outcomes := make([]backend.Outcome, 0, 10)
	for n > 0 {
		rows, err := be.JobClaim(b.Context(), backend.ClaimParams{Queues: []string{"bench"}, Max: 10, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) == 0 {
			b.Fatalf("nothing to claim with %d jobs left", n)
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		if res, err := be.JobComplete(b.Context(), backend.CompleteParams{Outcomes: outcomes}); err != nil || len(res.Stale) != 0 {
			b.Fatalf("JobComplete: %+v, %v", res, err)
		}
		n -= len(rows)
	}
}
