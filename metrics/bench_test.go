package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/metrics"
)

// BenchmarkHooks is what metrics add to one attempt on the worker's
// goroutines: the Claimed, Started, Finished and Written hooks, over 10
// types so the series lookup is not a single hot entry.
func BenchmarkHooks(b *testing.B) {
	m, err := metrics.New(metrics.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	h := m.WorkerHooks()
	jobs := make([]*jobq.Job, 10)
	for i := range jobs {
		jobs[i] = &jobq.Job{Queue: "default", Type: fmt.Sprintf("type-%d", i)}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			j := jobs[i%len(jobs)]
			i++
			h.Claimed(jobq.ClaimedEvent{Job: j, Wait: 3 * time.Millisecond})
			h.Started(ctx, j)
			ev := jobq.Event{Kind: jobq.EventDone, Job: j, Duration: time.Millisecond}
			h.Finished(ev)
			h.Written(ev)
		}
	})
}

// BenchmarkHooksCold is BenchmarkHooks as a busy worker sees it: 100
// jobs over 10 types, and before each attempt a sweep over 4 MiB (twice
// the L2 cache here) standing for the backend's and the other jobs' work,
// which in a drain leaves the hooks' data cold. Only the four hooks are
// timed (ns/attempt); the sweep is not.
func BenchmarkHooksCold(b *testing.B) {
	m, err := metrics.New(metrics.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	h := m.WorkerHooks()
	jobs := make([]*jobq.Job, 100)
	for i := range jobs {
		jobs[i] = &jobq.Job{Queue: "default", Type: fmt.Sprintf("type-%d", i%10)}
	}
	ctx := context.Background()
	sweep := make([]byte, 4<<20)
	var took time.Duration
	i := 0
	for b.Loop() {
		for k := 0; k < len(sweep); k += 64 {
			sweep[k]++
		}
		j := jobs[i%len(jobs)]
		i++
		start := time.Now()
		h.Claimed(jobq.ClaimedEvent{Job: j, Wait: 3 * time.Millisecond})
		h.Started(ctx, j)
		ev := jobq.Event{Kind: jobq.EventDone, Job: j, Duration: time.Millisecond}
		h.Finished(ev)
		h.Written(ev)
		took += time.Since(start)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "hook-ns/attempt")
}

// BenchmarkScrape is one scrape of a process with 10 queues of 10 types
// each (every jobq series made), the depth read cached.
func BenchmarkScrape(b *testing.B) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	m, err := metrics.New(metrics.Options{StatsCache: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.ObserveQueues(jobq.NewInspector(mem)); err != nil {
		b.Fatal(err)
	}
	h := m.WorkerHooks()
	for q := range 10 {
		for t := range 10 {
			h.Started(context.Background(), &jobq.Job{Queue: fmt.Sprintf("q%d", q), Type: fmt.Sprintf("t%d", t)})
		}
	}
	for b.Loop() {
		if _, err := m.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueStats times the depth read one scrape costs (an
// Inspector.Stats, uncached) on a backend holding JOBQ_BENCH_JOBS pending
// jobs (default 100000) in 4 queues: what a scrape costs the database.
// Filling a backend with a million jobs takes minutes:
//
//	JOBQ_BENCH_JOBS=1000000 go test -run '^$' -bench QueueStats -benchtime 20x ./metrics
func BenchmarkQueueStats(b *testing.B) {
	n := 100000
	if s := os.Getenv("JOBQ_BENCH_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("JOBQ_BENCH_JOBS=%q: %v", s, err)
		}
	}
	for _, eb := range append([]struct {
		name string
		open func(testing.TB) backend.Backend
	}{{"memory", func(testing.TB) backend.Backend { return memory.New(memory.Options{}) }}}, endpointBackends...) {
		b.Run(fmt.Sprintf("%s/%d", eb.name, n), func(b *testing.B) {
			be := eb.open(b)
			defer be.Close()
			fill(b, be, n)
			in := jobq.NewInspector(be)
			b.ResetTimer()
			for b.Loop() {
				if _, err := in.Stats(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fill inserts n pending jobs in 4 queues, in batches.
func fill(b *testing.B, be backend.Backend, n int) {
	b.Helper()
	const batch = 5000
	ps := make([]backend.InsertParams, 0, batch)
	start := time.Now()
	for done := 0; done < n; {
		ps = ps[:0]
		for i := 0; i < batch && done+i < n; i++ {
			ps = append(ps, backend.InsertParams{Queue: fmt.Sprintf("q%d", (done+i)%4), Type: "t", Payload: []byte(`{"user_id":12345}`), MaxAttempts: 3})
		}
		if _, err := be.JobInsertMany(b.Context(), ps); err != nil {
			b.Fatal(err)
		}
		done += len(ps)
	}
	b.Logf("inserted %d jobs in %s", n, time.Since(start).Round(time.Millisecond))
}
