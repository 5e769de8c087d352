package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testDefer: OutcomeDefer gives a job back as if its claim had never been
// made, whatever the holder says: the attempt un-counted, the last error
// and the releases as they were, so a job deferred any number of times
// (by workers that lack its handler) still has all its attempts for the
// one that can run it.
func testDefer(t *testing.T, h Harness) {
	parallel(t, h, "NeverSpendsAttempts", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 1
		id := insertOne(t, b, p)
		for i := range 5 {
			r := claimOne(t, b, "q")
			if r.ID != id || r.Attempts != 1 {
				t.Fatalf("claim %d after %d defers: job %d attempts %d; want job %d attempts 1", i+1, i, r.ID, r.Attempts, id)
			}
			completeFresh(t, b, deferred(r.Ref(), 0))
			row := wantPendingNow(t, b, id, 0)
			if row.LastError != "" || row.Releases != 0 {
				t.Fatalf("after defer %d: last error %q, releases %d; want none of either", i+1, row.LastError, row.Releases)
			}
		}
		if n := len(failedList(t, b, backend.FailedListParams{})); n != 0 {
			t.Fatalf("failed jobs = %d after 5 defers of a job of 1 attempt, want none", n)
		}
		// The worker that can run it gets its one attempt, and a lost
		// lease then fails it as usual: a defer raised no limit.
		r := claimOne(t, b, "q")
		completeFresh(t, b, fail(r.Ref(), "boom"))
		if f := failedByJob(t, b, id); f.Attempts != 1 || f.Error != "boom" {
			t.Fatalf("failed job: attempts %d error %q, want 1 %q", f.Attempts, f.Error, "boom")
		}
	})

	parallel(t, h, "KeepsLastErrorAndWaits", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 3
		id := insertOne(t, b, p)
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), 0, "smtp timeout"))
		r := claimOne(t, b, "q")
		if r.Attempts != 2 {
			t.Fatalf("second claim attempts = %d, want 2", r.Attempts)
		}
		before := time.Now()
		completeFresh(t, b, deferred(r.Ref(), time.Hour))
		row := wantStatus(t, b, id, backend.StatePending, 1)
		if row.LastError != "smtp timeout" {
			t.Errorf("LastError = %q, want the retried attempt's %q: a defer is no attempt", row.LastError, "smtp timeout")
		}
		if !row.ReservedAt.IsZero() || !row.LeaseUntil.IsZero() {
			t.Errorf("ReservedAt %v LeaseUntil %v, want zero after a defer", row.ReservedAt, row.LeaseUntil)
		}
		near(t, "AvailableAt", row.AvailableAt, before.Add(time.Hour), skew)
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "Fenced", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		completeFresh(t, b, deferred(r.Ref(), 0))
		// Sent again (a reply lost): the first ended the claim.
		if res := complete(t, b, deferred(r.Ref(), 0)); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
			t.Fatalf("second defer of one claim: Stale = %v, want [%v]", res.Stale, r.Ref())
		}
		wantPendingNow(t, b, id, 0)
		// Nor does it touch a later claim of the job.
		r2 := claimOne(t, b, "q")
		if r2.Token <= r.Token {
			t.Fatalf("claim after a defer: token %d, want above %d", r2.Token, r.Token)
		}
		if res := complete(t, b, deferred(r.Ref(), 0)); len(res.Stale) != 1 {
			t.Fatalf("the first claim's defer after a new claim: Stale = %v, want it", res.Stale)
		}
		wantStatus(t, b, id, backend.StateReserved, 1)
		completeFresh(t, b, done(r2.Ref()))
		gone(t, b, id)
	})

	parallel(t, h, "InBatch", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"))
		rows := claim(t, b, 3, longLease, "q")
		if len(rows) != 3 {
			t.Fatalf("claimed %d jobs, want 3", len(rows))
		}
		byID := map[int64]backend.JobRef{}
		for _, r := range rows {
			byID[r.ID] = r.Ref()
		}
		completeFresh(t, b, retry(byID[ids[0]], 0, "x"), deferred(byID[ids[1]], 0), done(byID[ids[2]]))
		wantPendingNow(t, b, ids[0], 1)
		wantPendingNow(t, b, ids[1], 0)
		gone(t, b, ids[2])
	})

	parallel(t, h, "NegativeDelayRefused", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{deferred(r.Ref(), -time.Second)}})
		wantInvalid(t, err, "retry delay")
		wantStatus(t, b, id, backend.StateReserved, 1)
	})
}
