package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testProgress: a holder's progress is stored under its claim's fence and
// read back by JobGet and JobList (never by JobClaim), the latest report
// replacing the one before; a stale holder's, a finished, failed, missing or
// never-claimed job's and a cancelling job's reports are refused with
// ErrStale and change nothing (a cancelling job still shows what its
// holder reported before); out-of-range or oversized reports are input
// errors that change nothing; a job given back (released, retried,
// deferred, rescued) shows no progress, nor does its next attempt until
// it reports. Backends without backend.ProgressReporter skip it.
func testProgress(t *testing.T, h Harness) {
	parallel(t, h, "ReadBack", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		id := insertOne(t, b, job("p", "t"))
		other := insertOne(t, b, job("p", "t"))
		held := claim(t, b, 2, longLease, "p")
		if len(held) != 2 {
			t.Fatalf("claim got %d jobs, want 2", len(held))
		}
		for _, j := range held {
			if j.Progress != nil {
				t.Fatalf("claimed job %d has Progress %+v, want nil", j.ID, j.Progress)
			}
		}
		ref := refOf(t, held, id)
		before := get(t, b, id)
		if before.Progress != nil {
			t.Fatalf("job %d before any report has Progress %+v, want nil", id, before.Progress)
		}
		report(t, pr, ref, 10, "starting")
		// HTML and non-ASCII text is stored as given: escaping is the
		// surfaces' business.
		msg := "<b>copied</b> 3/5 — ≈60%"
		report(t, pr, ref, 60, msg)
		wantProgress(t, b, id, 60, msg)
		if j := get(t, b, other); j.Progress != nil {
			t.Fatalf("job %d, never reported, has Progress %+v (its neighbour's?)", other, j.Progress)
		}
		// The edges of the range and an empty message are valid.
		report(t, pr, refOf(t, held, other), 0, "")
		wantProgress(t, b, other, 0, "")
		report(t, pr, ref, 100, strings.Repeat("é", backend.MaxProgressMessageBytes/2))
		wantProgress(t, b, id, 100, strings.Repeat("é", backend.MaxProgressMessageBytes/2))
		if r, ok := b.(backend.Retainer); ok {
			rows, err := r.JobList(t.Context(), backend.JobListParams{State: backend.StateReserved})
			if err != nil {
				t.Fatalf("JobList(reserved): %v", err)
			}
			got := map[int64]*backend.Progress{}
			for _, j := range rows {
				got[j.ID] = j.Progress
			}
			if p := got[id]; p == nil || p.Percent != 100 {
				t.Fatalf("JobList(reserved) progress of job %d = %+v, want 100%%", id, p)
			}
			if p := got[other]; p == nil || p.Percent != 0 {
				t.Fatalf("JobList(reserved) progress of job %d = %+v, want 0%%", other, p)
			}
		}
	})

	parallel(t, h, "StaleRefused", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		id, old, cur := rescuedClaim(t, b, "p")
		wantStale(t, pr, old, "the rescued claim's")
		if j := get(t, b, id); j.Progress != nil {
			t.Fatalf("job %d has Progress %+v after a stale report only, want nil", id, j.Progress)
		}
		report(t, pr, cur.Ref(), 40, "current")
		wantStale(t, pr, old, "the rescued claim's")
		wantProgress(t, b, id, 40, "current")
		// Same ID, the current attempt number, another token: still stale.
		forged := cur.Ref()
		forged.Token++
		wantStale(t, pr, forged, "a token not the claim's")
		wantProgress(t, b, id, 40, "current")
	})

	parallel(t, h, "Invalid", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		id := insertOne(t, b, job("p", "t"))
		ref := claimOne(t, b, "p").Ref()
		report(t, pr, ref, 30, "kept")
		for _, c := range []struct {
			name  string
			p     backend.Progress
			field string
		}{
			{"negative", backend.Progress{Percent: -1}, "progress percent"},
			{"over 100", backend.Progress{Percent: 101}, "progress percent"},
			{"long message", backend.Progress{Percent: 1, Message: strings.Repeat("x", backend.MaxProgressMessageBytes+1)}, "progress message"},
			{"not UTF-8", backend.Progress{Percent: 1, Message: "a\xffb"}, "progress message"},
			{"NUL", backend.Progress{Percent: 1, Message: "a\x00b"}, "progress message"},
			{"line break", backend.Progress{Percent: 1, Message: "a\nb"}, "progress message"},
			{"escape", backend.Progress{Percent: 1, Message: "\x1b[31mred"}, "progress message"},
		} {
			wantInvalid(t, pr.JobProgress(t.Context(), ref, c.p), c.field)
			wantProgress(t, b, id, 30, "kept")
		}
	})

	parallel(t, h, "NewAttemptStartsAtNone", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		p := job("p", "t")
		p.MaxAttempts = 10
		id := insertOne(t, b, p)
		// Each way a reserved job goes back to pending drops its progress.
		for _, end := range []struct {
			name string
			do   func(ref backend.JobRef)
		}{
			{"release", func(ref backend.JobRef) { release(t, b, ref) }},
			{"retry", func(ref backend.JobRef) { completeFresh(t, b, retry(ref, 0, "again")) }},
			{"defer", func(ref backend.JobRef) { completeFresh(t, b, deferred(ref, 0)) }},
		} {
			ref := claimOne(t, b, "p").Ref()
			report(t, pr, ref, 70, "before "+end.name)
			end.do(ref)
			if j := get(t, b, id); j.Status != backend.StatePending || j.Progress != nil {
				t.Fatalf("after %s job %d is %s with Progress %+v, want pending with none", end.name, id, j.Status, j.Progress)
			}
			wantStale(t, pr, ref, "the "+end.name+"d claim's")
		}
		cur := claimOne(t, b, "p")
		if cur.Progress != nil || get(t, b, id).Progress != nil {
			t.Fatalf("job %d claimed again has progress, want none", id)
		}
		// Rescued by the sweep: the lease ran out with progress reported.
		completeFresh(t, b, retry(cur.Ref(), 0, "again"))
		first := claim(t, b, 1, shortLease, "p")
		if len(first) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(first))
		}
		report(t, pr, first[0].Ref(), 90, "nearly")
		sweepUntil(t, b, 1, 0)
		if j := get(t, b, id); j.Status != backend.StatePending || j.Progress != nil {
			t.Fatalf("rescued job %d is %s with Progress %+v, want pending with none", id, j.Status, j.Progress)
		}
		if next := reclaim(t, b, "p", id, first[0].Ref()); next.Progress != nil || get(t, b, id).Progress != nil {
			t.Fatalf("rescued job %d claimed again has progress, want none", id)
		}
	})

	parallel(t, h, "EndedRefused", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		doneID := insertOne(t, b, job("p", "t"))
		ref := claimOne(t, b, "p").Ref()
		report(t, pr, ref, 50, "half")
		completeFresh(t, b, done(ref))
		wantStale(t, pr, ref, "a completed job's")
		gone(t, b, doneID)

		failedID := insertOne(t, b, job("p", "t"))
		ref = claimOne(t, b, "p").Ref()
		completeFresh(t, b, fail(ref, "boom"))
		wantStale(t, pr, ref, "a failed job's")
		if f := failedByJob(t, b, failedID); f.Error != "boom" {
			t.Fatalf("failed job %d error %q after a refused report", failedID, f.Error)
		}

		wantStale(t, pr, backend.JobRef{ID: doneID + failedID + 1000, Attempt: 1, Token: 1}, "a missing job's")
		pending := insertOne(t, b, job("p", "t"))
		wantStale(t, pr, backend.JobRef{ID: pending, Attempt: 1, Token: 0}, "a never-claimed job's")
		if j := wantPendingNow(t, b, pending, 0); j.Progress != nil {
			t.Fatalf("pending job %d has Progress %+v after a refused report", pending, j.Progress)
		}
	})

	parallel(t, h, "CancellingRefused", func(t *testing.T, b backend.Backend) {
		pr := progressReporter(t, b)
		c, ok := b.(backend.Canceller)
		if !ok {
			t.Skip("backend does not implement backend.Canceller")
		}
		id := insertOne(t, b, job("p", "t"))
		ref := claimOne(t, b, "p").Ref()
		report(t, pr, ref, 20, "before the cancel")
		if res, err := c.JobCancel(t.Context(), []int64{id}); err != nil || len(res) != 1 || res[0].Outcome != backend.CancelRequested {
			t.Fatalf("JobCancel(%d) = %+v, %v; want it requested", id, res, err)
		}
		wantStale(t, pr, ref, "a cancelling job's")
		if j := get(t, b, id); j.Status != backend.StateCancelling {
			t.Fatalf("job %d is %s after a refused report, want cancelling", id, j.Status)
		}
		// Its handler is still stopping: what it reported still shows.
		wantProgress(t, b, id, 20, "before the cancel")
	})
}

// progressReporter returns b's ProgressReporter or skips the test.
func progressReporter(t *testing.T, b backend.Backend) backend.ProgressReporter {
	t.Helper()
	pr, ok := b.(backend.ProgressReporter)
	if !ok {
		t.Skip("backend does not implement backend.ProgressReporter")
	}
	return pr
}

// refOf returns the ref of job id among rows.
func refOf(t *testing.T, rows []*backend.JobRow, id int64) backend.JobRef {
	t.Helper()
	for _, j := range rows {
		if j.ID == id {
			return j.Ref()
		}
	}
	t.Fatalf("job %d is not among the claimed %v", id, ids(rows))
	return backend.JobRef{}
}

// report records progress under ref, which must hold its job.
func report(t *testing.T, pr backend.ProgressReporter, ref backend.JobRef, percent int, msg string) {
	t.Helper()
	if err := pr.JobProgress(t.Context(), ref, backend.Progress{Percent: percent, Message: msg}); err != nil {
		t.Fatalf("JobProgress(%+v, %d, %q): %v", ref, percent, msg, err)
	}
}

// wantStale asserts that a report under ref is refused as stale.
func wantStale(t *testing.T, pr backend.ProgressReporter, ref backend.JobRef, whose string) {
	t.Helper()
	err := pr.JobProgress(t.Context(), ref, backend.Progress{Percent: 99, Message: "stale"})
	if !errors.Is(err, backend.ErrStale) {
		t.Fatalf("JobProgress with %s ref %+v = %v, want ErrStale", whose, ref, err)
	}
}

// wantProgress asserts JobGet's progress of job id, stamped about now.
func wantProgress(t *testing.T, b backend.Backend, id int64, percent int, msg string) {
	t.Helper()
	j := get(t, b, id)
	if j.Progress == nil || j.Progress.Percent != percent || j.Progress.Message != msg {
		t.Fatalf("job %d: Progress %+v, want %d%% %q", id, j.Progress, percent, msg)
	}
	near(t, "Progress.At", j.Progress.At, time.Now(), 5*time.Second)
}
