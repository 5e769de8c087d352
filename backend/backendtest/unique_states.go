package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testUniqueStates: a unique key's holder keeps a new job of the key out
// only while its state is in its set (backend.UniqueStates); out of it,
// the insert takes the key over, and the old holder does not get it back;
// a running holder also gives it up to a follow-up asking KeepLast.
// Every backend the suite runs on keeps state sets.
func testUniqueStates(t *testing.T, h Harness) {
	uniq := func(states backend.UniqueStates) backend.InsertParams {
		p := job("q", "t")
		p.UniqueKey, p.UniqueStates = "k", states
		return p
	}
	// first inserts p, the first job of its key, and returns its ID.
	first := func(t *testing.T, b backend.Backend, p backend.InsertParams) int64 {
		t.Helper()
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
		if err != nil || res[0].Duplicate {
			t.Fatalf("insert with states %s = %+v, %v; want a new job", p.UniqueStates, res, err)
		}
		return res[0].ID
	}
	// again inserts p and checks that it is a duplicate of holder (0: a
	// new job), returning its ID.
	again := func(t *testing.T, b backend.Backend, p backend.InsertParams, holder int64) int64 {
		t.Helper()
		res := insert(t, b, p)
		if holder == 0 && res[0].Duplicate || holder != 0 && (!res[0].Duplicate || res[0].ID != holder) {
			t.Fatalf("insert with states %s = %+v, want a duplicate of job %d (0: a new job)", p.UniqueStates, res[0], holder)
		}
		return res[0].ID
	}

	parallel(t, h, "WaitingAllowsRunning", func(t *testing.T, b backend.Backend) {
		// river#1183: skip while one waits, allow while one runs.
		a := first(t, b, uniq(backend.UniqueWaiting))
		again(t, b, uniq(backend.UniqueWaiting), a)
		if got := claimOne(t, b, "q"); got.ID != a {
			t.Fatalf("claimed job %d, want %d", got.ID, a)
		}
		next := again(t, b, uniq(backend.UniqueWaiting), 0)
		again(t, b, uniq(backend.UniqueWaiting), next)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1, Reserved: 1})
	})

	parallel(t, h, "Running", func(t *testing.T, b backend.Backend) {
		a := first(t, b, uniq(backend.UniqueRunning))
		// Waiting, a holds nothing: the next insert takes the key.
		next := again(t, b, uniq(backend.UniqueRunning), 0)
		held := claim(t, b, 2, time.Minute, "q")
		if len(held) != 2 {
			t.Fatalf("claimed %d jobs, want %d and %d", len(held), a, next)
		}
		// next holds the key and runs; a runs too, not holding it.
		again(t, b, uniq(backend.UniqueRunning), next)
	})

	parallel(t, h, "ScheduledOnly", func(t *testing.T, b backend.Backend) {
		later := uniq(backend.UniqueScheduled)
		later.Delay = time.Hour
		a := first(t, b, later)
		again(t, b, uniq(backend.UniqueScheduled), a)
		// A pending holder of a scheduled-only key holds nothing.
		p := uniq(backend.UniqueScheduled)
		p.UniqueKey = "now"
		due := first(t, b, p)
		if id := again(t, b, p, 0); id == due {
			t.Fatalf("insert over a pending holder of a scheduled-only key named it")
		}
	})

	parallel(t, h, "Retrying", func(t *testing.T, b backend.Backend) {
		a := first(t, b, uniq(backend.UniqueRetrying|backend.UniqueRunning))
		// Pending, not counted: taken over by b1, which then waits.
		b1 := again(t, b, uniq(backend.UniqueWaiting), 0)
		if b1 == a {
			t.Fatalf("insert over a pending holder of a retrying-only key named it")
		}
		// The key is b1's now; a, backing off, does not get it back.
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), time.Hour, "later"))
		again(t, b, uniq(backend.UniqueRetrying), b1)
	})

	parallel(t, h, "RetryingCounts", func(t *testing.T, b backend.Backend) {
		// Waiting only: a job backing off after a failed attempt is
		// retrying, not waiting.
		w := first(t, b, uniq(backend.UniqueWaiting))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), time.Hour, "later"))
		if id := again(t, b, uniq(backend.UniqueWaiting), 0); id == w {
			t.Fatalf("a retrying holder of a waiting-only key was named")
		}
		// With retrying in its set, it keeps the key.
		p := uniq(backend.UniqueRetrying | backend.UniqueRunning | backend.UniquePending)
		p.Queue, p.UniqueKey = "r", "r"
		a := insertOne(t, b, p)
		completeFresh(t, b, retry(claimOne(t, b, "r").Ref(), time.Hour, "later"))
		again(t, b, p, a)
	})

	parallel(t, h, "NotGivenBack", func(t *testing.T, b backend.Backend) {
		a := first(t, b, uniq(backend.UniqueWaiting))
		held := claimOne(t, b, "q")
		next := again(t, b, uniq(backend.UniqueWaiting), 0)
		// a comes back to waiting (released), but next holds the key.
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{held.Ref()}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, b, a, backend.StatePending, 0)
		again(t, b, uniq(backend.UniqueWaiting), next)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2})
	})

	parallel(t, h, "ReplaceNotCounted", func(t *testing.T, b backend.Backend) {
		a := first(t, b, uniq(backend.UniqueWaiting))
		claimOne(t, b, "q")
		p := uniq(backend.UniqueWaiting)
		p.OnConflict, p.Payload = backend.ConflictReplace, []byte(`{"v":2}`)
		res := insert(t, b, p)
		if res[0].Duplicate || res[0].Replaced || res[0].ID == a {
			t.Fatalf("replace over a running holder of a waiting-only key = %+v, want a new job", res[0])
		}
		if row := get(t, b, res[0].ID); !jsonEqual(row.Payload, []byte(`{"v":2}`)) {
			t.Fatalf("new job's payload %s", row.Payload)
		}
	})

	parallel(t, h, "KeepLast", func(t *testing.T, b backend.Backend) {
		// A running holder keeps running and a duplicate asking KeepLast
		// becomes its follow-up, which later duplicates replace while it
		// waits: at most one follow-up waits.
		a := insertOne(t, b, uniq(0))
		claimOne(t, b, "q")
		last := func(v string) backend.InsertParams {
			p := uniq(0)
			p.OnConflict, p.KeepLast, p.Payload = backend.ConflictReplace, true, []byte(v)
			return p
		}
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{last(`{"v":2}`)})
		if errors.Is(err, backend.ErrNotSupported) {
			wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: 1})
			return
		}
		if err != nil || res[0].Duplicate || res[0].ID == a {
			t.Fatalf("keep-last over a running holder = %+v, %v; want a new job", res, err)
		}
		follow := res[0].ID
		res = insert(t, b, last(`{"v":3}`))
		if !res[0].Duplicate || res[0].ID != follow || !res[0].Replaced {
			t.Fatalf("keep-last over a waiting follow-up = %+v, want job %d replaced", res[0], follow)
		}
		if row := get(t, b, follow); !jsonEqual(row.Payload, []byte(`{"v":3}`)) {
			t.Fatalf("follow-up's payload %s, want {\"v\":3}", row.Payload)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1, Reserved: 1})
		// Without KeepLast, a duplicate of the waiting follow-up is one.
		again(t, b, uniq(0), follow)
		if got := claimOne(t, b, "q"); got.ID != follow {
			t.Fatalf("claimed %d, want the follow-up %d", got.ID, follow)
		}
		if id := again(t, b, last(`{"v":4}`), 0); id == follow || id == a {
			t.Fatalf("keep-last over a running follow-up named job %d", id)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1, Reserved: 2})
	})

	parallel(t, h, "Batch", func(t *testing.T, b backend.Backend) {
		// Within one call the items of a key are one job, whatever the
		// set: the first's state is not judged against the later ones.
		ps := []backend.InsertParams{uniq(backend.UniqueRunning), uniq(backend.UniqueRunning)}
		res, err := b.JobInsertMany(t.Context(), ps)
		if errors.Is(err, backend.ErrNotSupported) {
			wantNoStats(t, b)
			return
		}
		if err != nil || res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID {
			t.Fatalf("batch = %+v, %v; want one job", res, err)
		}
	})

	parallel(t, h, "Invalid", func(t *testing.T, b backend.Backend) {
		noKey := job("q", "t")
		noKey.UniqueStates = backend.UniqueWaiting
		bad := uniq(1 << 6)
		for _, p := range []backend.InsertParams{noKey, bad} {
			_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "t"), p})
			wantInvalid(t, err, "unique states")
		}
		skip := uniq(0)
		skip.KeepLast = true
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "t"), skip})
		wantInvalid(t, err, "keep last")
		wantNoStats(t, b)
	})
}
