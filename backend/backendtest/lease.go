package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// sweepUntil calls LeaseSweep until it has rescued and failed exactly the
// given numbers of jobs in total (leases of shortLease expire within the
// wait), failing the test if a sweep does more or names other than the jobs
// it counted. It returns the jobs the sweeps named.
func sweepUntil(t *testing.T, b backend.Backend, rescued, failed int) []backend.SweptJob {
	t.Helper()
	var total backend.SweepResult
	eventually(t, waitLimit, "lease sweep", func() bool {
		res := sweep(t, b, backend.SweepParams{})
		total.Rescued += res.Rescued
		total.Failed += res.Failed
		total.Jobs = append(total.Jobs, res.Jobs...)
		if total.Rescued > rescued || total.Failed > failed {
			t.Fatalf("LeaseSweep totals %+v, want rescued %d failed %d", total, rescued, failed)
		}
		return total.Rescued == rescued && total.Failed == failed
	})
	return total.Jobs
}

// sweep calls LeaseSweep once and checks that its Jobs agree with its
// counts: Rescued + Failed jobs, each named once, as many with Failed set
// as it failed.
func sweep(t *testing.T, b backend.Backend, p backend.SweepParams) backend.SweepResult {
	t.Helper()
	res, err := b.LeaseSweep(t.Context(), p)
	if err != nil {
		t.Fatalf("LeaseSweep: %v", err)
	}
	if len(res.Jobs) != res.Rescued+res.Failed {
		t.Fatalf("LeaseSweep rescued %d and failed %d but names %d jobs: %+v", res.Rescued, res.Failed, len(res.Jobs), res.Jobs)
	}
	failed, seen := 0, map[int64]bool{}
	for _, j := range res.Jobs {
		if seen[j.Ref.ID] {
			t.Fatalf("LeaseSweep names job %d twice: %+v", j.Ref.ID, res.Jobs)
		}
		seen[j.Ref.ID] = true
		if j.Failed {
			failed++
		}
	}
	if failed != res.Failed {
		t.Fatalf("LeaseSweep failed %d jobs but marks %d as Failed: %+v", res.Failed, failed, res.Jobs)
	}
	return res
}

// testLease: leases are extended by their holder and expired leases are
// swept back to pending or, with attempts spent, to failed_jobs.
func testLease(t *testing.T, h Harness) {
	parallel(t, h, "ExtendMovesLeaseForward", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		rows := claim(t, b, 1, time.Minute, "q")
		if len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		r := rows[0]
		before := time.Now()
		lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{r.Ref()}, Lease: time.Hour})
		if err != nil || len(lost) != 0 {
			t.Fatalf("JobExtendLease = %v, %v; want no lost leases", lost, err)
		}
		row := wantStatus(t, b, id, backend.StateReserved, 1)
		near(t, "LeaseUntil", row.LeaseUntil, before.Add(time.Hour), skew)
		if !row.LeaseUntil.After(r.LeaseUntil) {
			t.Errorf("LeaseUntil %v did not move past %v", row.LeaseUntil, r.LeaseUntil)
		}
		// The holder keeps its job: the extension did not count an attempt.
		completeFresh(t, b, done(r.Ref()))
	})

	parallel(t, h, "ExtendRefusesNoLease", func(t *testing.T, b backend.Backend) {
		// A lease of zero or less would let the job go at once: refused,
		// the lease left as it was, the same way on every backend.
		insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		for _, lease := range []time.Duration{0, -time.Second} {
			_, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{r.Ref()}, Lease: lease})
			wantInvalid(t, err, "lease")
			if !strings.HasPrefix(err.Error(), "extend leases: ") {
				t.Errorf("JobExtendLease(lease %s) error %q, want it to name the operation \"extend leases\"", lease, err)
			}
		}
		near(t, "LeaseUntil", get(t, b, r.ID).LeaseUntil, r.LeaseUntil, time.Second)
		completeFresh(t, b, done(r.Ref()))
	})

	parallel(t, h, "ExtendSeveral", func(t *testing.T, b backend.Backend) {
		insertIDs(t, b, job("q", "t"), job("q", "t"))
		rows := claim(t, b, 2, time.Minute, "q")
		if len(rows) != 2 {
			t.Fatalf("claim got %d jobs, want 2", len(rows))
		}
		unknown := backend.JobRef{ID: rows[1].ID + 100, Attempt: 1}
		lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{
			Refs:  []backend.JobRef{rows[0].Ref(), unknown, rows[1].Ref()},
			Lease: time.Hour,
		})
		if err != nil || len(lost) != 1 || lost[0] != unknown {
			t.Fatalf("JobExtendLease = %v, %v; want [%v]", lost, err, unknown)
		}
		for _, r := range rows {
			near(t, "LeaseUntil", get(t, b, r.ID).LeaseUntil, time.Now().Add(time.Hour), skew)
		}
	})

	parallel(t, h, "SweepRescuesExpired", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		if rows := claim(t, b, 1, shortLease, "q"); len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		sweepUntil(t, b, 1, 0)
		// The crashed attempt counts.
		wantPendingNow(t, b, id, 1)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		if r := claimOne(t, b, "q"); r.ID != id || r.Attempts != 2 {
			t.Fatalf("claim after rescue: job %d attempts %d, want job %d attempts 2", r.ID, r.Attempts, id)
		}
	})

	parallel(t, h, "SweepFailsSpent", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 1
		id := insertOne(t, b, p)
		if rows := claim(t, b, 1, shortLease, "q"); len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		sweepUntil(t, b, 0, 1)
		gone(t, b, id)
		f := failedByJob(t, b, id)
		if !strings.Contains(f.Error, backend.LeaseExpiredError) || f.Attempts != 1 {
			t.Fatalf("failed row error %q attempts %d; want it to mention \"lease expired\", attempts 1", f.Error, f.Attempts)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Failed: 1})
		claimNone(t, b, "q")
	})

	parallel(t, h, "SweepLeavesUnexpired", func(t *testing.T, b backend.Backend) {
		long := insertOne(t, b, job("q", "t"))
		held := claimOne(t, b, "q")
		short := insertOne(t, b, job("q", "t"))
		if rows := claim(t, b, 1, shortLease, "q"); len(rows) != 1 || rows[0].ID != short {
			t.Fatalf("claim got %v, want [%d]", ids(rows), short)
		}
		sweepUntil(t, b, 1, 0)
		row := wantStatus(t, b, long, backend.StateReserved, 1)
		near(t, "LeaseUntil", row.LeaseUntil, held.LeaseUntil, 5*time.Millisecond)
		wantPendingNow(t, b, short, 1)
		completeFresh(t, b, done(held.Ref()))
	})

	parallel(t, h, "SweepNamesJobs", func(t *testing.T, b backend.Backend) {
		// rescued goes back to pending; spent has no attempt left; twice is
		// rescued once, then swept again on its last attempt, so its ref
		// names attempt 2; held keeps its lease and is not named.
		spent := job("mail", "send")
		spent.MaxAttempts = 1
		twice := job("mail", "digest")
		twice.MaxAttempts = 2
		heldID := insertOne(t, b, job("q", "held"))
		held := claimOne(t, b, "q")
		ids := insertIDs(t, b, job("q", "resize"), spent, twice)
		rescued, spentID, twiceID := ids[0], ids[1], ids[2]
		rows := claim(t, b, 3, shortLease, "q", "mail")
		if len(rows) != 3 {
			t.Fatalf("claim got %d jobs, want 3", len(rows))
		}
		refOf := map[int64]backend.JobRef{}
		for _, r := range rows {
			refOf[r.ID] = r.Ref()
		}
		want := map[int64]backend.SweptJob{
			rescued: {Ref: refOf[rescued], Queue: "q", Type: "resize"},
			spentID: {Ref: refOf[spentID], Queue: "mail", Type: "send", Failed: true},
			twiceID: {Ref: refOf[twiceID], Queue: "mail", Type: "digest"},
		}
		wantSwept := func(got []backend.SweptJob) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("sweeps named %+v, want %+v", got, want)
			}
			for _, j := range got {
				if w, ok := want[j.Ref.ID]; !ok || j != w {
					t.Errorf("sweep named %+v, want %+v", j, w)
				}
			}
		}
		wantSwept(sweepUntil(t, b, 2, 1))

		r := claim(t, b, 10, shortLease, "mail")
		if len(r) != 1 || r[0].ID != twiceID || r[0].Attempts != 2 {
			t.Fatalf("claim after the sweep got %+v, want job %d on attempt 2", r, twiceID)
		}
		want = map[int64]backend.SweptJob{
			twiceID: {Ref: r[0].Ref(), Queue: "mail", Type: "digest", Failed: true},
		}
		wantSwept(sweepUntil(t, b, 0, 1))
		gone(t, b, twiceID)
		failedByJob(t, b, twiceID)
		wantStatus(t, b, heldID, backend.StateReserved, 1)
		completeFresh(t, b, done(held.Ref()))
	})

	parallel(t, h, "SweepNothing", func(t *testing.T, b backend.Backend) {
		insertOne(t, b, job("q", "t"))
		res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
		if err != nil || res.Rescued != 0 || res.Failed != 0 || len(res.Jobs) != 0 {
			t.Fatalf("LeaseSweep with nothing reserved = %+v, %v", res, err)
		}
	})

	parallel(t, h, "SweepLimit", func(t *testing.T, b backend.Backend) {
		insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"))
		if rows := claim(t, b, 3, shortLease, "q"); len(rows) != 3 {
			t.Fatalf("claim got %d jobs, want 3", len(rows))
		}
		total := 0
		eventually(t, waitLimit, "three rescues with Limit 2", func() bool {
			res := sweep(t, b, backend.SweepParams{Limit: 2})
			if n := res.Rescued + res.Failed; n > 2 {
				t.Fatalf("LeaseSweep with Limit 2 handled %d jobs", n)
			}
			total += res.Rescued
			return total == 3
		})
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 3})
	})
}
