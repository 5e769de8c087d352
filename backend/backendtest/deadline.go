package backendtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// deadlineWait is how far ahead the tests that let a deadline pass set
// it: long enough for the insert (and a claim) to come before it, short
// enough to keep the suite quick.
const deadlineWait = time.Second

// claimWait is how far ahead the tests that claim a job before its
// deadline set it: a loaded machine (the race detector, CI) can take a
// few hundred milliseconds between the insert and the claim.
const claimWait = 2 * time.Second

// testDeadline: a job not claimed by its deadline is never claimed and
// the lease sweep moves it to failed jobs with backend.DeadlineError,
// its attempts unchanged; a deadline already passed, or before the due
// time, is refused at insert with nothing written; a running job is not
// stopped by its deadline; a replay clears it.
// Every backend the suite runs on keeps deadlines.
func testDeadline(t *testing.T, h Harness) {
	by := func(p backend.InsertParams, d time.Time) backend.InsertParams {
		p.Deadline = d
		return p
	}
	// supported inserts ps: every backend the suite runs on keeps
	// deadlines, so a refusal fails the test.
	supported := func(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []int64 {
		t.Helper()
		res, err := b.JobInsertMany(t.Context(), ps)
		if err != nil {
			t.Fatalf("JobInsertMany with deadlines: %v", err)
		}
		out := make([]int64, len(res))
		for i, r := range res {
			out[i] = r.ID
		}
		return out
	}
	// pass waits until d has passed by the test's clock, with room for
	// the store's clock to agree.
	pass := func(t *testing.T, d time.Time) {
		t.Helper()
		eventually(t, 5*time.Second, "the deadline to pass", func() bool { return time.Now().After(d.Add(20 * time.Millisecond)) })
	}
	sweep := func(t *testing.T, b backend.Backend) backend.SweepResult {
		t.Helper()
		res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
		if err != nil {
			t.Fatalf("LeaseSweep: %v", err)
		}
		return res
	}
	// wantExpired asserts that the sweep res moved job id, expired, and
	// that its failed row says so, with attempts unchanged.
	wantExpired := func(t *testing.T, b backend.Backend, res backend.SweepResult, id int64, d time.Time, attempts int) {
		t.Helper()
		i := slices.IndexFunc(res.Jobs, func(s backend.SweptJob) bool { return s.Ref.ID == id })
		if i < 0 || !res.Jobs[i].Expired || !res.Jobs[i].Failed {
			t.Fatalf("sweep %+v does not name job %d as expired", res, id)
		}
		if res.Expired < 1 || res.Rescued != 0 || res.Failed != 0 {
			t.Fatalf("sweep counts %+v, want the expired job counted in Expired alone", res)
		}
		gone(t, b, id)
		f := failedByJob(t, b, id)
		if f.Error != backend.DeadlineError(d) {
			t.Fatalf("failed job %d error = %q, want %q", id, f.Error, backend.DeadlineError(d))
		}
		if f.Attempts != attempts {
			t.Fatalf("failed job %d attempts = %d, want %d (unchanged)", id, f.Attempts, attempts)
		}
	}

	// expiredOne inserts a job whose deadline then passes.
	expiredOne := func(t *testing.T, b backend.Backend) (int64, time.Time) {
		t.Helper()
		d := time.Now().Add(deadlineWait)
		ids := supported(t, b, by(job("q", "t"), d))
		pass(t, d)
		return ids[0], d
	}

	parallel(t, h, "ExpiredNeverClaimed", func(t *testing.T, b backend.Backend) {
		id, d := expiredOne(t, b)
		claimNone(t, b, "q")
		wantExpired(t, b, sweep(t, b), id, d, 0)
		if res := sweep(t, b); len(res.Jobs) != 0 || res.Expired != 0 {
			t.Fatalf("a second sweep moved %+v, want nothing", res)
		}
	})

	parallel(t, h, "ExpiredWhileScheduled", func(t *testing.T, b backend.Backend) {
		d := time.Now().Add(deadlineWait)
		p := by(job("q", "t"), d)
		p.Delay = deadlineWait / 3
		ids := supported(t, b, p)
		pass(t, d)
		// Swept without a claim looking first.
		wantExpired(t, b, sweep(t, b), ids[0], d, 0)
		claimNone(t, b, "q")
	})

	parallel(t, h, "FutureClaimed", func(t *testing.T, b backend.Backend) {
		d := time.Now().Add(time.Hour).Truncate(time.Second)
		ids := supported(t, b, by(job("q", "t"), d))
		if got := get(t, b, ids[0]).Deadline; !got.Equal(d) {
			t.Fatalf("JobGet deadline = %v, want %v", got, d)
		}
		j := claimOne(t, b, "q")
		if j.ID != ids[0] {
			t.Fatalf("claimed job %d, want %d", j.ID, ids[0])
		}
		if res := sweep(t, b); res.Expired != 0 {
			t.Fatalf("sweep expired %d jobs, want none", res.Expired)
		}
		completeFresh(t, b, done(j.Ref()))
		gone(t, b, j.ID)
	})

	parallel(t, h, "PassedRefused", func(t *testing.T, b backend.Backend) {
		// One bad item fails the whole batch.
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "t"), by(job("q", "t"), time.Now().Add(-time.Second))})
		if errors.Is(err, backend.ErrNotSupported) {
			wantNoStats(t, b)
			return
		}
		wantInvalid(t, err, "deadline")
		wantNoStats(t, b)
	})

	parallel(t, h, "BeforeDueRefused", func(t *testing.T, b backend.Backend) {
		delayed := by(job("q", "t"), time.Now().Add(time.Minute))
		delayed.Delay = time.Hour
		at := by(job("q", "t"), time.Now().Add(time.Minute))
		at.RunAt = time.Now().Add(2 * time.Minute)
		for _, p := range []backend.InsertParams{delayed, at} {
			_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
			if errors.Is(err, backend.ErrNotSupported) {
				break
			}
			wantInvalid(t, err, "deadline")
		}
		wantNoStats(t, b)
	})

	parallel(t, h, "ReplayClears", func(t *testing.T, b backend.Backend) {
		id, d := expiredOne(t, b)
		wantExpired(t, b, sweep(t, b), id, d, 0)
		ids := []int64{id}
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: ids})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("FailedReplay = %+v, %v; want 1 replayed", res, err)
		}
		if got := get(t, b, ids[0]).Deadline; !got.IsZero() {
			t.Fatalf("replayed job's deadline = %v, want none", got)
		}
		if j := claimOne(t, b, "q"); j.ID != ids[0] {
			t.Fatalf("claimed job %d, want the replayed %d", j.ID, ids[0])
		}
	})

	parallel(t, h, "RunningCompletes", func(t *testing.T, b backend.Backend) {
		d := time.Now().Add(claimWait)
		ids := supported(t, b, by(job("q", "t"), d))
		j := claimOne(t, b, "q")
		pass(t, d)
		if res := sweep(t, b); res.Expired != 0 || len(res.Jobs) != 0 {
			t.Fatalf("sweep moved %+v, want the running job left alone", res)
		}
		wantStatus(t, b, ids[0], backend.StateReserved, 1)
		completeFresh(t, b, done(j.Ref()))
		gone(t, b, ids[0])
		if _, err := b.FailedGet(t.Context(), ids[0]); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedGet of the completed job: %v, want ErrNotFound", err)
		}
	})

	parallel(t, h, "RetryingExpires", func(t *testing.T, b backend.Backend) {
		d := time.Now().Add(claimWait)
		ids := supported(t, b, by(job("q", "t"), d))
		j := claimOne(t, b, "q")
		// Due again before the deadline, but not claimed until after it.
		completeFresh(t, b, retry(j.Ref(), 100*time.Millisecond, "boom"))
		pass(t, d)
		claimNone(t, b, "q")
		wantExpired(t, b, sweep(t, b), ids[0], d, 1)
	})

	parallel(t, h, "Batch", func(t *testing.T, b backend.Backend) {
		soon, later := time.Now().Add(deadlineWait), time.Now().Add(time.Hour)
		ids := supported(t, b, by(job("q", "t"), soon), job("q", "t"), by(job("q", "t"), later))
		pass(t, soon)
		got := sortedIDs(claim(t, b, 10, longLease, "q"))
		if !slices.Equal(got, []int64{ids[1], ids[2]}) {
			t.Fatalf("claimed %v, want %v (the expired job %d left out)", got, []int64{ids[1], ids[2]}, ids[0])
		}
		wantExpired(t, b, sweep(t, b), ids[0], soon, 0)
	})

	parallel(t, h, "ExpiredAtHead", func(t *testing.T, b backend.Backend) {
		// Expired jobs first in claim order never cut a claim short:
		// it takes the jobs behind them.
		soon := time.Now().Add(deadlineWait)
		urgent := by(job("q", "t"), soon)
		urgent.Priority = 10
		ids := supported(t, b, urgent, urgent, urgent, job("q", "t"), job("q", "t"))
		pass(t, soon)
		got := sortedIDs(claim(t, b, 2, longLease, "q"))
		if !slices.Equal(got, ids[3:]) {
			t.Fatalf("claim of 2 took %v, want %v behind the expired %v", got, ids[3:], ids[:3])
		}
		res := sweep(t, b)
		for _, id := range ids[:3] {
			wantExpired(t, b, res, id, soon, 0)
		}
	})
}
