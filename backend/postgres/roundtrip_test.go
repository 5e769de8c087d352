package postgres

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres/pgtest"
)

// rtKey marks the context of the call whose round trips rtCounter counts.
type rtKey struct{}

// rtCounter counts the round trips to the server made under a context
// carrying rtKey: each statement (Query, QueryRow, Exec, a transaction's
// BEGIN and COMMIT included) and each batch (SendBatch: its statements go
// out pipelined and their replies come back together) is one. Background
// work of the backend (the vacuumer, the listener, wake-up hints) carries
// no such context and is not counted.
type rtCounter struct{}

var (
	_ pgx.QueryTracer = rtCounter{}
	_ pgx.BatchTracer = rtCounter{}
)

func (rtCounter) count(ctx context.Context) {
	if n, ok := ctx.Value(rtKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

func (c rtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.count(ctx)
	return ctx
}

func (rtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c rtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.count(ctx)
	return ctx
}

func (rtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (rtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// rtCase is a batch of outcomes whose completion costs at most max round
// trips: setup inserts its jobs, outcome says how each claimed job ends,
// and check asserts what the completion did.
type rtCase struct {
	name    string
	max     int64
	setup   func(t testing.TB, b *Backend) []int64 // the workflows inserted
	outcome func(r *backend.JobRow) backend.Outcome
	check   func(t *testing.T, b *Backend, wfs []int64)
}

// TestWorkflowCompleteRoundTrips counts the round trips of one JobComplete
// of about 100 outcomes, plain jobs and workflow tasks mixed in the ways a
// drain sees them, directly and through PgBouncer in transaction mode, and
// checks the completion's effects, so a statement saved cannot be one
// that was needed.
func TestWorkflowCompleteRoundTrips(t *testing.T) {
	t.Parallel()
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		runRoundTrips(t, testURL(t))
	})
	t.Run("pgbouncer", func(t *testing.T) {
		t.Parallel()
		p := pgtest.StartPooled(t)
		runRoundTrips(t, p.URL)
	})
}

func runRoundTrips(t *testing.T, url string) {
	for _, c := range roundTripCases() {
		t.Run(c.name, func(t *testing.T) {
			b := openSchema(t, url, Options{Schema: testSchema(t), NoVacuum: true, tracer: rtCounter{}})
			wfs := c.setup(t, b)
			rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 1000, Lease: time.Hour})
			if err != nil {
				t.Fatalf("JobClaim: %v", err)
			}
			outs := make([]backend.Outcome, len(rows))
			for i, r := range rows {
				outs[i] = c.outcome(r)
			}
			var n atomic.Int64
			ctx := context.WithValue(t.Context(), rtKey{}, &n)
			res, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs})
			if err != nil || len(res.Stale)+len(res.Cancelled) != 0 {
				t.Fatalf("JobComplete of %d outcomes = %+v, %v; want all applied", len(outs), res, err)
			}
			t.Logf("%d outcomes: %d round trips", len(outs), n.Load())
			if n.Load() > c.max {
				t.Errorf("JobComplete of %d outcomes took %d round trips, want at most %d", len(outs), n.Load(), c.max)
			}
			c.check(t, b, wfs)
			wfNoDrift(t, b)
		})
	}
}

// rtWorkflows inserts n workflows, each of the tasks made by tasks.
func rtWorkflows(t testing.TB, b *Backend, n int, tasks func() []backend.TaskParams) []int64 {
	t.Helper()
	wfs := make([]int64, n)
	for i := range wfs {
		wfs[i] = wfInsert(t, b, tasks()...)
	}
	return wfs
}

// rtFlat is k tasks without dependencies.
func rtFlat(k int) func() []backend.TaskParams {
	return func() []backend.TaskParams {
		tasks := make([]backend.TaskParams, k)
		for i := range tasks {
			tasks[i] = wfTask(fmt.Sprintf("t%d", i))
		}
		return tasks
	}
}

// rtWantWorkflows asserts each workflow's state.
func rtWantWorkflows(t *testing.T, b *Backend, wfs []int64, state backend.WorkflowState) {
	t.Helper()
	for _, id := range wfs {
		if wf := wfGet(t, b, id); wf.State != state {
			t.Errorf("workflow %d is %s, want %s", id, wf.State, state)
		}
	}
}

// rtWantDue asserts how many jobs of queue "w" wait.
func rtWantDue(t *testing.T, b *Backend, want int) {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 1000, Lease: time.Hour})
	if err != nil || len(rows) != want {
		t.Errorf("JobClaim after the completion = %d jobs, %v; want %d", len(rows), err, want)
	}
}

func roundTripCases() []rtCase {
	done := func(r *backend.JobRow) backend.Outcome {
		return backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone, Result: []byte(`{"ok":true}`)}
	}
	succeeded := func(t *testing.T, b *Backend, wfs []int64) {
		rtWantWorkflows(t, b, wfs, backend.WorkflowSucceeded)
		rtWantDue(t, b, 0)
	}
	return []rtCase{{
		name: "plain jobs", max: 1,
		setup: func(t testing.TB, b *Backend) []int64 {
			insertN(t, b, "w", 100)
			return nil
		},
		outcome: done, check: succeeded,
	}, {
		name: "1 workflow of 100 tasks", max: 3,
		setup: func(t testing.TB, b *Backend) []int64 {
			return rtWorkflows(t, b, 1, rtFlat(100))
		},
		outcome: done, check: succeeded,
	}, {
		name: "100 workflows of 1 task", max: 3,
		setup: func(t testing.TB, b *Backend) []int64 {
			return rtWorkflows(t, b, 100, rtFlat(1))
		},
		outcome: done, check: succeeded,
	}, {
		// The heads of 10 chains of two in each of 10 workflows: their
		// completion releases the 100 second links.
		name: "10 workflows of chains", max: 3,
		setup: func(t testing.TB, b *Backend) []int64 {
			return rtWorkflows(t, b, 10, func() []backend.TaskParams {
				var tasks []backend.TaskParams
				for i := range 10 {
					head := fmt.Sprintf("c%da", i)
					tasks = append(tasks, wfTask(head), wfTask(fmt.Sprintf("c%db", i), head))
				}
				return tasks
			})
		},
		outcome: done,
		check: func(t *testing.T, b *Backend, wfs []int64) {
			rtWantWorkflows(t, b, wfs, backend.WorkflowRunning)
			rtWantDue(t, b, 100)
		},
	}, {
		name: "50 plain jobs and 50 tasks", max: 3,
		setup: func(t testing.TB, b *Backend) []int64 {
			insertN(t, b, "w", 50)
			return rtWorkflows(t, b, 5, rtFlat(10))
		},
		outcome: done, check: succeeded,
	}, {
		// a fails: b, then c, are cancelled, one level of the cascade each.
		name: "a failing cascade", max: 6,
		setup: func(t testing.TB, b *Backend) []int64 {
			return rtWorkflows(t, b, 1, func() []backend.TaskParams {
				return append(rtFlat(99)(), wfTask("a"), wfTask("b", "a"), wfTask("c", "b"))
			})
		},
		outcome: func(r *backend.JobRow) backend.Outcome {
			if r.Type == "a" {
				return backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"}
			}
			return done(r)
		},
		check: func(t *testing.T, b *Backend, wfs []int64) {
			wfWant(t, b, wfs[0], backend.WorkflowFailed, map[string]string{
				"a": "failed: boom", "b": `cancelled: dependency "a" failed`, "c": `cancelled: dependency "b" cancelled`, "t0": "succeeded",
			})
			rtWantDue(t, b, 0)
		},
	}}
}

// slowLink delays each write by half a millisecond: a round trip then
// costs what it would across a network (a 0.5 ms ping, as between
// machines in one data centre) rather than over loopback.
type slowLink struct{}

func (slowLink) wrap(c net.Conn) net.Conn { return slowConn{c} }

type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(500 * time.Microsecond) //nolint:forbidigo // the delay is the point: a network's latency
	return c.Conn.Write(p)
}

// BenchmarkWorkflowComplete times the JobComplete of each round-trip case
// alone (inserting, claiming and draining what it released are not
// timed), on one fresh schema per case, over loopback and over a link
// with 0.5 ms of latency (slowLink): what the round trips cost
// (docs/performance.md).
func BenchmarkWorkflowComplete(b *testing.B) {
	for _, link := range []struct {
		name string
		wrap connWrapper
	}{{"loopback", nil}, {"0.5ms", slowLink{}}} {
		for _, c := range roundTripCases() {
			b.Run(link.name+"/"+c.name, func(b *testing.B) {
				benchComplete(b, openTest(b, Options{NoVacuum: true, wrapConn: link.wrap}), c)
			})
		}
	}
}

func benchComplete(b *testing.B, be *Backend, c rtCase) {
	claim := func() []*backend.JobRow {
		rows, err := be.JobClaim(b.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 1000, Lease: time.Hour})
		if err != nil {
			b.Fatalf("JobClaim: %v", err)
		}
		return rows
	}
	complete := func(rows []*backend.JobRow, outcome func(*backend.JobRow) backend.Outcome) {
		outs := make([]backend.Outcome, len(rows))
		for i, r := range rows {
			outs[i] = outcome(r)
		}
		if _, err := be.JobComplete(b.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
			b.Fatalf("JobComplete: %v", err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c.setup(b, be)
		rows := claim()
		b.StartTimer()
		complete(rows, c.outcome)
		b.StopTimer()
		for rows := claim(); len(rows) > 0; rows = claim() {
			complete(rows, func(r *backend.JobRow) backend.Outcome {
				return backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
			})
		}
		b.StartTimer()
	}
}
