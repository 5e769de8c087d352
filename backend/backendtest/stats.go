package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testStats: QueueStats counts each state exactly, per queue, sorted, and
// omits queues with nothing in them.
func testStats(t *testing.T, h Harness) {
	parallel(t, h, "Empty", func(t *testing.T, b backend.Backend) {
		wantNoStats(t, b)
	})

	parallel(t, h, "CountsPerState", func(t *testing.T, b backend.Backend) {
		// alpha: 1 reserved, 2 pending, 1 scheduled, 1 failed.
		insertOne(t, b, job("alpha", "t"))
		claimOne(t, b, "alpha")
		makeFailed(t, b, job("alpha", "t"))
		later := job("alpha", "t")
		later.Delay = time.Hour
		insertIDs(t, b, job("alpha", "t"), job("alpha", "t"), later)
		// beta: only a failed job.
		makeFailed(t, b, job("beta", "t"))
		// gamma: done, so omitted.
		insertOne(t, b, job("gamma", "t"))
		completeFresh(t, b, done(claimOne(t, b, "gamma").Ref()))
		// delta: scheduled by RunAt and backing off after a retry.
		future := job("delta", "t")
		future.RunAt = time.Now().Add(24 * time.Hour)
		insertOne(t, b, future)
		insertOne(t, b, job("delta", "t"))
		completeFresh(t, b, retry(claimOne(t, b, "delta").Ref(), time.Hour, "backoff"))
		got := stats(t, b)
		want := []backend.QueueStats{
			{Queue: "alpha", Pending: 2, Scheduled: 1, Reserved: 1, Failed: 1},
			{Queue: "beta", Failed: 1},
			{Queue: "delta", Scheduled: 2},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("QueueStats =\n%+v\nwant\n%+v", got, want)
		}
	})

	parallel(t, h, "SortedByQueue", func(t *testing.T, b backend.Backend) {
		insertIDs(t, b, job("zeta", "t"), job("Alpha", "t"), job("mid", "t"), job("alpha", "t"))
		var names []string
		for _, s := range stats(t, b) {
			names = append(names, s.Queue)
		}
		if want := []string{"Alpha", "alpha", "mid", "zeta"}; !slices.Equal(names, want) {
			t.Fatalf("QueueStats queues %v, want %v", names, want)
		}
	})

	parallel(t, h, "ScheduledBecomesPending", func(t *testing.T, b backend.Backend) {
		const delay = 300 * time.Millisecond
		p := job("q", "t")
		p.Delay = delay
		start := time.Now()
		insertOne(t, b, p)
		s := statsOf(t, b, "q")
		if time.Since(start) < delay && s != (backend.QueueStats{Queue: "q", Scheduled: 1}) {
			t.Fatalf("QueueStats right after insert = %+v, want 1 scheduled", s)
		}
		eventually(t, waitLimit, "the delayed job to count as pending", func() bool {
			return statsOf(t, b, "q") == backend.QueueStats{Queue: "q", Pending: 1}
		})
	})
}
