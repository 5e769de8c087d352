package backendtest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testKeysOrdered: the jobs of an ordered key start one at a time in ID
// order, a head that waits keeps its place, and a head that ends badly
// holds, continues or halts its key as the queue's policy says.
func testKeysOrdered(t *testing.T, h Harness) {
	parallel(t, h, "OrderedOneAtATime", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "o", backend.KeyRules{Ordered: true})
		a := insertIDs(t, b, keyed("o", "a"), keyed("o", "a"), keyed("o", "a"), keyed("o", "b"), keyed("o", "b"))
		hi := keyed("o", "a")
		hi.Priority = 9
		late := insertOne(t, b, hi)
		rows := claim(t, b, 10, longLease, "o")
		if got := sortedIDs(rows); !slices.Equal(got, []int64{a[0], a[3]}) {
			t.Fatalf("claim = %v, want only the heads of a and b (%d, %d)", keysOf(rows), a[0], a[3])
		}
		claimNone(t, b, "o")
		// The next job of a key is claimable in the step that ends its
		// head, not after a sweep.
		completeFresh(t, b, done(byKey(rows, "a")[0].Ref()))
		second := claimOne(t, b, "o")
		if second.ID != a[1] {
			t.Fatalf("after the head's done claimed %v, want %d: neither priority nor a later ID overtakes", keysOf([]*backend.JobRow{second}), a[1])
		}
		// A head backing off keeps the key blocked and keeps its place.
		completeFresh(t, b, retry(second.Ref(), 300*time.Millisecond, "later"))
		claimNone(t, b, "o")
		var back *backend.JobRow
		eventually(t, waitLimit, "the retried head to be due again", func() bool {
			if rows := claim(t, b, 10, longLease, "o"); len(rows) > 0 {
				back = rows[0]
				if len(rows) > 1 {
					t.Fatalf("claim = %v, want only the retried head", keysOf(rows))
				}
				return true
			}
			return false
		})
		if back.ID != a[1] || back.Attempts != 2 {
			t.Fatalf("claimed %v attempt %d, want the retried head %d on attempt 2", keysOf([]*backend.JobRow{back}), back.Attempts, a[1])
		}
		// A released head is the head still.
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{back.Ref()}); err != nil {
			t.Fatalf("JobRelease: %v", err)
		}
		again := claimOne(t, b, "o")
		if again.ID != a[1] {
			t.Fatalf("after a release claimed %d, want the head %d", again.ID, a[1])
		}
		completeFresh(t, b, done(again.Ref()))
		for _, want := range []int64{a[2], late} {
			r := claimOne(t, b, "o")
			if r.ID != want {
				t.Fatalf("claimed %d, want %d in insertion order", r.ID, want)
			}
			completeFresh(t, b, done(r.Ref()))
		}
		claimNone(t, b, "o")
	})
	parallel(t, h, "OrderedScheduledHead", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "o", backend.KeyRules{Ordered: true})
		head := keyed("o", "a")
		head.Delay = time.Hour
		insertOne(t, b, head)
		insertIDs(t, b, keyed("o", "a"), keyed("o", "a"))
		other := insertOne(t, b, keyed("o", "b"))
		if got := claim(t, b, 10, longLease, "o"); len(got) != 1 || got[0].ID != other {
			t.Fatalf("claim = %v, want only b's job: a's head is scheduled and keeps the key", keysOf(got))
		}
	})
	parallel(t, h, "Hold", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "h", backend.KeyRules{Ordered: true})
		a := insertIDs(t, b, keyed("h", "a"), keyed("h", "a"), keyed("h", "a"))
		head := claimOne(t, b, "h")
		completeFresh(t, b, fail(head.Ref(), "boom"))
		claimNone(t, b, "h")
		k := wantKeyInfo(t, c, backend.KeyListParams{}, "a", 2, 0, 1, true)
		if k.HeadID != a[0] {
			t.Fatalf("held key's HeadID = %d, want the failed head %d", k.HeadID, a[0])
		}
		near(t, "held key's HeldSince", k.HeldSince, failedByJob(t, b, a[0]).FailedAt, time.Millisecond)
		// Other keys go on.
		other := insertOne(t, b, keyed("h", "b"))
		if r := claimOne(t, b, "h"); r.ID != other {
			t.Fatalf("claimed %d, want the other key's job %d", r.ID, other)
		}
		// A replayed head runs again first, in its place.
		replay(t, b, backend.FailedReplayParams{IDs: []int64{a[0]}}, 1)
		r := claimOne(t, b, "h")
		if r.ID != a[0] {
			t.Fatalf("after replay claimed %d, want the replayed head %d", r.ID, a[0])
		}
		completeFresh(t, b, fail(r.Ref(), "boom again"))
		claimNone(t, b, "h")
		// Purging the failed head is the discard: the key goes on.
		if n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{IDs: []int64{a[0]}}); err != nil || n != 1 {
			t.Fatalf("FailedPurge(head) = %d, %v; want 1", n, err)
		}
		wantKeyInfo(t, c, backend.KeyListParams{}, "a", 2, 0, 0, false)
		if r := claimOne(t, b, "h"); r.ID != a[1] {
			t.Fatalf("after purge claimed %d, want the next job %d", r.ID, a[1])
		}
	})
	parallel(t, h, "HoldCancelledHead", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		cn, _ := canceller(t, b)
		setKeys(t, c, "h", backend.KeyRules{Ordered: true})
		a := insertIDs(t, b, keyed("h", "a"), keyed("h", "a"))
		if res, err := cn.JobCancel(t.Context(), []int64{a[0]}); err != nil || res[0].Outcome != backend.CancelCancelled {
			t.Fatalf("JobCancel(head) = %+v, %v", res, err)
		}
		// A cancel is an operator's discard: the key goes on.
		if r := claimOne(t, b, "h"); r.ID != a[1] {
			t.Fatalf("after cancelling the head claimed %d, want %d", r.ID, a[1])
		}
		wantKeyInfo(t, c, backend.KeyListParams{}, "a", 0, 1, 0, false)
	})
	parallel(t, h, "ContinueAndReplayInOrder", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "c", backend.KeyRules{Ordered: true, OnFailure: backend.KeyContinue})
		a := insertIDs(t, b, keyed("c", "a"), keyed("c", "a"), keyed("c", "a"), keyed("c", "a"))
		for _, want := range a[:2] {
			r := claimOne(t, b, "c")
			if r.ID != want {
				t.Fatalf("claimed %d, want %d", r.ID, want)
			}
			completeFresh(t, b, fail(r.Ref(), "boom"))
		}
		wantKeyInfo(t, c, backend.KeyListParams{}, "a", 2, 0, 2, false)
		third := claimOne(t, b, "c")
		if third.ID != a[2] {
			t.Fatalf("claimed %d, want %d: under continue the key goes on", third.ID, a[2])
		}
		// Two replays race while the third job runs: the replayed jobs
		// take their places again and run one at a time, first to last.
		var wg sync.WaitGroup
		var mu sync.Mutex
		replayed := 0
		for range 2 {
			wg.Go(func() {
				res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Key: "a"}})
				if err != nil {
					t.Errorf("FailedReplay(key a): %v", err)
				}
				mu.Lock()
				replayed += res.Replayed
				mu.Unlock()
			})
		}
		wg.Wait()
		if replayed != 2 {
			t.Fatalf("two racing replays replayed %d jobs, want 2 in all", replayed)
		}
		claimNone(t, b, "c")
		completeFresh(t, b, done(third.Ref()))
		for _, want := range []int64{a[0], a[1], a[3]} {
			r := claim(t, b, 10, longLease, "c")
			if len(r) != 1 || r[0].ID != want {
				t.Fatalf("claim = %v, want only %d", keysOf(r), want)
			}
			completeFresh(t, b, done(r[0].Ref()))
		}
	})
	parallel(t, h, "Halt", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "x", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt})
		a := insertIDs(t, b, keyed("x", "a"), keyed("x", "a"), keyed("x", "a"))
		other := insertOne(t, b, keyed("x", "b"))
		rows := claim(t, b, 10, longLease, "x")
		completeFresh(t, b, fail(byKey(rows, "a")[0].Ref(), "boom"))
		wantHalted(t, b, "a", a[0], a[1:]...)
		wantKeyInfo(t, c, backend.KeyListParams{}, "a", 0, 0, 1, false)
		if g := get(t, b, other); g.Status != backend.StateReserved {
			t.Fatalf("the other key's job is %s, want it running on", g.Status)
		}
		// Jobs enqueued after the halt start the key afresh.
		fresh := insertOne(t, b, keyed("x", "a"))
		if r := claimOne(t, b, "x"); r.ID != fresh {
			t.Fatalf("claimed %d, want the job enqueued after the halt, %d", r.ID, fresh)
		}
	})
	parallel(t, h, "HaltOnCancel", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		cn, _ := canceller(t, b)
		setKeys(t, c, "x", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt})
		a := insertIDs(t, b, keyed("x", "a"), keyed("x", "a"))
		head := claimOne(t, b, "x")
		if res, err := cn.JobCancel(t.Context(), []int64{head.ID}); err != nil || res[0].Outcome != backend.CancelRequested {
			t.Fatalf("JobCancel(running head) = %+v, %v", res, err)
		}
		// The rest is cancelled when the head ends cancelled, not before.
		wantPendingNow(t, b, a[1], 0)
		if res := complete(t, b, done(head.Ref())); len(res.Cancelled) != 1 {
			t.Fatalf("holder's done = %+v, want it cancelled", res)
		}
		wantHalted(t, b, "a", a[0], a[1])
	})
	parallel(t, h, "HaltOnSweep", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "x", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt})
		last := keyed("x", "a")
		last.MaxAttempts = 1
		a := insertIDs(t, b, last, keyed("x", "a"))
		if r := claim(t, b, 10, shortLease, "x"); len(r) != 1 || r[0].ID != a[0] {
			t.Fatalf("claim = %v, want the head %d", keysOf(r), a[0])
		}
		eventually(t, waitLimit, "the sweep to fail the expired head", func() bool {
			res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
			if err != nil {
				t.Fatalf("LeaseSweep: %v", err)
			}
			return res.Failed == 1
		})
		wantHalted(t, b, "a", a[0], a[1])
	})
}

// wantHalted asserts that the jobs rest of key are no longer live and,
// where the backend keeps finished jobs, ended cancelled naming head.
func wantHalted(t *testing.T, b backend.Backend, key string, head int64, rest ...int64) {
	t.Helper()
	for _, id := range rest {
		if _, err := b.JobGet(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("job %d of the halted key is still live (%v), want it cancelled", id, err)
		}
		if r, ok := b.(backend.Retainer); ok {
			f := wantFinished(t, r, backend.StateCancelled, id)
			if want := backend.HaltedError(key, head); f.LastError != want || f.Key != key {
				t.Fatalf("halted job %d: key %q, last error %q; want %q, %q", id, f.Key, f.LastError, key, want)
			}
		}
	}
}
