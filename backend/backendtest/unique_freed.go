package backendtest

import (
	"testing"

	"github.com/jobq/jobq/backend"
)

// testUniqueFreed: a unique key is held for as long as its job lives
// (through retries, releases and a cancel not yet acted on) and freed by
// every way a job ends: done and kept, cancelled while waiting or while
// running. A failed job's replay takes its key back only when no live job
// holds it.
func testUniqueFreed(t *testing.T, h Harness) {
	keyed := func() backend.InsertParams {
		p := job("q", "t")
		p.UniqueKey = "k"
		return p
	}
	// holder inserts keyed() again and returns whether it was new and the
	// ID of the job holding the key.
	holder := func(t *testing.T, b backend.Backend) (bool, int64) {
		t.Helper()
		res := insert(t, b, keyed())
		return !res[0].Duplicate, res[0].ID
	}
	wantHeld := func(t *testing.T, b backend.Backend, by int64, when string) {
		t.Helper()
		if fresh, id := holder(t, b); fresh || id != by {
			t.Fatalf("%s: insert with the key made a new job (%t) with ID %d, want a duplicate of %d", when, fresh, id, by)
		}
	}
	wantFreed := func(t *testing.T, b backend.Backend, was int64, when string) int64 {
		t.Helper()
		fresh, id := holder(t, b)
		if !fresh || id == was {
			t.Fatalf("%s: insert with the key = ID %d (new %t), want a new job, not %d", when, id, fresh, was)
		}
		return id
	}

	parallel(t, h, "DoneKept", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed())
		completeFresh(t, b, keepDone(claimOne(t, b, "q").Ref()))
		wantFreed(t, b, first, "after a done outcome kept among the finished jobs")
	})

	parallel(t, h, "HeldThroughRelease", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed())
		if n := release(t, b, claimOne(t, b, "q").Ref()); n != 1 {
			t.Fatalf("released %d jobs, want 1", n)
		}
		wantHeld(t, b, first, "after a release")
		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		wantFreed(t, b, first, "after the released job was done")
	})

	parallel(t, h, "CancelledWaiting", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		first := insertOne(t, b, keyed())
		wantCancel(t, c, []int64{first}, backend.CancelCancelled)
		wantFreed(t, b, first, "after a waiting job was cancelled")
	})

	parallel(t, h, "CancelledRunning", func(t *testing.T, b backend.Backend) {
		c, _ := canceller(t, b)
		first := insertOne(t, b, keyed())
		ref := claimOne(t, b, "q").Ref()
		wantCancel(t, c, []int64{first}, backend.CancelRequested)
		wantHeld(t, b, first, "while a cancel waits for the running job")
		wantCancelledOutcome(t, b, done(ref))
		wantFreed(t, b, first, "after the running job ended cancelled")
	})

	parallel(t, h, "ReplayWhileHeld", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed())
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "boom"))
		wantFreed(t, b, first, "after the job failed")
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{first}})
		if err != nil || res.Replayed != 0 || res.Skipped != 1 {
			t.Fatalf("replay of a failed job whose key a live job holds = %+v, %v; want it skipped", res, err)
		}
		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{first}})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("replay once the key is free = %+v, %v; want it replayed", res, err)
		}
		wantHeld(t, b, first, "after the replay")
	})
}
