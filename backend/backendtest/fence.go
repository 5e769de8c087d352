package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testFence: every write by a holder is fenced by (ID, Attempt), so a holder
// whose job was rescued and re-claimed, finished or retried changes nothing.
func testFence(t *testing.T, h Harness) {
	parallel(t, h, "OldHolderAfterRescue", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		first := claim(t, b, 1, shortLease, "q")
		if len(first) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(first))
		}
		old := first[0].Ref()
		sweepUntil(t, b, 1, 0)
		cur := claimOne(t, b, "q")
		if cur.ID != id || cur.Attempts != 2 {
			t.Fatalf("re-claim: job %d attempts %d, want job %d attempts 2", cur.ID, cur.Attempts, id)
		}

		for _, o := range []backend.Outcome{done(old), retry(old, 0, "old"), retry(old, time.Hour, "old"), fail(old, "old")} {
			if res := complete(t, b, o); !slices.Equal(res.Stale, []backend.JobRef{old}) {
				t.Fatalf("%s with the old ref: Stale = %v, want [%v]", o.Kind, res.Stale, old)
			}
		}
		lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{old}, Lease: 2 * longLease})
		if err != nil {
			t.Fatalf("JobExtendLease: %v", err)
		}
		if !slices.Equal(lost, []backend.JobRef{old}) {
			t.Fatalf("JobExtendLease(old) lost = %v, want [%v]", lost, old)
		}
		if res := releaseRes(t, b, old); !slices.Equal(res.Stale, []backend.JobRef{old}) {
			t.Fatalf("JobRelease(old) = %+v; want Stale [%v]", res, old)
		}

		row := wantStatus(t, b, id, backend.StatusReserved, 2)
		near(t, "LeaseUntil (untouched by the old holder)", row.LeaseUntil, cur.LeaseUntil, 5*time.Millisecond)
		if row.LastError == "old" {
			t.Errorf("LastError %q was written by the old holder", row.LastError)
		}
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("the old holder's fail wrote %d failed rows", len(f))
		}
		completeFresh(t, b, done(cur.Ref()))
		gone(t, b, id)
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
		row := wantStatus(t, b, id, backend.StatusPending, 1)
		if row.LastError != "later" {
			t.Errorf("LastError = %q, want %q", row.LastError, "later")
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "UnknownJob", func(t *testing.T, b backend.Backend) {
		ref := backend.JobRef{ID: 424242, Attempt: 1}
		if res := complete(t, b, done(ref)); !slices.Equal(res.Stale, []backend.JobRef{ref}) {
			t.Fatalf("done of an unknown job: Stale = %v", res.Stale)
		}
	})
}
