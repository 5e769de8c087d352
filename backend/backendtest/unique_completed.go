package backendtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testUniqueCompleted: a job whose set holds backend.UniqueCompleted keeps
// its unique key when it succeeds and is kept among the finished jobs,
// until the prune removes it; a duplicate names the finished job and
// changes nothing, whatever its conflict mode. Not kept, failed or
// cancelled, it frees the key as any job does.
func testUniqueCompleted(t *testing.T, h Harness) {
	const held = backend.UniqueAllStates | backend.UniqueCompleted
	uniq := func(states backend.UniqueStates) backend.InsertParams {
		p := job("q", "t")
		p.UniqueKey, p.UniqueStates = "k", states
		return p
	}
	// wantDup inserts ps and checks that each is a duplicate of id, not
	// replaced.
	wantDup := func(t *testing.T, b backend.Backend, id int64, when string, ps ...backend.InsertParams) {
		t.Helper()
		for i, r := range insert(t, b, ps...) {
			if !r.Duplicate || r.ID != id || r.Replaced {
				t.Fatalf("%s: item %d = %+v; want a duplicate of the completed job %d, not replaced", when, i, r, id)
			}
		}
	}
	wantNew := func(t *testing.T, b backend.Backend, was int64, when string) int64 {
		t.Helper()
		r := insert(t, b, uniq(held))[0]
		if r.Duplicate || r.ID == was {
			t.Fatalf("%s: insert = %+v; want a new job, the key freed by job %d", when, r, was)
		}
		return r.ID
	}

	parallel(t, h, "HeldUntilPruned", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		a := insertOne(t, b, uniq(held))
		completeFresh(t, b, keepDone(claimOne(t, b, "q").Ref()))

		replace := uniq(0)
		replace.Payload, replace.OnConflict = []byte(`{"new":true}`), backend.ConflictReplace
		keepLast := replace
		keepLast.KeepLast = true
		debounce := uniq(0)
		debounce.OnConflict, debounce.Debounce, debounce.DebounceMax = backend.ConflictDebounce, time.Second, time.Minute
		wantDup(t, b, a, "while the completed job is kept", uniq(0))
		wantDup(t, b, a, "replace", replace)
		wantDup(t, b, a, "debounce", debounce)
		wantDup(t, b, a, "replace asking for a follow-up", keepLast)
		other := uniq(backend.UniqueWaiting)
		other.UniqueKey = "other"
		wantDup(t, b, a, "a batch of two", uniq(held), uniq(held))
		if res := insert(t, b, uniq(held), other); res[0].ID != a || !res[0].Duplicate || res[1].Duplicate {
			t.Fatalf("batch of the held key and another = %+v; want a duplicate of %d and a new job", res, a)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		rows := finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted})
		if len(rows) != 1 || rows[0].ID != a || bytes.Contains(rows[0].Payload, []byte("new")) {
			t.Fatalf("completed jobs = %+v; want job %d alone, its payload unchanged", rows, a)
		}

		// The prune frees the key with the job.
		time.Sleep(1200 * time.Millisecond)
		n, err := r.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: time.Second})
		if err != nil || n != 1 {
			t.Fatalf("FinishedPrune = %d, %v; want the completed job pruned", n, err)
		}
		next := wantNew(t, b, a, "after the prune")
		wantDup(t, b, next, "the new holder, waiting", uniq(0))
	})

	parallel(t, h, "NotKept", func(t *testing.T, b backend.Backend) {
		a := insertOne(t, b, uniq(held))
		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		wantNew(t, b, a, "after a done outcome not kept")
	})

	parallel(t, h, "FailedFrees", func(t *testing.T, b backend.Backend) {
		retainer(t, b)
		a := insertOne(t, b, uniq(held))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), 0, "again"))
		wantDup(t, b, a, "while retrying", uniq(0))
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "boom"))
		next := wantNew(t, b, a, "after the job failed")

		// Completed and kept, next holds the key: the failed job's
		// replay finds it held and is skipped.
		completeFresh(t, b, keepDone(claimOne(t, b, "q").Ref()))
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{a}})
		if err != nil || res.Replayed != 0 || res.Skipped != 1 {
			t.Fatalf("replay of a failed job whose key a completed job holds = %+v, %v; want it skipped", res, err)
		}
		wantDup(t, b, next, "after the skipped replay", uniq(0))
	})

	parallel(t, h, "CancelledFrees", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		a := insertOne(t, b, uniq(held))
		wantCancel(t, c, []int64{a}, backend.CancelCancelled)
		wantNew(t, b, a, "after the waiting job was cancelled")
	})

	parallel(t, h, "CompletedOnly", func(t *testing.T, b backend.Backend) {
		retainer(t, b)
		// Pending, a holds nothing of a completed-only set: the next
		// insert takes the key over, and a completes without it.
		a := insertOne(t, b, uniq(backend.UniqueCompleted))
		next := insertOne(t, b, uniq(backend.UniqueCompleted))
		if got := claimOne(t, b, "q"); got.ID != a {
			t.Fatalf("claimed job %d, want %d", got.ID, a)
		} else {
			completeFresh(t, b, keepDone(got.Ref()))
		}
		third := insertOne(t, b, uniq(backend.UniqueCompleted))
		// third took the key from next; next and third wait. Completed
		// and kept, third holds it.
		for range 2 {
			completeFresh(t, b, keepDone(claimOne(t, b, "q").Ref()))
		}
		wantDup(t, b, third, "once the holder completed", uniq(backend.UniqueCompleted), uniq(0))
		if next == third {
			t.Fatalf("the third insert named job %d, the second's", next)
		}
	})
}
