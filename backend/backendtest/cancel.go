package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testCancel: backend.Canceller. Pending and scheduled jobs end cancelled at
// once (kept as finished, unique key freed); a reserved job becomes
// cancelling, its holder's heartbeat is refused, and whatever its holder
// reports (or its lease running out) ends it cancelled, never retried nor
// failed; a second cancel, or one of a finished or unknown job, says so and
// changes nothing. Backends without the capability skip it.
func testCancel(t *testing.T, h Harness) {
	parallel(t, h, "Pending", func(t *testing.T, b backend.Backend) {
		c, r := canceller(t, b)
		p := job("c", "t")
		p.UniqueKey = "u1"
		id := insertOne(t, b, p)
		wantCancel(t, c, []int64{id}, backend.CancelCancelled)
		gone(t, b, id)
		claimNone(t, b, "c")
		wantNoStats(t, b)
		f := wantFinished(t, r, backend.StateCancelled, id)
		if f.Attempts != 0 || f.Queue != "c" || f.Type != "t" || !jsonEqual(f.Payload, p.Payload) || f.UniqueKey != "u1" {
			t.Fatalf("cancelled job = %+v, want the inserted job with 0 attempts", f)
		}
		near(t, "FinishedAt", f.FinishedAt, time.Now(), skew)
		// The unique key is free again.
		insertOne(t, b, p)
	})

	// Pending jobs among others, inserted alone and in a batch: each
	// cancelled one leaves, the others stay and are claimed in order.
	parallel(t, h, "PendingAmongOthers", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		var all []int64
		for range 4 {
			all = append(all, insertOne(t, b, job("c", "t")))
		}
		all = append(all, insertIDs(t, b, job("c", "t"), job("c", "t"))...)
		all = append(all, insertOne(t, b, job("c", "t")))
		cancel := []int64{all[0], all[2], all[3], all[5], all[6]}
		wantCancel(t, c, cancel, backend.CancelCancelled, backend.CancelCancelled,
			backend.CancelCancelled, backend.CancelCancelled, backend.CancelCancelled)
		for _, id := range cancel {
			gone(t, b, id)
		}
		wantStats(t, b, backend.QueueStats{Queue: "c", Pending: 2})
		for _, want := range []int64{all[1], all[4]} {
			if r := claimOne(t, b, "c"); r.ID != want {
				t.Fatalf("claimed job %d, want %d", r.ID, want)
			}
		}
		claimNone(t, b, "c")
	})

	parallel(t, h, "Scheduled", func(t *testing.T, b backend.Backend) {
		c, r := canceller(t, b)
		p := job("c", "t")
		p.Delay = time.Hour
		id := insertOne(t, b, p)
		keep := insertOne(t, b, p)
		wantCancel(t, c, []int64{id}, backend.CancelCancelled)
		gone(t, b, id)
		wantStats(t, b, backend.QueueStats{Queue: "c", Scheduled: 1})
		wantFinished(t, r, backend.StateCancelled, id)
		wantStatus(t, b, keep, backend.StatePending, 0)
	})

	// A reserved job: the holder learns, and every way its attempt can end
	// ends the job cancelled.
	ends := []struct {
		name string
		end  func(t *testing.T, b backend.Backend, ref backend.JobRef)
	}{
		{"Done", func(t *testing.T, b backend.Backend, ref backend.JobRef) { wantCancelledOutcome(t, b, done(ref)) }},
		{"DoneKeep", func(t *testing.T, b backend.Backend, ref backend.JobRef) {
			o := done(ref)
			o.Keep = true
			wantCancelledOutcome(t, b, o)
		}},
		{"Retry", func(t *testing.T, b backend.Backend, ref backend.JobRef) {
			wantCancelledOutcome(t, b, retry(ref, 0, "stopped"))
		}},
		{"Fail", func(t *testing.T, b backend.Backend, ref backend.JobRef) {
			wantCancelledOutcome(t, b, fail(ref, "stopped"))
		}},
		{"Defer", func(t *testing.T, b backend.Backend, ref backend.JobRef) {
			wantCancelledOutcome(t, b, deferred(ref, 0))
		}},
		{"Release", func(t *testing.T, b backend.Backend, ref backend.JobRef) {
			if res := releaseRes(t, b, ref); !slices.Equal(res.Cancelled, []backend.JobRef{ref}) || len(res.Stale) != 0 {
				t.Fatalf("JobRelease of a cancelling attempt = %+v; want Cancelled [%v]", res, ref)
			}
		}},
	}
	for _, e := range ends {
		parallel(t, h, "Reserved"+e.name, func(t *testing.T, b backend.Backend) {
			c, r := canceller(t, b)
			id := insertOne(t, b, job("c", "t"))
			other := insertOne(t, b, job("c", "t"))
			held := claim(t, b, 2, longLease, "c")
			if len(held) != 2 {
				t.Fatalf("claimed %d jobs, want 2", len(held))
			}
			refOf := map[int64]backend.JobRef{held[0].ID: held[0].Ref(), held[1].ID: held[1].Ref()}
			ref, otherRef := refOf[id], refOf[other]
			res := wantCancel(t, c, []int64{id}, backend.CancelRequested)
			if res[0].Attempt != 1 {
				t.Fatalf("CancelRequested attempt = %d, want 1", res[0].Attempt)
			}
			wantStatus(t, b, id, backend.StateCancelling, 1)
			wantStats(t, b, backend.QueueStats{Queue: "c", Reserved: 2})
			if refs := cancelling(t, c); !slices.Equal(refs, []backend.JobRef{ref}) {
				t.Fatalf("JobCancelling = %v, want [%v]", refs, ref)
			}
			lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{ref, otherRef}, Lease: longLease})
			if err != nil || !slices.Equal(lost, []backend.JobRef{ref}) {
				t.Fatalf("JobExtendLease = %v, %v; want only the cancelled job lost", lost, err)
			}
			e.end(t, b, ref)
			gone(t, b, id)
			if refs := cancelling(t, c); len(refs) != 0 {
				t.Fatalf("JobCancelling after the end = %v, want none", refs)
			}
			f := wantFinished(t, r, backend.StateCancelled, id)
			if f.Attempts != 1 {
				t.Fatalf("cancelled job attempts = %d, want 1", f.Attempts)
			}
			if n := len(failedList(t, b, backend.FailedListParams{})); n != 0 {
				t.Fatalf("failed jobs = %d, want none: a cancelled job never fails", n)
			}
			if fs := finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}); len(fs) != 0 {
				t.Fatalf("completed jobs = %d, want none", len(fs))
			}
			claimNone(t, b, "c")
			wantStats(t, b, backend.QueueStats{Queue: "c", Reserved: 1})
			// The other held job is untouched.
			completeFresh(t, b, done(otherRef))
		})
	}

	parallel(t, h, "ReservedLeaseRunsOut", func(t *testing.T, b backend.Backend) {
		c, r := canceller(t, b)
		id := insertOne(t, b, job("c", "t"))
		held := claim(t, b, 1, shortLease, "c")
		if len(held) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(held))
		}
		wantCancel(t, c, []int64{id}, backend.CancelRequested)
		var res backend.SweepResult
		eventually(t, waitLimit, "the sweep to end the cancelled job", func() bool {
			var err error
			if res, err = b.LeaseSweep(t.Context(), backend.SweepParams{}); err != nil {
				t.Fatalf("LeaseSweep: %v", err)
			}
			return res.Cancelled > 0
		})
		if res.Cancelled != 1 || res.Rescued != 0 || res.Failed != 0 || len(res.Jobs) != 0 {
			t.Fatalf("LeaseSweep = %+v, want 1 cancelled and nothing else", res)
		}
		gone(t, b, id)
		claimNone(t, b, "c")
		wantFinished(t, r, backend.StateCancelled, id)
		// The holder's late outcome is stale now.
		if res := complete(t, b, retry(held[0].Ref(), 0, "late")); len(res.Stale) != 1 {
			t.Fatalf("late outcome = %+v, want stale", res)
		}
	})

	parallel(t, h, "Twice", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		pending := insertOne(t, b, job("c", "t"))
		running := insertOne(t, b, job("r", "t"))
		held := claimOne(t, b, "r")
		wantCancel(t, c, []int64{pending, running}, backend.CancelCancelled, backend.CancelRequested)
		wantCancel(t, c, []int64{pending, running}, backend.CancelAlready, backend.CancelAlready)
		// Ending the cancelled attempt keeps it cancelled.
		wantCancelledOutcome(t, b, done(held.Ref()))
		wantCancel(t, c, []int64{running}, backend.CancelAlready)
	})

	parallel(t, h, "FinishedAndUnknown", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		dropped := insertOne(t, b, job("c", "t"))
		completeFresh(t, b, done(claimOne(t, b, "c").Ref()))
		kept := insertOne(t, b, job("c", "t"))
		o := done(claimOne(t, b, "c").Ref())
		o.Keep = true
		completeFresh(t, b, o)
		failed := makeFailed(t, b, job("c", "t"))[0].JobID
		live := insertOne(t, b, job("c", "t"))
		wantCancel(t, c, []int64{dropped, kept, failed, 1 << 40, live},
			backend.CancelNotFound, backend.CancelCompleted, backend.CancelFailed, backend.CancelNotFound, backend.CancelCancelled)
		if n := len(failedList(t, b, backend.FailedListParams{})); n != 1 {
			t.Fatalf("failed jobs = %d, want the one failed job untouched", n)
		}
	})

	parallel(t, h, "BadInput", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		_, err := c.JobCancel(t.Context(), nil)
		wantInvalid(t, err, "job IDs")
		_, err = c.JobCancel(t.Context(), []int64{0})
		wantInvalid(t, err, "job ID")
	})
}

// canceller returns b's Canceller and Retainer or skips the test.
func canceller(t *testing.T, b backend.Backend) (backend.Canceller, backend.Retainer) {
	t.Helper()
	c, ok := b.(backend.Canceller)
	if !ok {
		t.Skip("backend does not implement backend.Canceller")
	}
	r, ok := b.(backend.Retainer)
	if !ok {
		t.Fatal("backend implements backend.Canceller but not backend.Retainer, where cancelled jobs are listed")
	}
	return c, r
}

// wantCancel cancels ids and asserts each result's outcome.
func wantCancel(t *testing.T, c backend.Canceller, ids []int64, want ...backend.CancelOutcome) []backend.CancelResult {
	t.Helper()
	res, err := c.JobCancel(t.Context(), ids)
	if err != nil {
		t.Fatalf("JobCancel(%v): %v", ids, err)
	}
	if len(res) != len(ids) {
		t.Fatalf("JobCancel(%v) returned %d results", ids, len(res))
	}
	for i, r := range res {
		if r.ID != ids[i] || r.Outcome != want[i] {
			t.Fatalf("JobCancel(%v)[%d] = %+v (%s), want ID %d %s", ids, i, r, r.Outcome, ids[i], want[i])
		}
	}
	return res
}

// cancelling returns JobCancelling.
func cancelling(t *testing.T, c backend.Canceller) []backend.JobRef {
	t.Helper()
	refs, err := c.JobCancelling(t.Context())
	if err != nil {
		t.Fatalf("JobCancelling: %v", err)
	}
	return refs
}

// wantCancelledOutcome applies o and asserts it ended its job cancelled.
func wantCancelledOutcome(t *testing.T, b backend.Backend, o backend.Outcome) {
	t.Helper()
	res := complete(t, b, o)
	if len(res.Stale) != 0 || !slices.Equal(res.Cancelled, []backend.JobRef{o.Ref}) {
		t.Fatalf("JobComplete(%s of a cancelled job) = %+v, want it in Cancelled only", o.Kind, res)
	}
}

// finishedList lists finished jobs.
func finishedList(t *testing.T, r backend.Retainer, p backend.FinishedListParams) []*backend.FinishedJob {
	t.Helper()
	rows, err := r.FinishedList(t.Context(), p)
	if err != nil {
		t.Fatalf("FinishedList(%+v): %v", p, err)
	}
	return rows
}

// wantFinished asserts job id is kept in state, exactly once.
func wantFinished(t *testing.T, r backend.Retainer, state backend.JobState, id int64) *backend.FinishedJob {
	t.Helper()
	var found *backend.FinishedJob
	for _, f := range finishedList(t, r, backend.FinishedListParams{State: state, Limit: 1000, Results: true}) {
		if f.ID == id {
			if found != nil {
				t.Fatalf("job %d is listed twice as %s", id, state)
			}
			found = f
		}
	}
	if found == nil {
		t.Fatalf("job %d is not listed as %s", id, state)
	}
	if found.State != state {
		t.Fatalf("job %d state = %q, want %q", id, found.State, state)
	}
	return found
}
