package backendtest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testComplete: the three outcomes of an attempt, alone and in one batch.
func testComplete(t *testing.T, h Harness) {
	parallel(t, h, "DoneDeletes", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		gone(t, b, id)
		claimNone(t, b, "q")
		wantNoStats(t, b)
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("FailedList after done = %d rows, want none", len(f))
		}
	})

	parallel(t, h, "RetryLater", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		before := time.Now()
		completeFresh(t, b, retry(r.Ref(), time.Hour, "smtp timeout"))
		row := wantStatus(t, b, id, backend.StatePending, 1)
		if row.LastError != "smtp timeout" {
			t.Errorf("LastError = %q, want %q", row.LastError, "smtp timeout")
		}
		if !row.ReservedAt.IsZero() || !row.LeaseUntil.IsZero() {
			t.Errorf("ReservedAt %v LeaseUntil %v, want zero after retry", row.ReservedAt, row.LeaseUntil)
		}
		near(t, "AvailableAt", row.AvailableAt, before.Add(time.Hour), skew)
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "RetryNow", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), 0, "flaky"))
		wantPendingNow(t, b, id, 1)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		r := claimOne(t, b, "q")
		if r.ID != id || r.Attempts != 2 || r.LastError != "flaky" {
			t.Fatalf("second claim: job %d attempts %d last error %q; want job %d attempts 2 %q", r.ID, r.Attempts, r.LastError, id, "flaky")
		}
	})

	parallel(t, h, "FailMovesToFailed", func(t *testing.T, b backend.Backend) {
		p := job("mail", "email.send")
		p.Payload = []byte(`{"to":"x@example.com"}`)
		p.Priority = 4
		p.MaxAttempts = 7
		p.UniqueKey = "once"
		before := time.Now()
		id := insertOne(t, b, p)
		created := get(t, b, id).CreatedAt
		r := claimOne(t, b, "mail")
		completeFresh(t, b, fail(r.Ref(), "permanent: bad address"))
		gone(t, b, id)
		list := failedList(t, b, backend.FailedListParams{})
		if len(list) != 1 {
			t.Fatalf("FailedList = %d rows, want 1", len(list))
		}
		f := list[0]
		if f.ID <= 0 || f.JobID != id || f.Queue != "mail" || f.Type != "email.send" || !jsonEqual(f.Payload, p.Payload) {
			t.Errorf("failed row %+v does not match job %d %+v", f, id, p)
		}
		if f.Attempts != 1 || f.MaxAttempts != 7 || f.Priority != 4 || f.UniqueKey != "once" {
			t.Errorf("failed row attempts %d max %d priority %d key %q; want 1 7 4 %q", f.Attempts, f.MaxAttempts, f.Priority, f.UniqueKey, "once")
		}
		if f.Error != "permanent: bad address" {
			t.Errorf("failed row error %q", f.Error)
		}
		near(t, "FailedAt", f.FailedAt, before, skew)
		near(t, "CreatedAt", f.CreatedAt, created, time.Millisecond)
		g, err := b.FailedGet(t.Context(), f.JobID)
		if err != nil {
			t.Fatalf("FailedGet(%d): %v", f.JobID, err)
		}
		if g.ID != f.ID || g.JobID != id || g.Error != f.Error {
			t.Errorf("FailedGet = %+v, want %+v", g, f)
		}
		wantStats(t, b, backend.QueueStats{Queue: "mail", Failed: 1})
	})

	parallel(t, h, "FailIgnoresAttemptsLeft", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 10
		id := insertOne(t, b, p)
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "permanent"))
		gone(t, b, id)
		failedByJob(t, b, id)
	})

	parallel(t, h, "MixedBatch", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"), job("q", "t"))
		rows := claim(t, b, 4, longLease, "q")
		if got := sortedIDs(rows); !slices.Equal(got, ids) {
			t.Fatalf("claimed %v, want %v", got, ids)
		}
		ref := map[int64]backend.JobRef{}
		for _, r := range rows {
			ref[r.ID] = r.Ref()
		}
		// The same job and attempt under another token: the token is the
		// fence, not the attempt.
		stale := ref[ids[3]]
		stale.Token++
		res := complete(t, b,
			done(ref[ids[0]]),
			retry(ref[ids[1]], 0, "again"),
			fail(ref[ids[2]], "broken"),
			done(stale),
		)
		if !slices.Equal(res.Stale, []backend.JobRef{stale}) {
			t.Fatalf("Stale = %v, want [%v]", res.Stale, stale)
		}
		gone(t, b, ids[0])
		wantPendingNow(t, b, ids[1], 1)
		gone(t, b, ids[2])
		if f := failedByJob(t, b, ids[2]); f.Error != "broken" {
			t.Errorf("failed error %q, want broken", f.Error)
		}
		wantStatus(t, b, ids[3], backend.StateReserved, 1)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1, Reserved: 1, Failed: 1})
	})

	parallel(t, h, "AttemptsExactAcrossClaims", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 3
		id := insertOne(t, b, p)
		for attempt := 1; attempt <= 3; attempt++ {
			r := claimOne(t, b, "q")
			if r.ID != id || r.Attempts != attempt || r.MaxAttempts != 3 {
				t.Fatalf("claim %d: job %d attempts %d max %d; want job %d attempts %d max 3", attempt, r.ID, r.Attempts, r.MaxAttempts, id, attempt)
			}
			if attempt < 3 {
				completeFresh(t, b, retry(r.Ref(), 0, "again"))
				wantPendingNow(t, b, id, attempt)
				continue
			}
			// The runtime sends fail once attempts reach max attempts.
			completeFresh(t, b, fail(r.Ref(), "gave up"))
		}
		claimNone(t, b, "q")
		gone(t, b, id)
		if f := failedByJob(t, b, id); f.Attempts != 3 {
			t.Fatalf("failed row attempts %d, want 3", f.Attempts)
		}
	})

	parallel(t, h, "SecondOutcomeIsStale", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		completeFresh(t, b, done(r.Ref()))
		for _, o := range []backend.Outcome{done(r.Ref()), retry(r.Ref(), 0, "x"), fail(r.Ref(), "x")} {
			if res := complete(t, b, o); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
				t.Fatalf("%s after done: Stale = %v, want [%v]", o.Kind, res.Stale, r.Ref())
			}
		}
		gone(t, b, id)
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("a stale fail wrote %d failed rows", len(f))
		}
		wantNoStats(t, b)
	})

	// One batch of every kind, with a ref of another token and a ref
	// given twice: each fresh outcome applies once, in batch order, and
	// the others are stale.
	parallel(t, h, "RepeatInBatch", func(t *testing.T, b backend.Backend) {
		insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"))
		j1, j2, j3 := claimOne(t, b, "q"), claimOne(t, b, "q"), claimOne(t, b, "q")
		stale := j1.Ref()
		stale.Token++
		res := complete(t, b,
			done(j1.Ref()),
			retry(j2.Ref(), time.Hour, "later"),
			fail(j3.Ref(), "boom"),
			done(stale),
			fail(j1.Ref(), "repeat"),
		)
		got := slices.Clone(res.Stale)
		want := []backend.JobRef{stale, j1.Ref()}
		slices.SortFunc(got, func(a, b backend.JobRef) int { return cmp.Compare(a.Token, b.Token) })
		slices.SortFunc(want, func(a, b backend.JobRef) int { return cmp.Compare(a.Token, b.Token) })
		if !slices.Equal(got, want) || len(res.Cancelled) != 0 {
			t.Fatalf("JobComplete = %+v, want Stale %v (in any order)", res, want)
		}
		gone(t, b, j1.ID)
		if row := wantStatus(t, b, j2.ID, backend.StatePending, 1); row.LastError != "later" {
			t.Fatalf("retried job: last error %q, want later", row.LastError)
		}
		f := failedList(t, b, backend.FailedListParams{})
		if len(f) != 1 || f[0].JobID != j3.ID || f[0].Error != "boom" {
			t.Fatalf("FailedList = %+v, want job %d alone, with boom", f, j3.ID)
		}
	})
}
