package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// refusedAll sends every write a holder can make with the stale ref old
// (each outcome kind, an extension and a release) and checks that each is
// refused as stale, then that the job's current claim cur is untouched: still
// reserved under its own token, with its lease, attempts, releases and last
// error as they were, and nothing written to failed jobs.
func refusedAll(t *testing.T, b backend.Backend, old backend.JobRef, cur *backend.JobRow) {
	t.Helper()
	for _, o := range []backend.Outcome{done(old), retry(old, 0, "old"), retry(old, time.Hour, "old"), fail(old, "old")} {
		if res := complete(t, b, o); !slices.Equal(res.Stale, []backend.JobRef{old}) || len(res.Cancelled) != 0 {
			t.Fatalf("%s with the stale ref %+v = %+v, want it stale", o.Kind, old, res)
		}
	}
	lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{old}, Lease: 2 * longLease})
	if err != nil || !slices.Equal(lost, []backend.JobRef{old}) {
		t.Fatalf("JobExtendLease(%+v) = %v, %v; want it lost", old, lost, err)
	}
	if res := releaseRes(t, b, old); !slices.Equal(res.Stale, []backend.JobRef{old}) || len(res.Cancelled) != 0 {
		t.Fatalf("JobRelease(%+v) = %+v; want it stale", old, res)
	}
	row := wantStatus(t, b, cur.ID, backend.StateReserved, cur.Attempts)
	if row.Token != cur.Token {
		t.Fatalf("job %d: Token %d after the stale writes, want the current claim's %d", cur.ID, row.Token, cur.Token)
	}
	near(t, "LeaseUntil (untouched by the stale holder)", row.LeaseUntil, cur.LeaseUntil, 5*time.Millisecond)
	if row.Releases != cur.Releases || row.LastError != cur.LastError {
		t.Fatalf("job %d: releases %d last error %q after the stale writes, want %d and %q",
			cur.ID, row.Releases, row.LastError, cur.Releases, cur.LastError)
	}
	if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
		t.Fatalf("the stale holder's writes left %d failed rows", len(f))
	}
}

// reclaim claims job id again and checks the new claim's token is above
// every earlier one's.
func reclaim(t *testing.T, b backend.Backend, queue string, id int64, earlier ...backend.JobRef) *backend.JobRow {
	t.Helper()
	cur := claimOne(t, b, queue)
	if cur.ID != id {
		t.Fatalf("re-claim got job %d, want %d", cur.ID, id)
	}
	for _, e := range earlier {
		if cur.Token <= e.Token {
			t.Fatalf("job %d: claim token %d is not above the earlier claim's %d", id, cur.Token, e.Token)
		}
	}
	if g := get(t, b, id); g.Token != cur.Token {
		t.Fatalf("JobGet(%d).Token = %d, want the claim's %d", id, g.Token, cur.Token)
	}
	return cur
}

// rescuedClaim inserts a job into queue, claims it with a lease that
// expires, has the sweep rescue it and claims it again: old is the first
// claim (a stale holder's), cur the second.
func rescuedClaim(t *testing.T, b backend.Backend, queue string) (id int64, old backend.JobRef, cur *backend.JobRow) {
	t.Helper()
	id = insertOne(t, b, job(queue, "t"))
	first := claim(t, b, 1, shortLease, queue)
	if len(first) != 1 {
		t.Fatalf("claim got %d jobs, want 1", len(first))
	}
	old = first[0].Ref()
	sweepUntil(t, b, 1, 0)
	return id, old, reclaim(t, b, queue, id, old)
}

// testFence: every write by a holder is fenced by the claim's token, so a
// holder whose job was given back, rescued, failed and replayed, or
// finished changes nothing, even when the job's next claim counts the same
// attempt (a free release un-counts it).
func testFence(t *testing.T, h Harness) {
	parallel(t, h, "OldHolderAfterRescue", func(t *testing.T, b backend.Backend) {
		id, old, cur := rescuedClaim(t, b, "q")
		if cur.Attempts != 2 {
			t.Fatalf("re-claim: attempts %d, want 2", cur.Attempts)
		}
		refusedAll(t, b, old, cur)
		completeFresh(t, b, done(cur.Ref()))
		gone(t, b, id)
	})

	// A free release un-counts the attempt, so the next claim counts the
	// same attempt as the released one: only the token tells them apart.
	parallel(t, h, "OldHolderAfterRelease", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		old := claimOne(t, b, "q").Ref()
		if n := release(t, b, old); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		cur := reclaim(t, b, "q", id, old)
		if cur.Attempts != old.Attempt {
			t.Fatalf("re-claim after a free release: attempt %d, want %d again", cur.Attempts, old.Attempt)
		}
		refusedAll(t, b, old, cur)
		if cur.Releases != 1 {
			t.Fatalf("releases %d, want 1: the stale release must not spend another", cur.Releases)
		}
		completeFresh(t, b, done(cur.Ref()))
		gone(t, b, id)
	})

	// Released, re-claimed, its lease ran out and the sweep rescued it,
	// claimed again: both earlier holders are stale.
	parallel(t, h, "OldHoldersAfterReleaseAndRescue", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		first := claimOne(t, b, "q").Ref()
		if n := release(t, b, first); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		rows := claim(t, b, 1, shortLease, "q")
		if len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("second claim got %v, want [%d]", ids(rows), id)
		}
		second := rows[0].Ref()
		sweepUntil(t, b, 1, 0)
		cur := reclaim(t, b, "q", id, first, second)
		refusedAll(t, b, first, cur)
		refusedAll(t, b, second, cur)
		completeFresh(t, b, done(cur.Ref()))
		gone(t, b, id)
	})

	// A job that failed (by its holder, or by the sweep with its attempts
	// spent) and was replayed starts its attempts again, but never its
	// tokens: the holder from before the failure stays stale.
	for _, how := range []string{"Failed", "SweptToFailed"} {
		parallel(t, h, "OldHolderAfterReplay"+how, func(t *testing.T, b backend.Backend) {
			p := job("q", "t")
			p.MaxAttempts = 1
			id := insertOne(t, b, p)
			lease := longLease
			if how == "SweptToFailed" {
				lease = shortLease
			}
			rows := claim(t, b, 1, lease, "q")
			if len(rows) != 1 {
				t.Fatalf("claim got %d jobs, want 1", len(rows))
			}
			old := rows[0].Ref()
			if how == "SweptToFailed" {
				sweepUntil(t, b, 0, 1)
			} else {
				completeFresh(t, b, fail(old, "boom"))
			}
			f := failedByJob(t, b, id)
			res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{f.JobID}})
			if err != nil || res.Replayed != 1 {
				t.Fatalf("FailedReplay = %+v, %v; want 1 replayed", res, err)
			}
			cur := reclaim(t, b, "q", id, old)
			if cur.Attempts != old.Attempt {
				t.Fatalf("claim after replay: attempt %d, want %d again", cur.Attempts, old.Attempt)
			}
			refusedAll(t, b, old, cur)
			completeFresh(t, b, done(cur.Ref()))
			gone(t, b, id)
		})
	}

	// A write sent twice (a retry of a call whose reply was lost) applies
	// once: the first ended the claim, so the second is stale.
	parallel(t, h, "Resent", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"), job("q", "t"))
		rows := claim(t, b, 4, longLease, "q")
		if len(rows) != 4 {
			t.Fatalf("claim got %d jobs, want 4", len(rows))
		}
		refOf := map[int64]backend.JobRef{}
		for _, r := range rows {
			refOf[r.ID] = r.Ref()
		}
		outs := []backend.Outcome{done(refOf[ids[0]]), retry(refOf[ids[1]], time.Hour, "again"), fail(refOf[ids[2]], "broken")}
		completeFresh(t, b, outs...)
		res := complete(t, b, outs...)
		if len(res.Stale) != 3 || len(res.Cancelled) != 0 {
			t.Fatalf("the same outcomes again = %+v, want all 3 stale", res)
		}
		gone(t, b, ids[0])
		if row := wantStatus(t, b, ids[1], backend.StatePending, 1); row.LastError != "again" {
			t.Fatalf("retried job: last error %q, want %q", row.LastError, "again")
		}
		if n := len(failedList(t, b, backend.FailedListParams{})); n != 1 {
			t.Fatalf("failed jobs = %d after the fail was sent twice, want 1", n)
		}
		rel := refOf[ids[3]]
		if n := release(t, b, rel); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		if res := releaseRes(t, b, rel); !slices.Equal(res.Stale, []backend.JobRef{rel}) {
			t.Fatalf("the same release again = %+v, want it stale", res)
		}
		if row := wantPendingNow(t, b, ids[3], 0); row.Releases != 1 {
			t.Fatalf("releases %d after a release sent twice, want 1", row.Releases)
		}
	})

	// A cancel of the current claim does not make an earlier holder's
	// writes end the job: they are stale, not cancelled.
	parallel(t, h, "OldHolderOfCancellingJob", func(t *testing.T, b backend.Backend) {
		c, ok := backend.As[backend.Canceller](b)
		if !ok {
			t.Skip("the backend cannot cancel jobs")
		}
		id := insertOne(t, b, job("q", "t"))
		old := claimOne(t, b, "q").Ref()
		if n := release(t, b, old); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		cur := reclaim(t, b, "q", id, old)
		wantCancel(t, c, []int64{id}, backend.CancelRequested)
		if refs := cancelling(t, c); !slices.Equal(refs, []backend.JobRef{cur.Ref()}) {
			t.Fatalf("JobCancelling = %v, want the current claim [%v]", refs, cur.Ref())
		}
		for _, o := range []backend.Outcome{done(old), retry(old, 0, "old"), fail(old, "old")} {
			if res := complete(t, b, o); !slices.Equal(res.Stale, []backend.JobRef{old}) || len(res.Cancelled) != 0 {
				t.Fatalf("%s with the stale ref of a cancelling job = %+v, want it stale", o.Kind, res)
			}
		}
		if res := releaseRes(t, b, old); !slices.Equal(res.Stale, []backend.JobRef{old}) || len(res.Cancelled) != 0 {
			t.Fatalf("JobRelease with the stale ref of a cancelling job = %+v, want it stale", res)
		}
		wantStatus(t, b, id, backend.StateCancelling, cur.Attempts)
		wantCancelledOutcome(t, b, done(cur.Ref()))
	})

	parallel(t, h, "DeletedJob", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		completeFresh(t, b, done(r.Ref()))
		if res := complete(t, b, retry(r.Ref(), 0, "x")); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
			t.Fatalf("retry of a deleted job: Stale = %v", res.Stale)
		}
		lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{r.Ref()}, Lease: time.Minute})
		if err != nil || !slices.Equal(lost, []backend.JobRef{r.Ref()}) {
			t.Fatalf("JobExtendLease of a deleted job = %v, %v; want [%v]", lost, err, r.Ref())
		}
		if res := releaseRes(t, b, r.Ref()); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
			t.Fatalf("JobRelease of a deleted job = %+v; want Stale [%v]", res, r.Ref())
		}
		gone(t, b, id)
		wantNoStats(t, b)
	})

	parallel(t, h, "PendingAfterRetry", func(t *testing.T, b backend.Backend) {
		// The job is pending with the same attempts as the old ref: the fence
		// must check the status too, not only the attempt.
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		completeFresh(t, b, retry(r.Ref(), time.Hour, "later"))
		for _, o := range []backend.Outcome{done(r.Ref()), fail(r.Ref(), "x"), retry(r.Ref(), 0, "x")} {
			if res := complete(t, b, o); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
				t.Fatalf("%s of a pending job: Stale = %v, want [%v]", o.Kind, res.Stale, r.Ref())
			}
		}
		lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{r.Ref()}, Lease: time.Minute})
		if err != nil || !slices.Equal(lost, []backend.JobRef{r.Ref()}) {
			t.Fatalf("JobExtendLease of a pending job = %v, %v; want [%v]", lost, err, r.Ref())
		}
		if res := releaseRes(t, b, r.Ref()); !slices.Equal(res.Stale, []backend.JobRef{r.Ref()}) {
			t.Fatalf("JobRelease of a pending job = %+v; want Stale [%v]", res, r.Ref())
		}
		row := wantStatus(t, b, id, backend.StatePending, 1)
		if row.LastError != "later" {
			t.Errorf("LastError = %q, want %q", row.LastError, "later")
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "UnknownJob", func(t *testing.T, b backend.Backend) {
		ref := backend.JobRef{ID: 424242, Attempt: 1, Token: 1}
		if res := complete(t, b, done(ref)); !slices.Equal(res.Stale, []backend.JobRef{ref}) {
			t.Fatalf("done of an unknown job: Stale = %v", res.Stale)
		}
	})
}
