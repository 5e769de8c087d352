package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testInserted: a backend.InsertCounter counts every job inserted: a new
// store has counted none; a batch of N jobs (one queue or several, unique
// keys or not), N single inserts and a schedule's tick each raise the
// count by at least the jobs written (an ID sequence may skip values);
// claiming, completing, failing, replaying and purging leave it as it is.
// Backends without the capability skip it.
func testInserted(t *testing.T, h Harness) {
	parallel(t, h, "CountsInserts", func(t *testing.T, b backend.Backend) {
		c := insertCounter(t, b)
		last := inserted(t, c)
		if last != 0 {
			t.Fatalf("JobsInserted on a new store = %d, want 0", last)
		}
		// grows checks that the count rose by at least n since the last
		// check, what names the step.
		grows := func(what string, n int64) {
			t.Helper()
			now := inserted(t, c)
			if now < last+n {
				t.Fatalf("JobsInserted after %s = %d, want at least %d + %d", what, now, last, n)
			}
			last = now
		}
		// same checks that the count did not move since the last check.
		same := func(what string) {
			t.Helper()
			if now := inserted(t, c); now != last {
				t.Fatalf("JobsInserted after %s = %d, want still %d: only inserts count", what, now, last)
			}
		}

		const n = 5
		batch := make([]backend.InsertParams, n)
		for i := range batch {
			batch[i] = job("a", "t")
		}
		insertIDs(t, b, batch...)
		grows("a batch of 5 jobs", n)

		for range n {
			insertOne(t, b, job("a", "t"))
		}
		grows("5 single inserts", n)

		delayed, prio := job("a", "t"), job("b", "t")
		delayed.Delay = time.Hour
		prio.Priority = 3
		uniq := job("b", "t")
		uniq.UniqueKey = "k"
		insertIDs(t, b, delayed, prio, uniq)
		grows("a batch over two queues with a delay, a priority and a unique key", 3)
		if res := insert(t, b, uniq); !res[0].Duplicate {
			t.Fatalf("second insert of unique key k: %+v, want a duplicate", res[0])
		}
		grows("a duplicate of a unique key", 0) // never down; a sequence may skip

		// The life of jobs after their insert leaves the count alone.
		completeFresh(t, b, done(claimOne(t, b, "a").Ref()))
		same("a claim and a done")
		completeFresh(t, b, retry(claimOne(t, b, "a").Ref(), 0, "again"))
		same("a retry")
		failed := makeFailed(t, b, job("f", "t"), job("f", "t"))
		grows("2 inserts of jobs then failed", 2)
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{failed[0].JobID}})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("FailedReplay = %+v, %v; want 1 replayed", res, err)
		}
		same("a replay (it re-creates a job counted when first inserted)")
		if got, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{IDs: []int64{failed[1].JobID}}); err != nil || got != 1 {
			t.Fatalf("FailedPurge = %d, %v; want 1", got, err)
		}
		same("a purge")
		wantStats(t, b, backend.QueueStats{Queue: "f", Pending: 1})

		if s, ok := backend.As[backend.ScheduleStore](b); ok {
			upsert(t, s, def("hourly", "@every 1h"))
			if r := tickOnce(t, s, "hourly", time.Now().Truncate(time.Second)); !r.Enqueued {
				t.Fatalf("tick not enqueued: %+v", r)
			}
			grows("a schedule's tick", 1)
		}
	})

	parallel(t, h, "Closed", func(t *testing.T, b backend.Backend) {
		c := insertCounter(t, b)
		insertOne(t, b, job("a", "t"))
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n, err := c.JobsInserted(t.Context()); !errors.Is(err, backend.ErrClosed) {
			t.Fatalf("JobsInserted after Close = %d, %v; want ErrClosed", n, err)
		}
	})
}

// insertCounter returns b's InsertCounter or skips the test.
func insertCounter(t *testing.T, b backend.Backend) backend.InsertCounter {
	t.Helper()
	c, ok := backend.As[backend.InsertCounter](b)
	if !ok {
		t.Skip("backend does not implement backend.InsertCounter")
	}
	return c
}

// inserted returns the count, which is never negative.
func inserted(t *testing.T, c backend.InsertCounter) int64 {
	t.Helper()
	n, err := c.JobsInserted(t.Context())
	if err != nil {
		t.Fatalf("JobsInserted: %v", err)
	}
	if n < 0 {
		t.Fatalf("JobsInserted = %d, want >= 0", n)
	}
	return n
}
