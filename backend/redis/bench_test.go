package redis

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// Benchmarks of the backend alone (no runtime), for profiles:
//
//	go test ./backend/redis -run '^$' -bench . -cpuprofile cpu.out
//
// jobq bench --db redis://… measures the five standard workloads.

var benchPayload = []byte(`{"user_id":12345,"template":"welcome"}`)

func benchJobs(n int, queue string) []backend.InsertParams {
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: queue, Type: "bench.noop", Payload: benchPayload, MaxAttempts: 3}
	}
	return ps
}

func BenchmarkInsertOne(b *testing.B) {
	be := openTest(b, Options{})
	ps := benchJobs(1, "q")
	for b.Loop() {
		if _, err := be.JobInsertMany(b.Context(), ps); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInsertBatch1000(b *testing.B) {
	be := openTest(b, Options{})
	ps := benchJobs(1000, "q")
	for b.Loop() {
		if _, err := be.JobInsertMany(b.Context(), ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete100 claims and completes batches of 100 jobs,
// inserted in one batch (they wait in the ready list l, as merged
// inserts' jobs do).
func BenchmarkClaimComplete100(b *testing.B) {
	benchClaimComplete(b, 100)
}

// BenchmarkClaimComplete100Singles is BenchmarkClaimComplete100 with the
// jobs inserted one by one (they wait in the ready list l).
func BenchmarkClaimComplete100Singles(b *testing.B) {
	benchClaimComplete(b, 1)
}

// BenchmarkClaimComplete100Priority is BenchmarkClaimComplete100 with jobs
// of priority 1: they wait in the zset p (as jobs with options, given
// IDs, retries and delayed jobs do), so claims take p's path, not l's.
func BenchmarkClaimComplete100Priority(b *testing.B) {
	benchClaimCompleteJobs(b, 100, 1, false)
}

// BenchmarkClaimComplete100Keyed is BenchmarkClaimComplete100 with each
// job on a key of its own under a limit of 1 per key: the claim takes
// them from the claimable keys (Kk), the completion frees each key.
func BenchmarkClaimComplete100Keyed(b *testing.B) {
	benchClaimCompleteJobs(b, 100, 0, true)
}

func benchClaimComplete(b *testing.B, batch int) { benchClaimCompleteJobs(b, batch, 0, false) }

func benchClaimCompleteJobs(b *testing.B, batch, priority int, keyed bool) {
	be := openTest(b, Options{})
	if keyed {
		if err := be.QueueSetKeys(b.Context(), "q", backend.KeyRules{Limit: 1}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		b.StopTimer()
		for range 100 / batch {
			jobs := benchJobs(batch, "q")
			for i := range jobs {
				jobs[i].Priority = priority
				if keyed {
					jobs[i].Key = "k" + strconv.Itoa(i)
				}
			}
			if _, err := be.JobInsertMany(b.Context(), jobs); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		rows, err := be.JobClaim(b.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 100, Lease: time.Minute})
		if err != nil || len(rows) != 100 {
			b.Fatal(fmt.Sprint(len(rows), err))
		}
		outs := make([]backend.Outcome, len(rows))
		for i, r := range rows {
			outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
		}
		if _, err := be.JobComplete(b.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkMemoryPerJob reports the Redis memory one pending small job
// takes (the bench payload, no metadata, no unique key), measured on a
// private server: used_memory before and after inserting 100,000 jobs in
// batches of 1000.
func BenchmarkMemoryPerJob(b *testing.B) {
	benchMemoryPerJob(b, 1000)
}

// BenchmarkMemoryPerJobSingle is BenchmarkMemoryPerJob with the jobs
// inserted one by one, as single enqueues write them.
func BenchmarkMemoryPerJobSingle(b *testing.B) {
	benchMemoryPerJob(b, 1)
}

func benchMemoryPerJob(b *testing.B, batch int) {
	srv := redistest.StartServer(b)
	be := openURL(b, srv.URL, Options{KeyPrefix: DefaultKeyPrefix, Logger: quiet})
	used := func() int64 {
		info, err := be.c.rdb.Do(b.Context(), be.c.rdb.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO")
		return 0
	}
	const n = 100_000
	for b.Loop() {
		b.StopTimer()
		if err := be.c.rdb.Do(b.Context(), be.c.rdb.B().Flushall().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		if _, err := be.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		// Register the queue first: it is not a job's cost.
		if _, err := be.JobInsertMany(b.Context(), benchJobs(1, "default")); err != nil {
			b.Fatal(err)
		}
		before := used()
		b.StartTimer()
		for i := 0; i < n; i += batch {
			if _, err := be.JobInsertMany(b.Context(), benchJobs(batch, "default")); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(used()-before)/n, "bytes/job")
		b.StartTimer()
	}
}
