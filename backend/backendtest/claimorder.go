package backendtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testClaimOrder: claims take due jobs by priority (higher first), then by
// the time each became due (its AvailableAt: the enqueue time of a job
// enqueued without delay, its RunAt or Delay, the due time of its retry,
// the time it was released or rescued; earlier first), then by ID. So a
// job that comes back (retried after its backoff, released, rescued) waits
// behind the jobs that were due before it, however old its ID, and a
// scheduled job behind the jobs that became due before its time.
func testClaimOrder(t *testing.T, h Harness) {
	// The due times here are set through RunAt, long past, but for two
	// jobs due at once (due in the order they were inserted), so the order
	// is fixed by the test alone: no wait, and no dependence on how fast
	// the inserts run. The jobs go in every way a backend may file them
	// apart (single inserts plain or not, a batch, a unique key).
	orderByRunAt := func(t *testing.T, b backend.Backend) (want []int64) {
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		at := func(prio int, runAt time.Time) backend.InsertParams {
			p := job("q", "t")
			p.Priority, p.RunAt = prio, runAt
			return p
		}
		a := insertOne(t, b, at(0, base))
		bb := insertOne(t, b, at(0, base.Add(-2*time.Hour)))
		c := insertOne(t, b, job("q", "t")) // due now
		d := insertOne(t, b, at(5, base))
		e := insertOne(t, b, at(5, base.Add(-time.Hour)))
		fg := insertIDs(t, b, at(0, base.Add(-2*time.Hour)), at(-1, base.Add(-4*time.Hour)))
		up := at(0, base.Add(-3*time.Hour))
		up.UniqueKey = "order-u"
		u := insertOne(t, b, up)
		hh := insertOne(t, b, job("q", "t")) // due now, after c
		// By ID alone (the order before due times counted) this would be
		// d e a bb c f u hh g.
		return []int64{e, d, u, bb, fg[0], a, c, hh, fg[1]}
	}
	parallel(t, h, "PriorityThenDueThenID", func(t *testing.T, b backend.Backend) {
		want := orderByRunAt(t, b)
		for i, id := range want {
			if got := claimOne(t, b, "q"); got.ID != id {
				t.Fatalf("claim %d: job %d (priority %d, due %s), want job %d %s", i, got.ID, got.Priority, stamp(got.AvailableAt), id, describe(t, b, id))
			}
		}
		claimNone(t, b, "q")
	})
	parallel(t, h, "MaxTakesTheEarliestDue", func(t *testing.T, b backend.Backend) {
		want := orderByRunAt(t, b)
		wantClaims(t, b, []string{"q"}, want[:2], want[2:5], want[5:6], want[6:])
	})

	// Issue 27: a retried job, due again at once, goes behind a job that
	// became due while it ran, and a released one the same; a job
	// enqueued after both comes after them.
	parallel(t, h, "ComeBackBehindEarlierDue", func(t *testing.T, b backend.Backend) {
		x1 := insertOne(t, b, job("q", "t"))
		x2 := insertOne(t, b, job("q", "t"))
		held := claim(t, b, 2, longLease, "q")
		if got := sortedIDs(held); !slices.Equal(got, []int64{x1, x2}) {
			t.Fatalf("claim got %v, want %v", got, []int64{x1, x2})
		}
		// The pauses make each step's time distinct on any clock a backend
		// keeps (microseconds, milliseconds).
		pause := func() { time.Sleep(3 * time.Millisecond) }
		pause()
		y := insertOne(t, b, job("q", "t"))
		pause()
		for _, r := range held {
			if r.ID == x2 {
				if n := release(t, b, r.Ref()); n != 1 {
					t.Fatalf("JobRelease = %d, want 1", n)
				}
			}
		}
		pause()
		for _, r := range held {
			if r.ID == x1 {
				completeFresh(t, b, retry(r.Ref(), 0, "again"))
			}
		}
		pause()
		z := insertOne(t, b, job("q", "t"))
		want := []int64{y, x2, x1, z} // by ID: x1 x2 y z
		wantDueInOrder(t, b, want)
		wantClaims(t, b, []string{"q"}, want[:1], want[1:2], want[2:3], want[3:])
	})

	// A retry whose backoff has elapsed ranks by the time its backoff
	// ended, not by its ID: a job due just before it comes first, and so
	// does one enqueued (due at once) while it waited.
	parallel(t, h, "BackoffElapsedBehindEarlierDue", func(t *testing.T, b backend.Backend) {
		const delay = 150 * time.Millisecond
		x := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		completeFresh(t, b, retry(r.Ref(), delay, "later"))
		xDue := get(t, b, x).AvailableAt
		early := job("q", "t")
		early.RunAt = xDue.Add(-5 * time.Millisecond)
		y := insertOne(t, b, early)
		z := insertOne(t, b, job("q", "t"))
		eventually(t, delay+waitLimit, "the retry to be due", func() bool {
			return statsOf(t, b, "q").Pending == 3
		})
		// y is due before x by construction; z, enqueued at once, is due
		// before both unless the machine stalled for the whole delay.
		wantDueInOrder(t, b, []int64{y, x})
		want := claimOrderOf(t, b, x, y, z) // z y x; by ID: x y z
		wantClaims(t, b, []string{"q"}, want[:1], want[1:2], want[2:])
	})

	// A job rescued from an expired lease is due from the sweep on.
	parallel(t, h, "RescuedBehindEarlierDue", func(t *testing.T, b backend.Backend) {
		x := insertOne(t, b, job("q", "t"))
		if r := claim(t, b, 1, shortLease, "q"); len(r) != 1 || r[0].ID != x {
			t.Fatalf("claim got %v, want job %d", ids(r), x)
		}
		y := insertOne(t, b, job("q", "t"))
		time.Sleep(shortLease)
		sweepUntil(t, b, 1, 0)
		time.Sleep(3 * time.Millisecond)
		z := insertOne(t, b, job("q", "t"))
		want := []int64{y, x, z} // by ID: x y z
		wantDueInOrder(t, b, want)
		wantClaims(t, b, []string{"q"}, want[:1], want[1:2], want[2:])
	})

	// A scheduled job that became due after a newer job enqueued without
	// delay is claimed after it, and priority still comes first.
	parallel(t, h, "ScheduledBehindNewerImmediate", func(t *testing.T, b backend.Backend) {
		const delay = 300 * time.Millisecond
		s := job("q", "t")
		s.Delay = delay
		sid := insertOne(t, b, s)
		n := insertOne(t, b, job("q", "t"))
		eventually(t, delay+waitLimit, "the scheduled job to be due", func() bool {
			return statsOf(t, b, "q").Pending == 2
		})
		hp := job("q", "t")
		hp.Priority = 1
		hid := insertOne(t, b, hp)
		// n is enqueued well within the delay, so it is due first: hid n
		// sid; by ID: sid n hid. (A machine that stalls for the whole delay
		// between two inserts makes n due after s: the order follows
		// what the backend stored.)
		want := claimOrderOf(t, b, sid, n, hid)
		wantClaims(t, b, []string{"q"}, want[:1], want[1:2], want[2:])
	})

	// Across queues the same: a claim naming several takes the earliest
	// due first, whichever queue holds it.
	parallel(t, h, "DueAcrossQueues", func(t *testing.T, b backend.Backend) {
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		at := func(queue string, runAt time.Time) backend.InsertParams {
			p := job(queue, "t")
			p.RunAt = runAt
			return p
		}
		a1 := insertOne(t, b, at("a", base))
		b1 := insertOne(t, b, at("b", base.Add(-time.Hour)))
		b2 := insertOne(t, b, job("b", "t")) // due now
		a2 := insertOne(t, b, at("a", base.Add(-2*time.Hour)))
		a3 := insertOne(t, b, job("a", "t")) // due now, after b2
		// By ID: a1 b1 b2 a2 a3.
		wantClaims(t, b, []string{"a", "b"}, []int64{a2}, []int64{b1, a1}, []int64{b2}, []int64{a3})
	})
}

// wantClaims claims from queues once per element of batches, with Max its
// length, and asserts that each claim took exactly those jobs (in any
// order); then that nothing is left.
func wantClaims(t *testing.T, b backend.Backend, queues []string, batches ...[]int64) {
	t.Helper()
	for i, want := range batches {
		rows := claim(t, b, len(want), longLease, queues...)
		want = slices.Sorted(slices.Values(want))
		if got := sortedIDs(rows); !slices.Equal(got, want) {
			var ds []string
			for _, id := range want {
				ds = append(ds, fmt.Sprintf("%d %s", id, describe(t, b, id)))
			}
			t.Fatalf("claim %d (Max %d) of %v got %v, want %v: %v", i, len(want), queues, got, want, ds)
		}
	}
	claimNone(t, b, queues...)
}

// wantDueInOrder asserts that the live jobs ids are due in that order,
// each strictly after the one before, as the backend stored them: the
// premise of a test of the claim order that made them due by the steps it
// took.
func wantDueInOrder(t *testing.T, b backend.Backend, ids []int64) {
	t.Helper()
	rows := make([]*backend.JobRow, len(ids))
	for i, id := range ids {
		rows[i] = get(t, b, id)
		if i > 0 && !rows[i].AvailableAt.After(rows[i-1].AvailableAt) {
			t.Fatalf("job %d is due at %s, not after job %d at %s: the test made it due later", id, stamp(rows[i].AvailableAt), rows[i-1].ID, stamp(rows[i-1].AvailableAt))
		}
	}
}

// claimOrderOf returns the live jobs ids in claim order by what the
// backend stored: priority (higher first), then AvailableAt, then ID. It
// logs when that is the order of their IDs alone, where a test would not
// tell due times apart from IDs.
func claimOrderOf(t *testing.T, b backend.Backend, ids ...int64) []int64 {
	t.Helper()
	rows := make([]*backend.JobRow, len(ids))
	for i, id := range ids {
		rows[i] = get(t, b, id)
	}
	backend.SortClaimOrder(rows)
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	if slices.IsSorted(out) {
		t.Logf("jobs %v are due in the order of their IDs (a slow machine): this run does not tell due times from IDs", out)
	}
	return out
}

// describe names a job's priority and due time, for failure messages.
func describe(t *testing.T, b backend.Backend, id int64) string {
	t.Helper()
	r, err := b.JobGet(t.Context(), id)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return fmt.Sprintf("(priority %d, due %s, %s)", r.Priority, stamp(r.AvailableAt), r.Status)
}

// stamp formats a due time for failure messages.
func stamp(at time.Time) string { return at.UTC().Format("15:04:05.000000") }
