package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testUnique: a unique key is held by a live (pending or reserved) job and
// freed when the job is done or failed.
func testUnique(t *testing.T, h Harness) {
	keyed := func(key, payload string) backend.InsertParams {
		p := job("q", "t")
		p.UniqueKey = key
		p.Payload = []byte(payload)
		return p
	}
	wantDup := func(t *testing.T, b backend.Backend, p backend.InsertParams, holder int64) {
		t.Helper()
		res := insert(t, b, p)
		if !res[0].Duplicate || res[0].ID != holder {
			t.Fatalf("insert with key %q = %+v, want Duplicate of job %d", p.UniqueKey, res[0], holder)
		}
	}
	wantFresh := func(t *testing.T, b backend.Backend, p backend.InsertParams, after int64) int64 {
		t.Helper()
		res := insert(t, b, p)
		if res[0].Duplicate || res[0].ID <= after {
			t.Fatalf("insert with key %q = %+v, want a new job after %d", p.UniqueKey, res[0], after)
		}
		return res[0].ID
	}

	parallel(t, h, "DuplicateWhilePending", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{"v":1}`))
		wantDup(t, b, keyed("k", `{"v":2}`), first)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		if row := get(t, b, first); !jsonEqual(row.Payload, []byte(`{"v":1}`)) {
			t.Fatalf("payload of the holder = %s, want the first one", row.Payload)
		}
	})

	parallel(t, h, "DuplicateWhileReserved", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{}`))
		claimOne(t, b, "q")
		wantDup(t, b, keyed("k", `{}`), first)
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: 1})
	})

	parallel(t, h, "DuplicateWhileBackingOff", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{}`))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), time.Hour, "later"))
		wantDup(t, b, keyed("k", `{}`), first)
	})

	parallel(t, h, "FreeAfterDone", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{}`))
		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		second := wantFresh(t, b, keyed("k", `{}`), first)
		wantDup(t, b, keyed("k", `{}`), second)
	})

	parallel(t, h, "FreeAfterFailed", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{}`))
		completeFresh(t, b, fail(claimOne(t, b, "q").Ref(), "boom"))
		wantFresh(t, b, keyed("k", `{}`), first)
	})

	parallel(t, h, "FreeAfterLeaseExpiredFailed", func(t *testing.T, b backend.Backend) {
		p := keyed("k", `{}`)
		p.MaxAttempts = 1
		first := insertOne(t, b, p)
		claim(t, b, 1, shortLease, "q")
		sweepUntil(t, b, 0, 1)
		wantFresh(t, b, p, first)
	})

	parallel(t, h, "DuplicateWithinBatch", func(t *testing.T, b backend.Backend) {
		res := insert(t, b, keyed("k", `{"i":0}`), keyed("other", `{}`), keyed("k", `{"i":2}`))
		if res[0].Duplicate || res[1].Duplicate {
			t.Fatalf("results %+v: the first two are new", res)
		}
		if !res[2].Duplicate || res[2].ID != res[0].ID {
			t.Fatalf("third result = %+v, want Duplicate of %d", res[2], res[0].ID)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2})
	})

	parallel(t, h, "BatchMixesNewAndDuplicate", func(t *testing.T, b backend.Backend) {
		first := insertOne(t, b, keyed("k", `{}`))
		res := insert(t, b, keyed("new", `{}`), keyed("k", `{}`))
		if res[0].Duplicate || res[0].ID <= first {
			t.Fatalf("first result = %+v, want a new job", res[0])
		}
		if !res[1].Duplicate || res[1].ID != first {
			t.Fatalf("second result = %+v, want Duplicate of %d", res[1], first)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2})
	})

	parallel(t, h, "EmptyKeyNeverConflicts", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, keyed("", `{}`), keyed("", `{}`))
		third := insertOne(t, b, keyed("", `{}`))
		if ids[0] == ids[1] || ids[1] == third {
			t.Fatalf("IDs %v, %d: want distinct", ids, third)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 3})
	})

	// A key is unique across queues: one call inserting it into two
	// queues, or a later one into another queue, names the live job
	// holding it; once that job is done, another queue may take it.
	parallel(t, h, "AcrossQueues", func(t *testing.T, b backend.Backend) {
		in := func(queue string) backend.InsertParams {
			p := job(queue, "t")
			p.UniqueKey = "k"
			return p
		}
		res := insert(t, b, in("a"), in("b"))
		if res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID {
			t.Fatalf("one key inserted into queues a and b in one call = %+v, want the second a duplicate of the first", res)
		}
		wantDup(t, b, in("b"), res[0].ID)
		claimNone(t, b, "b")
		completeFresh(t, b, done(claimOne(t, b, "a").Ref()))
		second := wantFresh(t, b, in("b"), res[0].ID)
		wantDup(t, b, in("a"), second)
		wantStats(t, b, backend.QueueStats{Queue: "b", Pending: 1})
		wantStats(t, b, backend.QueueStats{Queue: "a"})
	})
}
