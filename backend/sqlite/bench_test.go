package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// openBench opens a fresh file-backed backend for a benchmark.
func openBench(b *testing.B) *sqlite.Backend {
	b.Helper()
	be, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatalf("open: %v", err)
	}
	b.Cleanup(func() { _ = be.Close() })
	return be
}

func benchJobs(n int) []backend.InsertParams {
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{
			Queue:       "bench",
			Type:        "noop",
			Payload:     []byte(fmt.Sprintf(`{"user_id":%d,"email":"user%d@example.com"}`, i, i)),
			MaxAttempts: 3,
		}
	}
	return ps
}

// benchMetadata is what a traced job carries: a W3C traceparent and a tag.
var benchMetadata = map[string]string{
	"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	"tenant":      "acme",
}

// withMetadata sets benchMetadata on every job of ps.
func withMetadata(ps []backend.InsertParams) []backend.InsertParams {
	for i := range ps {
		ps[i].Metadata = benchMetadata
	}
	return ps
}

func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkInsertBatch1000: one JobInsertMany of 1,000 jobs per op.
func BenchmarkInsertBatch1000(b *testing.B) {
	be := openBench(b)
	ps := benchJobs(1000)
	ctx := b.Context()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*len(ps))
}

// BenchmarkInsertBatch1000Unique: one JobInsertMany of 1,000 jobs with
// unique keys per op, half of them repeating keys of the previous batch's
// jobs, still waiting (duplicates), as jobq bench --unique --duplicates
// 0.5 sends them: the cost of the unique key lookup.
func BenchmarkInsertBatch1000Unique(b *testing.B) {
	be := openBench(b)
	ps := benchJobs(1000)
	ctx := b.Context()
	n := 0
	for b.Loop() {
		for i := range ps {
			if i%2 == 0 || n == 0 {
				ps[i].UniqueKey = fmt.Sprintf("u%d-%d", n, i)
			} else {
				ps[i].UniqueKey = fmt.Sprintf("u%d-%d", n-1, i-1)
			}
		}
		n++
		if _, err := be.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*len(ps))
}

// BenchmarkInsertBatch1000Metadata: BenchmarkInsertBatch1000 with every
// job carrying benchMetadata, the cost of encoding it.
func BenchmarkInsertBatch1000Metadata(b *testing.B) {
	be := openBench(b)
	ps := withMetadata(benchJobs(1000))
	ctx := b.Context()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*len(ps))
}

// BenchmarkInsertSingle: one JobInsertMany of one job (one transaction) per op.
func BenchmarkInsertSingle(b *testing.B) {
	be := openBench(b)
	ps := benchJobs(1)
	ctx := b.Context()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N)
}

// BenchmarkClaimComplete: per op, claim a batch of 100 due jobs and complete
// them all as done in one JobComplete, from a backlog inserted beforehand.
func BenchmarkClaimComplete(b *testing.B) { benchClaimComplete(b, benchJobs(1000)) }

// BenchmarkClaimCompleteMetadata: BenchmarkClaimComplete with every job
// carrying benchMetadata, the cost of decoding it.
func BenchmarkClaimCompleteMetadata(b *testing.B) {
	benchClaimComplete(b, withMetadata(benchJobs(1000)))
}

func benchClaimComplete(b *testing.B, chunk []backend.InsertParams) {
	const batch = 100
	be := openBench(b)
	ctx := b.Context()
	for left := b.N * batch; left > 0; left -= len(chunk) {
		if _, err := be.JobInsertMany(ctx, chunk[:min(left, len(chunk))]); err != nil {
			b.Fatal(err)
		}
	}
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for range b.N {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) != batch {
			b.Fatalf("claimed %d jobs, want %d", len(rows), batch)
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Stale) != 0 {
			b.Fatalf("%d stale outcomes", len(res.Stale))
		}
	}
	b.StopTimer()
	reportJobs(b, b.N*batch)
}

// BenchmarkQueueStats: the counts every dashboard view and metrics scrape
// ask for, over 100,000 pending jobs in two queues (a fifth of them
// scheduled) and 100 reserved.
func BenchmarkQueueStats(b *testing.B) {
	be := openBench(b)
	ctx := b.Context()
	for i := range 100 {
		ps := benchJobs(1000)
		for k := range ps {
			if k%2 == 1 {
				ps[k].Queue = "other"
			}
			if k%5 == 0 {
				ps[k].RunAt = time.Now().Add(time.Hour)
			}
		}
		if _, err := be.JobInsertMany(ctx, ps); err != nil {
			b.Fatalf("insert %d: %v", i, err)
		}
	}
	if _, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 100, Lease: time.Hour}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		st, err := be.QueueStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(st) != 2 || st[0].Reserved+st[1].Reserved != 100 || st[0].Pending+st[1].Pending != 79900 {
			b.Fatalf("stats %+v", st)
		}
	}
}
