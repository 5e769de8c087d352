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

	parallel(t, h, "OldestDue", func(t *testing.T, b backend.Backend) {
		oldest := func(queue string) time.Time {
			t.Helper()
			all, err := b.QueueStats(t.Context())
			if err != nil {
				t.Fatalf("QueueStats: %v", err)
			}
			for _, s := range all {
				if s.Queue == queue {
					return s.OldestDue
				}
			}
			t.Fatalf("QueueStats has no queue %q", queue)
			return time.Time{}
		}
		// Overdue by an hour, and a younger due job: the hour wins.
		overdue := job("q", "t")
		overdue.RunAt = time.Now().Add(-time.Hour)
		ids := insertIDs(t, b, overdue, job("q", "t"))
		want := get(t, b, ids[0]).AvailableAt
		if got := oldest("q"); !got.Equal(want) {
			t.Fatalf("OldestDue = %v, want the overdue job's AvailableAt %v", got, want)
		}
		// Reserved, scheduled and failed jobs are not due: once the
		// overdue job (the older ID) is claimed, the other is the oldest.
		if r := claimOne(t, b, "q"); r.ID != ids[0] {
			t.Fatalf("claimed job %d, want the overdue job %d", r.ID, ids[0])
		}
		if got, want := oldest("q"), get(t, b, ids[1]).AvailableAt; !got.Equal(want) {
			t.Fatalf("OldestDue after the overdue job was claimed = %v, want %v", got, want)
		}
		later := job("later", "t")
		later.Delay = time.Hour
		insertOne(t, b, later)
		makeFailed(t, b, job("failed", "t"))
		insertOne(t, b, job("busy", "t"))
		claimOne(t, b, "busy")
		for _, q := range []string{"later", "failed", "busy"} {
			if got := oldest(q); !got.IsZero() {
				t.Errorf("OldestDue of queue %s with no due job = %v, want zero", q, got)
			}
		}
	})

	// Ready jobs inserted alone and in batches, retried and overdue: the
	// pending count covers them all and OldestDue is the oldest of them,
	// wherever a backend keeps each.
	parallel(t, h, "PendingEveryWayIn", func(t *testing.T, b backend.Backend) {
		due := func() backend.QueueStats {
			t.Helper()
			all, err := b.QueueStats(t.Context())
			if err != nil {
				t.Fatalf("QueueStats: %v", err)
			}
			for _, s := range all {
				if s.Queue == "q" {
					return s
				}
			}
			return backend.QueueStats{Queue: "q"}
		}
		check := func(step string, pending int64, oldest int64) {
			t.Helper()
			s := due()
			if s.Pending != pending {
				t.Fatalf("%s: Pending %d, want %d", step, s.Pending, pending)
			}
			if want := get(t, b, oldest).AvailableAt; !s.OldestDue.Equal(want) {
				t.Fatalf("%s: OldestDue %v, want job %d's AvailableAt %v", step, s.OldestDue, oldest, want)
			}
		}
		first := insertOne(t, b, job("q", "t"))
		batch := insertIDs(t, b, job("q", "t"), job("q", "t"))
		check("a single insert, then a batch", 3, first)
		if r := claimOne(t, b, "q"); r.ID != first {
			t.Fatalf("claimed job %d, want %d", r.ID, first)
		}
		last := insertOne(t, b, job("q", "t"))
		check("the single insert claimed, another made", 3, batch[0])
		rows := claim(t, b, 2, longLease, "q")
		if got := sortedIDs(rows); !slices.Equal(got, batch) {
			t.Fatalf("claim got %v, want the batch %v", got, batch)
		}
		check("the batch claimed", 1, last)
		// A retried job is due again from its retry, after last was made;
		// an overdue one from an hour ago.
		completeFresh(t, b, retry(rows[0].Ref(), 0, "again"))
		check("a job retried", 2, last)
		overdue := job("q", "t")
		overdue.RunAt = time.Now().Add(-time.Hour)
		old := insertOne(t, b, overdue)
		check("an overdue job", 3, old)
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
