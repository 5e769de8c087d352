package postgres

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// BenchmarkInsertSingle: one job per call (one statement, one commit).
func BenchmarkInsertSingle(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	params := []backend.InsertParams{testJob("q")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkInsertSingleParallel: one job per call from 8 goroutines, as
// the steady workload's producers do.
func BenchmarkInsertSingleParallel(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	params := []backend.InsertParams{testJob("q")}
	b.SetParallelism(4) // × GOMAXPROCS (2 here) = 8 producers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := be.JobInsertMany(ctx, params); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkInsertBatch1000: 1,000 jobs per call (COPY).
func BenchmarkInsertBatch1000(b *testing.B) { benchInsertBatch(b, 1000) }

// BenchmarkInsertBatch32: 32 jobs per call, below copyMinRows: the
// one-statement insert fed by arrays (unnest).
func BenchmarkInsertBatch32(b *testing.B) { benchInsertBatch(b, 32) }

// BenchmarkInsertBatchKeyed32: 32 jobs per call, each with a unique key
// of its own, so none is a duplicate: a batch with keys runs in a
// transaction (see mayTakeRounds).
func BenchmarkInsertBatchKeyed32(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	params := make([]backend.InsertParams, 32)
	for i := range params {
		params[i] = testJob("q")
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range params {
			n++
			params[i].UniqueKey = strconv.Itoa(n)
		}
		if _, err := be.JobInsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(params))/b.Elapsed().Seconds(), "jobs/s")
}

// benchInsertBatch inserts n jobs per call.
func benchInsertBatch(b *testing.B, n int) {
	be := openTest(b, Options{})
	ctx := context.Background()
	params := make([]backend.InsertParams, n)
	for i := range params {
		params[i] = testJob("q")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(params))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete100: claim 100 jobs and complete them as done in
// one batch; each op handles 100 jobs. The queue is refilled (untimed) as
// it runs dry.
func BenchmarkClaimComplete100(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	const batch, refill = 100, 20000
	fill := func() {
		b.StopTimer()
		insertN(b, be, "q", refill)
		b.StartTimer()
	}
	fill()
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) < batch {
			fill()
			if len(rows) == 0 {
				i--
				continue
			}
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
		if err != nil || len(res.Stale) != 0 {
			b.Fatalf("JobComplete: %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimRetry100: claim 100 jobs and retry them at once with an
// error in one batch, the path that records an attempt's error (and, from
// migration 011, appends it to the job's errors); each op handles 100
// jobs. 1000 jobs go round, so after 200 ops every job holds
// MaxAttemptErrors entries and each retry also drops the oldest: run it
// with -benchtime 2000x or more to measure that steady state.
func BenchmarkClaimRetry100(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	const batch, jobs = 100, 1000
	ps := make([]backend.InsertParams, jobs)
	for i := range ps {
		ps[i] = testJob("q")
		ps[i].MaxAttempts = backend.MaxMaxAttempts
	}
	if _, err := be.JobInsertMany(ctx, ps); err != nil {
		b.Fatal(err)
	}
	if b.N*batch/jobs >= backend.MaxMaxAttempts {
		b.Fatalf("b.N %d would spend the jobs' %d attempts", b.N, backend.MaxMaxAttempts)
	}
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: batch, Lease: time.Minute})
		if err != nil || len(rows) != batch {
			b.Fatalf("JobClaim: %d rows, %v", len(rows), err)
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeRetry,
				Error: "dial tcp 10.0.0.7:5432: connect: connection refused"})
		}
		res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
		if err != nil || len(res.Stale) != 0 {
			b.Fatalf("JobComplete: %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// The baselines run the plainest SQL that stores the same rows, so a run
// can compare the backend's statements against the server's own speed on
// the same (shared, noisy) machine.

// BenchmarkBaselineInsertSingle: a bare single-row INSERT per commit.
func BenchmarkBaselineInsertSingle(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	stmt := "INSERT INTO " + quoteIdent(be.Schema()) + ".jobs (queue, type, payload, max_attempts) VALUES ($1, $2, $3, $4)"
	for b.Loop() {
		if _, err := be.Pool().Exec(ctx, stmt, "q", "t", `{"n":1}`, 3); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkBaselineInsertBatch1000: a bare INSERT … SELECT unnest of 1,000 rows.
func BenchmarkBaselineInsertBatch1000(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	stmt := "INSERT INTO " + quoteIdent(be.Schema()) + ".jobs (queue, type, payload, max_attempts) SELECT * FROM unnest($1::text[], $2::text[], $3::json[], $4::int[])"
	const n = 1000
	queues, types, payloads, maxes := make([]string, n), make([]string, n), make([]string, n), make([]int32, n)
	for i := range n {
		queues[i], types[i], payloads[i], maxes[i] = "q", "t", `{"n":1}`, 3
	}
	for b.Loop() {
		if _, err := be.Pool().Exec(ctx, stmt, queues, types, payloads, maxes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkBaselineInsertSingleParallel: bare single-row INSERTs from 8
// goroutines, as BenchmarkInsertSingleParallel.
func BenchmarkBaselineInsertSingleParallel(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	stmt := "INSERT INTO " + quoteIdent(be.Schema()) + ".jobs (queue, type, payload, max_attempts) VALUES ($1, $2, $3, $4)"
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := be.Pool().Exec(ctx, stmt, "q", "t", `{"n":1}`, 3); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkBaselineNotifyParallel: bare single-row INSERTs that also
// NOTIFY, from 8 goroutines.
func BenchmarkBaselineNotifyParallel(b *testing.B) {
	be := openTest(b, Options{})
	ctx := context.Background()
	stmt := "WITH i AS (INSERT INTO " + quoteIdent(be.Schema()) + ".jobs (queue, type, payload, max_attempts) VALUES ($1, $2, $3, $4) RETURNING queue) SELECT pg_notify('x' || $5, queue) FROM i"
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := be.Pool().Exec(ctx, stmt, "q", "t", `{"n":1}`, 3, be.Schema()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
