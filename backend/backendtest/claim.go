package backendtest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testClaim: JobClaim hands each due job to one caller, best first, and only
// from the named queues.
func testClaim(t *testing.T, h Harness) {
	parallel(t, h, "ExclusiveUnderConcurrency", func(t *testing.T, b backend.Backend) {
		const jobs, workers, batch = 500, 8, 7
		ps := make([]backend.InsertParams, jobs)
		for i := range ps {
			ps[i] = job("q", "t")
		}
		want := insertIDs(t, b, ps...)

		var mu sync.Mutex
		seen := make(map[int64]int, jobs)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: batch, Lease: longLease})
					if err != nil {
						t.Errorf("JobClaim: %v", err)
						return
					}
					if len(rows) > batch {
						t.Errorf("JobClaim returned %d rows, Max is %d", len(rows), batch)
					}
					if len(rows) == 0 {
						return
					}
					mu.Lock()
					for _, r := range rows {
						seen[r.ID]++
						if r.Attempts != 1 || r.Status != backend.StateReserved {
							t.Errorf("claimed job %d: attempts %d status %q, want 1 reserved", r.ID, r.Attempts, r.Status)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, id := range want {
			if seen[id] != 1 {
				t.Errorf("job %d claimed %d times, want exactly once", id, seen[id])
			}
		}
		if len(seen) != jobs {
			t.Errorf("claimed %d distinct jobs, want %d", len(seen), jobs)
		}
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: jobs})
	})

	// Jobs inserted in one call share their due time, so claim order
	// among them is priority, then ID (ClaimOrder tests due times).
	parallel(t, h, "PriorityThenID", func(t *testing.T, b backend.Backend) {
		prios := []int{0, 5, -3, 5, 10, 0, backend.MinPriority, backend.MaxPriority}
		ps := make([]backend.InsertParams, len(prios))
		for i, p := range prios {
			ps[i] = job("q", "t")
			ps[i].Priority = p
		}
		ids := insertIDs(t, b, ps...)
		type jp struct {
			id   int64
			prio int
		}
		order := make([]jp, len(ids))
		for i := range ids {
			order[i] = jp{ids[i], prios[i]}
		}
		slices.SortFunc(order, func(x, y jp) int {
			if c := cmp.Compare(y.prio, x.prio); c != 0 {
				return c
			}
			return cmp.Compare(x.id, y.id)
		})
		for i, w := range order {
			got := claimOne(t, b, "q")
			if got.ID != w.id || got.Priority != w.prio {
				t.Fatalf("claim %d: job %d (priority %d), want job %d (priority %d)", i, got.ID, got.Priority, w.id, w.prio)
			}
		}
		claimNone(t, b, "q")
	})

	parallel(t, h, "MaxTakesTheBest", func(t *testing.T, b backend.Backend) {
		prios := []int{1, 9, 3, 9, 2}
		ps := make([]backend.InsertParams, len(prios))
		for i, p := range prios {
			ps[i] = job("q", "t")
			ps[i].Priority = p
		}
		ids := insertIDs(t, b, ps...)
		first := claim(t, b, 3, longLease, "q")
		want := []int64{ids[1], ids[2], ids[3]} // priorities 9, 3, 9
		if got := sortedIDs(first); !slices.Equal(got, want) {
			t.Fatalf("claim Max 3 got %v, want %v", got, want)
		}
		rest := claim(t, b, 10, longLease, "q")
		if got := sortedIDs(rest); !slices.Equal(got, []int64{ids[0], ids[4]}) {
			t.Fatalf("second claim got %v, want %v", got, []int64{ids[0], ids[4]})
		}
	})

	parallel(t, h, "OnlyNamedQueues", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, job("a", "t"), job("b", "t"), job("c", "t"), job("a", "t"), job("b", "t"), job("c", "t"))
		rows := claim(t, b, 10, longLease, "a", "c")
		want := []int64{ids[0], ids[2], ids[3], ids[5]}
		if got := sortedIDs(rows); !slices.Equal(got, want) {
			t.Fatalf("claim [a c] got %v, want %v", got, want)
		}
		for _, r := range rows {
			if r.Queue != "a" && r.Queue != "c" {
				t.Errorf("claimed job %d from queue %q", r.ID, r.Queue)
			}
		}
		wantStats(t, b, backend.QueueStats{Queue: "b", Pending: 2})
		claimNone(t, b, "nothing-here")
	})

	parallel(t, h, "PriorityAcrossQueues", func(t *testing.T, b backend.Backend) {
		low := job("a", "t")
		high := job("b", "t")
		high.Priority = 5
		ids := insertIDs(t, b, low, high)
		if got := claim(t, b, 1, longLease, "a", "b"); len(got) != 1 || got[0].ID != ids[1] {
			t.Fatalf("claim [a b] Max 1 got %v, want [%d] (higher priority in b)", got, ids[1])
		}
	})

	// Jobs reach the ready set many ways: inserted alone or in a batch, of
	// priority 0 or not, retried, released, promoted from delayed. A
	// backend may keep some of them apart (Redis keeps single plain inserts
	// in a list of their own) but claims take them in one order (priority,
	// due time, ID: see ClaimOrder), and a claim of Max below what is ready
	// takes the best Max of all of them.
	parallel(t, h, "OrderAcrossEveryWayIn", func(t *testing.T, b backend.Backend) {
		single := func(prio int, delay time.Duration) int64 {
			p := job("q", "t")
			p.Priority, p.Delay = prio, delay
			return insertOne(t, b, p)
		}
		x, a := single(0, 0), single(0, 0)
		held := claim(t, b, 2, longLease, "q")
		if got := sortedIDs(held); !slices.Equal(got, []int64{x, a}) {
			t.Fatalf("claim got %v, want %v", got, []int64{x, a})
		}
		const delay = 150 * time.Millisecond
		d := single(0, delay)
		j1, j2 := single(0, 0), single(0, 0)
		hi, lo := single(1, 0), single(-1, 0)
		batch := insertIDs(t, b, job("q", "t"), job("q", "t"))
		j3 := single(0, 0)
		// x and a come back with IDs older than every other job, due
		// after all but d: x retried at once, a released.
		for _, r := range held {
			if r.ID == x {
				completeFresh(t, b, retry(r.Ref(), 0, "again"))
			} else if n := release(t, b, r.Ref()); n != 1 {
				t.Fatalf("JobRelease = %d, want 1", n)
			}
		}
		eventually(t, delay+waitLimit, "the delayed job to be due", func() bool {
			return statsOf(t, b, "q").Pending == 10
		})
		// Usually hi, j1 j2 batch j3 (due as inserted), x and a (due when
		// they came back), d (due last), lo; the due times the backend
		// stored decide, as a slow machine may have reached d's before x's.
		want := claimOrderOf(t, b, x, a, d, j1, j2, hi, lo, batch[0], batch[1], j3)
		wantClaims(t, b, []string{"q"}, want[:2], want[2:5], want[5:6], want[6:8], want[8:])
	})

	// The same across queues: a claim naming several takes the best of
	// all of them, however each queue holds its jobs.
	parallel(t, h, "OrderAcrossQueues", func(t *testing.T, b backend.Backend) {
		a1 := insertOne(t, b, job("a", "t"))
		bs := insertIDs(t, b, job("b", "t"), job("b", "t"))
		a2 := insertOne(t, b, job("a", "t"))
		b3 := insertOne(t, b, job("b", "t"))
		hp := job("b", "t")
		hp.Priority = 1
		bh := insertOne(t, b, hp)
		a3 := insertOne(t, b, job("a", "t"))
		for i, want := range [][]int64{
			{bh, a1}, {bs[0], bs[1]}, {a2}, {b3, a3},
		} {
			rows := claim(t, b, len(want), longLease, "a", "b")
			slices.Sort(want)
			if got := sortedIDs(rows); !slices.Equal(got, want) {
				t.Fatalf("claim %d (Max %d) of [a b] got %v, want %v", i, len(want), got, want)
			}
		}
		claimNone(t, b, "a", "b")
	})

	parallel(t, h, "DelayedInvisibleUntilDue", func(t *testing.T, b backend.Backend) {
		const delay = 300 * time.Millisecond
		p := job("q", "t")
		p.Delay = delay
		start := time.Now()
		id := insertOne(t, b, p)
		rows := claim(t, b, 1, longLease, "q")
		if len(rows) != 0 && time.Since(start) < delay {
			t.Fatalf("job %d with delay %s was claimable after %s", id, delay, time.Since(start))
		}
		for len(rows) == 0 {
			if time.Since(start) > delay+waitLimit {
				t.Fatalf("job with delay %s not claimable after %s", delay, time.Since(start))
			}
			time.Sleep(10 * time.Millisecond)
			rows = claim(t, b, 1, longLease, "q")
		}
		if rows[0].ID != id || rows[0].Attempts != 1 {
			t.Fatalf("claimed job %d attempts %d, want job %d attempts 1", rows[0].ID, rows[0].Attempts, id)
		}
	})

	parallel(t, h, "ClaimedRow", func(t *testing.T, b backend.Backend) {
		p := job("q", "email")
		p.Payload = []byte(`{"to":"x"}`)
		p.Priority = 3
		p.MaxAttempts = 4
		p.UniqueKey = "u"
		id := insertOne(t, b, p)
		before := time.Now()
		rows := claim(t, b, 5, time.Minute, "q")
		if len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		r := rows[0]
		if r.ID != id || r.Queue != "q" || r.Type != "email" || !jsonEqual(r.Payload, p.Payload) ||
			r.Priority != 3 || r.MaxAttempts != 4 || r.UniqueKey != "u" {
			t.Errorf("claimed row %+v does not match inserted %+v", r, p)
		}
		if r.Status != backend.StateReserved || r.Attempts != 1 {
			t.Errorf("claimed row status %q attempts %d, want reserved 1", r.Status, r.Attempts)
		}
		if r.Token <= 0 || r.Ref() != (backend.JobRef{ID: id, Attempt: 1, Token: r.Token}) {
			t.Errorf("Ref() = %+v, want job %d attempt 1 with a positive token", r.Ref(), id)
		}
		near(t, "ReservedAt", r.ReservedAt, before, skew)
		near(t, "LeaseUntil", r.LeaseUntil, before.Add(time.Minute), skew)
		near(t, "LeaseUntil - ReservedAt", r.ReservedAt.Add(time.Minute), r.LeaseUntil, time.Second)
		g := wantStatus(t, b, id, backend.StateReserved, 1)
		near(t, "JobGet LeaseUntil", g.LeaseUntil, r.LeaseUntil, 5*time.Millisecond)
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: 1})
		claimNone(t, b, "q")
	})

	parallel(t, h, "ClaimedRowTimes", func(t *testing.T, b backend.Backend) {
		// The runtime reports a job's wait as ReservedAt - AvailableAt, both
		// from the backend's clock: a claimed row carries the AvailableAt
		// it was due at (not its creation, not the claim) and the claim's
		// own ReservedAt.
		const delay = 150 * time.Millisecond
		// Waits are bounded above by the time since the jobs were
		// written, not by a fixed slack: a loaded machine may claim late.
		since := time.Now()
		overdue := job("q", "overdue")
		overdue.RunAt = time.Now().Add(-time.Hour)
		delayed := job("q", "delayed")
		delayed.Delay = delay
		ids := insertIDs(t, b, job("q", "now"), overdue, delayed)
		stored := map[int64]time.Time{}
		for _, id := range ids {
			stored[id] = get(t, b, id).AvailableAt
		}
		// wantTimes checks a claimed row against the AvailableAt stored
		// before the claim; the wait must be about wantWait.
		wantTimes := func(r *backend.JobRow, wantWait time.Duration) {
			t.Helper()
			if r.AvailableAt.IsZero() || r.ReservedAt.IsZero() {
				t.Fatalf("claimed job %d: AvailableAt %v ReservedAt %v, want both set", r.ID, r.AvailableAt, r.ReservedAt)
			}
			near(t, fmt.Sprintf("job %d AvailableAt", r.ID), r.AvailableAt, stored[r.ID], time.Millisecond)
			if r.ReservedAt.Before(since.Add(-skew)) || r.ReservedAt.After(time.Now().Add(skew)) {
				t.Errorf("job %d: ReservedAt %v, want between the write (%v) and now", r.ID, r.ReservedAt, since)
			}
			if r.ReservedAt.Before(r.AvailableAt.Add(-time.Millisecond)) {
				t.Errorf("job %d: ReservedAt %v is before AvailableAt %v: it was claimed before it was due", r.ID, r.ReservedAt, r.AvailableAt)
			}
			if wait := r.ReservedAt.Sub(r.AvailableAt); wait > wantWait+time.Since(since)+time.Second || wait < wantWait-skew {
				t.Errorf("job %d: wait %s (ReservedAt - AvailableAt), want about %s", r.ID, wait, wantWait)
			}
		}
		// The delayed job may already be due at the first claim on a slow
		// machine: claim until all three are held.
		claimed := map[int64]*backend.JobRow{}
		eventually(t, delay+waitLimit, "the three jobs to be claimed", func() bool {
			for _, r := range claim(t, b, 10, longLease, "q") {
				claimed[r.ID] = r
			}
			return len(claimed) == len(ids)
		})
		for i, id := range ids {
			r := claimed[id]
			if r == nil {
				t.Fatalf("job %d was not claimed", id)
			}
			wantWait := time.Duration(0)
			if i == 1 {
				wantWait = time.Hour
			}
			wantTimes(r, wantWait)
		}
		d := claimed[ids[2]]
		if !d.AvailableAt.After(d.CreatedAt) {
			t.Errorf("delayed job: AvailableAt %v not after CreatedAt %v", d.AvailableAt, d.CreatedAt)
		}

		// After a retry with a delay, the next claim's AvailableAt is the
		// retry's due time.
		since = time.Now()
		completeFresh(t, b, retry(d.Ref(), delay, "again"))
		stored[d.ID] = get(t, b, d.ID).AvailableAt
		if !stored[d.ID].After(d.ReservedAt) {
			t.Errorf("retried job: AvailableAt %v not after the last claim at %v", stored[d.ID], d.ReservedAt)
		}
		var again []*backend.JobRow
		eventually(t, delay+waitLimit, "the retried job to be claimable", func() bool {
			again = claim(t, b, 10, longLease, "q")
			return len(again) > 0
		})
		if len(again) != 1 || again[0].ID != d.ID || again[0].Attempts != 2 {
			t.Fatalf("claim after the retry got %+v, want job %d on attempt 2", again, d.ID)
		}
		wantTimes(again[0], 0)
	})

	parallel(t, h, "InvalidParams", func(t *testing.T, b backend.Backend) {
		insertOne(t, b, job("q", "t"))
		for _, tc := range []struct {
			field string
			p     backend.ClaimParams
		}{
			{"queues", backend.ClaimParams{Max: 1, Lease: time.Minute}},
			{"queue", backend.ClaimParams{Queues: []string{"q", "bad queue"}, Max: 1, Lease: time.Minute}},
			{"max", backend.ClaimParams{Queues: []string{"q"}, Max: 0, Lease: time.Minute}},
			{"max", backend.ClaimParams{Queues: []string{"q"}, Max: -1, Lease: time.Minute}},
			{"lease", backend.ClaimParams{Queues: []string{"q"}, Max: 1}},
			{"lease", backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: -time.Second}},
		} {
			rows, err := b.JobClaim(t.Context(), tc.p)
			if len(rows) != 0 {
				t.Errorf("JobClaim(%+v) returned %d jobs", tc.p, len(rows))
			}
			wantInvalid(t, err, tc.field)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
	})

	parallel(t, h, "EmptyQueue", func(t *testing.T, b backend.Backend) {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err != nil || len(rows) != 0 {
			t.Fatalf("JobClaim on an empty backend = %d rows, %v; want none, nil", len(rows), err)
		}
	})
}
