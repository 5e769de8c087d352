package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testConflict: a duplicate's conflict mode (backend.ConflictMode)
// changes the waiting job holding its unique key, never a running one,
// inside the insert.
func testConflict(t *testing.T, h Harness) {
	uniq := func(key, payload string, mode backend.ConflictMode) backend.InsertParams {
		p := job("q", "t")
		p.UniqueKey, p.Payload, p.OnConflict = key, []byte(payload), mode
		return p
	}
	debounced := func(key, payload string, d, bound time.Duration) backend.InsertParams {
		p := uniq(key, payload, backend.ConflictDebounce)
		p.Debounce, p.DebounceMax = d, bound
		return p
	}
	// duplicate inserts p, a duplicate of holder with a conflict mode, and
	// returns its result.
	duplicate := func(t *testing.T, b backend.Backend, p backend.InsertParams, holder int64) backend.InsertResult {
		t.Helper()
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
		if err != nil {
			t.Fatalf("JobInsertMany with conflict mode %s: %v", p.OnConflict, err)
		}
		if !res[0].Duplicate || res[0].ID != holder {
			t.Fatalf("insert with mode %s = %+v, want a duplicate of job %d", p.OnConflict, res[0], holder)
		}
		return res[0]
	}

	parallel(t, h, "ReplaceWaiting", func(t *testing.T, b backend.Backend) {
		first := uniq("k", `{"v":1}`, backend.ConflictSkip)
		first.Delay = time.Hour
		holder := insertOne(t, b, first)
		at := time.Now().Add(3 * time.Hour).Truncate(time.Microsecond)
		p := uniq("k", `{"v":2}`, backend.ConflictReplace)
		p.RunAt = at
		res := duplicate(t, b, p, holder)
		if !res.Replaced {
			t.Fatalf("replace of a waiting job = %+v, want Replaced", res)
		}
		row := get(t, b, holder)
		if !jsonEqual(row.Payload, []byte(`{"v":2}`)) || !row.AvailableAt.Equal(at) {
			t.Fatalf("replaced job: payload %s due %v, want {\"v\":2} due %v", row.Payload, row.AvailableAt, at)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
		// Due now: a claim takes it, with the new payload.
		p = uniq("k", `{"v":3}`, backend.ConflictReplace)
		if res := duplicate(t, b, p, holder); !res.Replaced {
			t.Fatalf("second replace = %+v, want Replaced", res)
		}
		if got := claimOne(t, b, "q"); got.ID != holder || !jsonEqual(got.Payload, []byte(`{"v":3}`)) {
			t.Fatalf("claimed job %d with %s, want %d with {\"v\":3}", got.ID, got.Payload, holder)
		}
	})

	parallel(t, h, "ReplaceOtherQueue", func(t *testing.T, b backend.Backend) {
		// A unique key spans queues: the holder changes where it is.
		holder := insertOne(t, b, uniq("k", `{"v":1}`, backend.ConflictSkip))
		p := uniq("k", `{"v":2}`, backend.ConflictReplace)
		p.Queue, p.Delay = "other", time.Hour
		if res := duplicate(t, b, p, holder); !res.Replaced {
			t.Fatalf("replace from another queue = %+v, want Replaced", res)
		}
		row := get(t, b, holder)
		if row.Queue != "q" || !jsonEqual(row.Payload, []byte(`{"v":2}`)) {
			t.Fatalf("replaced job: queue %s payload %s, want q and {\"v\":2}", row.Queue, row.Payload)
		}
		near(t, "replaced due time", row.AvailableAt, time.Now().Add(time.Hour), skew)
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "ReplaceRetrying", func(t *testing.T, b backend.Backend) {
		holder := insertOne(t, b, uniq("k", `{"v":1}`, backend.ConflictSkip))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), time.Hour, "later"))
		res := duplicate(t, b, uniq("k", `{"v":2}`, backend.ConflictReplace), holder)
		row := wantPendingNow(t, b, holder, 1)
		if !res.Replaced || !jsonEqual(row.Payload, []byte(`{"v":2}`)) || row.LastError != "later" {
			t.Fatalf("replace of a retrying job = %+v, row %+v: want Replaced, the new payload, its attempts and error kept", res, row)
		}
	})

	parallel(t, h, "RunningLeftAlone", func(t *testing.T, b backend.Backend) {
		holder := insertOne(t, b, uniq("k", `{"v":1}`, backend.ConflictSkip))
		held := claimOne(t, b, "q")
		for _, p := range []backend.InsertParams{uniq("k", `{"v":2}`, backend.ConflictReplace), debounced("k", `{"v":3}`, time.Minute, time.Hour)} {
			res := duplicate(t, b, p, holder)
			if res.Replaced {
				t.Fatalf("mode %s on a running job = %+v, want not Replaced", p.OnConflict, res)
			}
		}
		row := wantStatus(t, b, holder, backend.StateReserved, 1)
		if !jsonEqual(row.Payload, []byte(`{"v":1}`)) || row.Token != held.Token {
			t.Fatalf("running job changed: %+v", row)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: 1})
	})

	parallel(t, h, "DebounceBounded", func(t *testing.T, b backend.Backend) {
		// The bound equals the delay: every later enqueue would push the
		// job past it, so the due time stays at created + bound.
		first := uniq("k", `{"v":1}`, backend.ConflictSkip)
		first.Delay = time.Hour
		holder := insertOne(t, b, first)
		row := get(t, b, holder)
		res := duplicate(t, b, debounced("k", `{"v":2}`, time.Hour, time.Hour), holder)
		after := get(t, b, holder)
		if !res.Replaced || !jsonEqual(after.Payload, []byte(`{"v":2}`)) {
			t.Fatalf("debounce of a waiting job = %+v, payload %s: want Replaced and the new payload", res, after.Payload)
		}
		if want := after.CreatedAt.Add(time.Hour); !after.AvailableAt.Equal(want) {
			t.Fatalf("debounced due time %v, want the bound, created + 1h = %v (was %v)", after.AvailableAt, want, row.AvailableAt)
		}
	})

	parallel(t, h, "DebouncePushes", func(t *testing.T, b backend.Backend) {
		first := uniq("k", `{}`, backend.ConflictSkip)
		first.Delay = time.Minute
		holder := insertOne(t, b, first)
		was := get(t, b, holder).AvailableAt
		p := debounced("k", `{}`, 2*time.Hour, 10*time.Hour)
		duplicate(t, b, p, holder)
		row := get(t, b, holder)
		near(t, "debounced due time", row.AvailableAt, time.Now().Add(2*time.Hour), skew)
		if !row.AvailableAt.After(was) || row.AvailableAt.After(row.CreatedAt.Add(10*time.Hour)) {
			t.Fatalf("debounced due time %v: want after %v and within the bound", row.AvailableAt, was)
		}
	})

	parallel(t, h, "WithinBatch", func(t *testing.T, b backend.Backend) {
		ps := []backend.InsertParams{uniq("k", `{"v":1}`, backend.ConflictSkip), uniq("other", `{}`, backend.ConflictSkip), uniq("k", `{"v":2}`, backend.ConflictReplace)}
		res, err := b.JobInsertMany(t.Context(), ps)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Duplicate || !res[2].Duplicate || res[2].ID != res[0].ID || !res[2].Replaced {
			t.Fatalf("batch results %+v: want the third a replacing duplicate of the first", res)
		}
		if row := get(t, b, res[0].ID); !jsonEqual(row.Payload, []byte(`{"v":2}`)) {
			t.Fatalf("the batch's job has payload %s, want the replacing one", row.Payload)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2})
	})

	parallel(t, h, "Refused", func(t *testing.T, b backend.Backend) {
		noKey := job("q", "t")
		noKey.OnConflict = backend.ConflictReplace
		keyed := uniq("k", `{}`, backend.ConflictReplace)
		keyed.Key = "acct"
		for _, c := range []struct {
			name  string
			p     backend.InsertParams
			field string
		}{
			{"no unique key", noKey, "on conflict"},
			{"keyed job", keyed, "on conflict"},
			{"debounce without delay", debounced("k", `{}`, 0, time.Hour), "debounce"},
			{"bound under the delay", debounced("k", `{}`, time.Hour, time.Minute), "debounce"},
			{"debounce for replace", func() backend.InsertParams {
				p := uniq("k", `{}`, backend.ConflictReplace)
				p.Debounce = time.Second
				return p
			}(), "debounce"},
		} {
			_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "t"), c.p})
			wantInvalid(t, err, c.field)
		}
		wantNoStats(t, b)
	})
}
