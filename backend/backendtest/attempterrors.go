package backendtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// wantEntry is what one AttemptError must hold; at is the test's time when
// the attempt ended, compared within skew.
type wantEntry struct {
	attempt int
	took    time.Duration
	worker  string
	err     string
	at      time.Time
}

// wantErrors asserts that got is want, entry by entry, oldest first.
func wantErrors(t *testing.T, what string, got []backend.AttemptError, want []wantEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d attempt errors %+v, want %d", what, len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Attempt != w.attempt || g.Duration != w.took || g.Worker != w.worker || g.Error != w.err {
			t.Errorf("%s: entry %d = {attempt %d, %s, worker %q, %q}, want {attempt %d, %s, worker %q, %q}",
				what, i, g.Attempt, g.Duration, g.Worker, g.Error, w.attempt, w.took, w.worker, w.err)
		}
		near(t, fmt.Sprintf("%s: entry %d At", what, i), g.At, w.at, skew)
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.Before(got[i-1].At) {
			t.Errorf("%s: entry %d At %v is before entry %d's %v: want oldest first", what, i, got[i].At, i-1, got[i-1].At)
		}
	}
}

// retryBy is a retry outcome that reports how long the handler ran and who
// ran it.
func retryBy(ref backend.JobRef, msg string, took time.Duration, worker string) backend.Outcome {
	o := retry(ref, 0, msg)
	o.Duration, o.Worker = took, worker
	return o
}

// testAttemptErrors: every attempt that ends with an error appends an
// AttemptError to the job's Errors (retry, fail, counted release, expired
// lease), oldest first, at most MaxAttemptErrors; a failed job carries
// them, a replay keeps them, and done, defer and a free release add none.
func testAttemptErrors(t *testing.T, h Harness) {
	parallel(t, h, "History", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 4
		id := insertOne(t, b, p)
		var want []wantEntry

		r := claimOne(t, b, "q")
		completeFresh(t, b, retryBy(r.Ref(), "dial tcp: connection refused", 1500*time.Millisecond, "host-a:101"))
		want = append(want, wantEntry{1, 1500 * time.Millisecond, "host-a:101", "dial tcp: connection refused", time.Now()})
		row := get(t, b, id)
		wantErrors(t, "after one retry", row.Errors, want)

		r = claimOne(t, b, "q")
		completeFresh(t, b, retryBy(r.Ref(), "http 503", 250*time.Millisecond, "host-b:202"))
		want = append(want, wantEntry{2, 250 * time.Millisecond, "host-b:202", "http 503", time.Now()})

		// Attempt 3 ends by a counted release: the free ones before it
		// add nothing.
		freeReleases(t, b, "q", id)
		wantErrors(t, "after free releases", get(t, b, id).Errors, want)
		r = claimOne(t, b, "q")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		want = append(want, wantEntry{3, 0, "", backend.ReleasedError, time.Now()})
		row = wantPendingNow(t, b, id, 3)
		wantErrors(t, "after a counted release", row.Errors, want)
		if row.LastError != backend.ReleasedError {
			t.Errorf("LastError %q, want %q", row.LastError, backend.ReleasedError)
		}

		r = claimOne(t, b, "q")
		o := fail(r.Ref(), "payment declined")
		o.Duration, o.Worker = 42*time.Millisecond, "host-c:303"
		completeFresh(t, b, o)
		want = append(want, wantEntry{4, 42 * time.Millisecond, "host-c:303", "payment declined", time.Now()})
		f := failedByJob(t, b, id)
		wantErrors(t, "FailedList", f.Errors, want)
		g, err := b.FailedGet(t.Context(), id)
		if err != nil {
			t.Fatalf("FailedGet(%d): %v", id, err)
		}
		wantErrors(t, "FailedGet", g.Errors, want)
		if g.Error != "payment declined" {
			t.Errorf("FailedGet Error %q, want the last attempt's", g.Error)
		}

		// A replay starts the attempts again and keeps their record.
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{id}})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("FailedReplay = %+v, %v; want 1 replayed", res, err)
		}
		row = wantPendingNow(t, b, id, 0)
		wantErrors(t, "after replay", row.Errors, want)
		r = claimOne(t, b, "q")
		completeFresh(t, b, retryBy(r.Ref(), "still declined", time.Second, "host-a:101"))
		want = append(want, wantEntry{1, time.Second, "host-a:101", "still declined", time.Now()})
		wantErrors(t, "a retry after replay", get(t, b, id).Errors, want)
	})

	parallel(t, h, "LeaseExpired", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 2
		id := insertOne(t, b, p)
		var want []wantEntry
		for attempt := 1; attempt <= 2; attempt++ {
			if rows := claim(t, b, 1, shortLease, "q"); len(rows) != 1 {
				t.Fatalf("attempt %d: claimed %d jobs, want 1", attempt, len(rows))
			}
			if attempt == 1 {
				sweepUntil(t, b, 1, 0)
			} else {
				sweepUntil(t, b, 0, 1)
			}
			want = append(want, wantEntry{attempt, 0, "", backend.LeaseExpiredError, time.Now()})
			if attempt == 1 {
				wantErrors(t, "rescued", get(t, b, id).Errors, want)
			}
		}
		wantErrors(t, "failed by the sweep", failedByJob(t, b, id).Errors, want)
	})

	parallel(t, h, "Bounded", func(t *testing.T, b backend.Backend) {
		const n = 25
		p := job("q", "t")
		p.MaxAttempts = n + 1
		id := insertOne(t, b, p)
		long := strings.Repeat("w", 300) + "\x00\xff"
		var want []wantEntry
		for i := 1; i <= n; i++ {
			r := claimOne(t, b, "q")
			msg := fmt.Sprintf("error %d", i)
			completeFresh(t, b, retryBy(r.Ref(), msg, time.Duration(i)*time.Millisecond, long))
			want = append(want, wantEntry{i, time.Duration(i) * time.Millisecond, backend.WorkerText(long), msg, time.Now()})
		}
		if w := backend.WorkerText(long); len(w) != backend.MaxWorkerBytes {
			t.Fatalf("WorkerText cut a long name to %d bytes, want %d", len(w), backend.MaxWorkerBytes)
		}
		row := get(t, b, id)
		wantErrors(t, "25 retries", row.Errors, want[n-backend.MaxAttemptErrors:])
		if row.LastError != "error 25" {
			t.Errorf("LastError %q, want the last attempt's", row.LastError)
		}
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "last"))
		want = append(want, wantEntry{n + 1, 0, "", "last", time.Now()})
		wantErrors(t, "failed after 25 retries", failedByJob(t, b, id).Errors, want[n+1-backend.MaxAttemptErrors:])
	})

	parallel(t, h, "DoneAndDeferAddNothing", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		fresh := get(t, b, id)
		if len(fresh.Errors) != 0 {
			t.Fatalf("a new job has Errors %+v, want none", fresh.Errors)
		}
		completeFresh(t, b, retryBy(claimOne(t, b, "q").Ref(), "once", time.Millisecond, "w"))
		want := []wantEntry{{1, time.Millisecond, "w", "once", time.Now()}}
		o := deferred(claimOne(t, b, "q").Ref(), 0)
		o.Duration, o.Worker = time.Second, "other"
		completeFresh(t, b, o)
		wantErrors(t, "after a defer", wantPendingNow(t, b, id, 1).Errors, want)
		d := done(claimOne(t, b, "q").Ref())
		d.Duration, d.Worker = time.Second, "other"
		completeFresh(t, b, d)
		gone(t, b, id)

		// A job that never failed fails with one entry.
		id = insertOne(t, b, job("q", "t"))
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "permanent"))
		wantErrors(t, "failed at once", failedByJob(t, b, id).Errors,
			[]wantEntry{{1, 0, "", "permanent", time.Now()}})
	})

	// A workflow task's job ends failed through the statements that end
	// its task (sqlTaskSettle on PostgreSQL): they record the error too.
	parallel(t, h, "WorkflowTask", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		p := task("a")
		p.Job.MaxAttempts = 2
		wfInsert(t, w, p)
		r := wantClaimed(t, b, "a")["a"]
		completeFresh(t, b, retryBy(r.Ref(), "first", 3*time.Millisecond, "host-a:1"))
		want := []wantEntry{{1, 3 * time.Millisecond, "host-a:1", "first", time.Now()}}
		wantErrors(t, "task's job after a retry", get(t, b, r.ID).Errors, want)
		r = wantClaimed(t, b, "a")["a"]
		o := fail(r.Ref(), "second")
		o.Duration, o.Worker = 7*time.Millisecond, "host-b:2"
		completeFresh(t, b, o)
		want = append(want, wantEntry{2, 7 * time.Millisecond, "host-b:2", "second", time.Now()})
		wantErrors(t, "task's failed job", failedByJob(t, b, r.ID).Errors, want)

		// Its last attempt spent by an expired lease.
		p = task("b")
		p.Job.MaxAttempts = 1
		wfInsert(t, w, p)
		if rows := claim(t, b, 1, shortLease, "w"); len(rows) != 1 {
			t.Fatalf("claimed %d task jobs, want 1", len(rows))
		} else {
			r = rows[0]
		}
		sweepUntil(t, b, 0, 1)
		wantErrors(t, "task's job failed by the sweep", failedByJob(t, b, r.ID).Errors,
			[]wantEntry{{1, 0, "", backend.LeaseExpiredError, time.Now()}})
	})

	parallel(t, h, "NegativeDuration", func(t *testing.T, b backend.Backend) {
		insertOne(t, b, job("q", "t"))
		o := retryBy(claimOne(t, b, "q").Ref(), "x", -time.Second, "w")
		_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{o}})
		wantInvalid(t, err, "duration")
	})
}
