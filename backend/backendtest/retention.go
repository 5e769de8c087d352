package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testRetention: backend.Retainer. Done outcomes with Keep are kept as
// completed with the job's fields, listed newest first with filters and
// paging, and pruned by age, each type by its own when the prune gives
// one; without Keep nothing is kept. Live jobs are
// listed by state. One holder at a time has the prune turn. Backends
// without the capability skip it.
func testRetention(t *testing.T, h Harness) {
	testResults(t, h)
	parallel(t, h, "OffKeepsNothing", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id := insertOne(t, b, job("k", "t"))
		completeFresh(t, b, done(claimOne(t, b, "k").Ref()))
		gone(t, b, id)
		for _, s := range []backend.JobState{backend.StateCompleted, backend.StateCancelled} {
			if fs := finishedList(t, r, backend.FinishedListParams{State: s}); len(fs) != 0 {
				t.Fatalf("%s jobs = %d, want none", s, len(fs))
			}
		}
	})

	parallel(t, h, "KeepsCompleted", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		p := job("k", "t")
		p.Priority, p.MaxAttempts, p.UniqueKey = 3, 5, "uk"
		p.Payload = []byte(`{"x":2}`)
		p.Metadata = map[string]string{"tenant": "a"}
		id := insertOne(t, b, p)
		first := claimOne(t, b, "k")
		completeFresh(t, b, retry(first.Ref(), 0, "try again"))
		second := claimOne(t, b, "k")
		completeFresh(t, b, keepDone(second.Ref()))
		gone(t, b, id)
		wantNoStats(t, b)
		f := wantFinished(t, r, backend.StateCompleted, id)
		if f.Queue != "k" || f.Type != "t" || !jsonEqual(f.Payload, p.Payload) || f.Attempts != 2 || f.MaxAttempts != 5 ||
			f.Priority != 3 || f.UniqueKey != "uk" || f.LastError != "try again" || f.Metadata["tenant"] != "a" || len(f.Metadata) != 1 {
			t.Fatalf("completed job = %+v, want the job's fields after 2 attempts", f)
		}
		near(t, "CreatedAt", f.CreatedAt, time.Now(), skew)
		near(t, "FinishedAt", f.FinishedAt, time.Now(), skew)
		// A kept job holds no unique key.
		insertOne(t, b, p)
	})

	parallel(t, h, "ListFiltersAndPages", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		var want []int64 // queue a, type x, newest first
		for i := range 6 {
			q, typ := "a", "x"
			if i%3 == 1 {
				q = "b"
			}
			if i%3 == 2 {
				typ = "y"
			}
			id := insertOne(t, b, job(q, typ))
			completeFresh(t, b, keepDone(claimOne(t, b, q).Ref()))
			if q == "a" && typ == "x" {
				want = append([]int64{id}, want...)
			}
		}
		f := backend.JobFilter{Queue: "a", Type: "x"}
		got := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Filter: f}))
		if !slices.Equal(got, want) {
			t.Fatalf("completed in a/x = %v, want %v", got, want)
		}
		page1 := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Limit: 4}))
		page2 := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Limit: 4, BeforeID: page1[len(page1)-1]}))
		if len(page1) != 4 || len(page2) != 2 || !slices.IsSortedFunc(append(page1, page2...), func(x, y int64) int { return int(y - x) }) {
			t.Fatalf("pages = %v then %v, want 4 then 2, newest first", page1, page2)
		}
		if fs := finishedList(t, r, backend.FinishedListParams{State: backend.StateCancelled}); len(fs) != 0 {
			t.Fatalf("cancelled = %d jobs, want none", len(fs))
		}
		// Time range: all finished within the last minute, none after now.
		all := backend.JobFilter{Since: time.Now().Add(-time.Minute - skew)}
		if n := len(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Filter: all})); n != 6 {
			t.Fatalf("completed since a minute ago = %d, want 6", n)
		}
		later := backend.JobFilter{Since: time.Now().Add(time.Hour)}
		if n := len(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Filter: later})); n != 0 {
			t.Fatalf("completed since an hour from now = %d, want 0", n)
		}
		before := backend.JobFilter{Until: time.Now().Add(-time.Hour)}
		if n := len(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted, Filter: before})); n != 0 {
			t.Fatalf("completed until an hour ago = %d, want 0", n)
		}
		_, err := r.FinishedList(t.Context(), backend.FinishedListParams{State: "done"})
		wantInvalid(t, err, "state")
		_, err = r.FinishedList(t.Context(), backend.FinishedListParams{State: backend.StateCompleted, Limit: -1})
		wantInvalid(t, err, "limit")
	})

	parallel(t, h, "Prune", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		c, _ := b.(backend.Canceller)
		old := insertOne(t, b, job("k", "t"))
		completeFresh(t, b, keepDone(claimOne(t, b, "k").Ref()))
		var oldCancelled int64
		if c != nil {
			oldCancelled = insertOne(t, b, job("k", "t"))
			wantCancel(t, c, []int64{oldCancelled}, backend.CancelCancelled)
		}
		// The recent job must still be younger than the cut when the
		// prune runs, however late a loaded machine runs it: with a 1s
		// cut a stall of a second after its completion (-race, a CPU
		// hog) pruned it too. 5s leaves room; the old ones are older
		// than the cut by the sleep's extra half second.
		const cut = 5 * time.Second
		time.Sleep(cut + 500*time.Millisecond)
		recent := insertOne(t, b, job("k", "t"))
		completeFresh(t, b, keepDone(claimOne(t, b, "k").Ref()))
		n, err := r.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: cut})
		if err != nil || n != 1 {
			t.Fatalf("FinishedPrune(completed, %s) = %d, %v; want 1", cut, n, err)
		}
		got := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}))
		if !slices.Equal(got, []int64{recent}) {
			t.Fatalf("completed after prune = %v, want only %d (not %d)", got, recent, old)
		}
		if c != nil {
			wantFinished(t, r, backend.StateCancelled, oldCancelled) // another state: untouched
			n, err = r.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: backend.StateCancelled, OlderThan: cut})
			if err != nil || n != 1 {
				t.Fatalf("FinishedPrune(cancelled, %s) = %d, %v; want 1", cut, n, err)
			}
		}
		_, err = r.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: backend.StateCompleted})
		wantInvalid(t, err, "older than")
	})

	parallel(t, h, "PruneByType", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		c, _ := b.(backend.Canceller)
		// An old and a recent completed job of each type; the recent
		// ones are younger than every age below, so they all stay. The
		// cut leaves a loaded machine room, as in Prune.
		const cut = 5 * time.Second
		types := []string{"a", "b", "c", "d"}
		old := map[string]int64{}
		for _, typ := range types {
			old[typ] = insertOne(t, b, job("k", typ))
			completeFresh(t, b, keepDone(claimOne(t, b, "k").Ref()))
		}
		var oldCancelled int64
		if c != nil {
			oldCancelled = insertOne(t, b, job("k", "a"))
			wantCancel(t, c, []int64{oldCancelled}, backend.CancelCancelled)
		}
		time.Sleep(cut + 500*time.Millisecond)
		var recent []int64
		for _, typ := range types {
			recent = append(recent, insertOne(t, b, job("k", typ)))
			completeFresh(t, b, keepDone(claimOne(t, b, "k").Ref()))
		}
		left := append([]int64{old["a"], old["b"], old["c"], old["d"]}, recent...)
		for _, s := range []struct {
			name   string
			params backend.FinishedPruneParams
			gone   string // the type whose old job goes
		}{
			// OlderThan 0: only the types named are pruned.
			{"only a", backend.FinishedPruneParams{Types: map[string]time.Duration{"a": cut}}, "a"},
			// A type shorter than the others: c and d are kept an hour.
			{"b shorter", backend.FinishedPruneParams{OlderThan: time.Hour, Types: map[string]time.Duration{"b": cut}}, "b"},
			// A type longer than the others: d is kept an hour.
			{"d longer", backend.FinishedPruneParams{OlderThan: cut, Types: map[string]time.Duration{"d": time.Hour}}, "c"},
			// Without ages per type, every type by OlderThan (on Redis:
			// the jobs an earlier prune indexed by type too).
			{"all", backend.FinishedPruneParams{OlderThan: cut}, "d"},
		} {
			s.params.State = backend.StateCompleted
			n, err := r.FinishedPrune(t.Context(), s.params)
			if err != nil || n != 1 {
				t.Fatalf("%s: FinishedPrune(%+v) = %d, %v; want 1", s.name, s.params, n, err)
			}
			left = slices.DeleteFunc(left, func(id int64) bool { return id == old[s.gone] })
			got := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}))
			slices.Sort(got)
			if !slices.Equal(got, left) {
				t.Fatalf("%s: completed after prune = %v, want %v (the old %s job gone)", s.name, got, left, s.gone)
			}
		}
		if c != nil {
			// Ages per type are of completed jobs: the old cancelled job
			// of type a stays.
			wantFinished(t, r, backend.StateCancelled, oldCancelled)
		}
		for _, bad := range []struct {
			params backend.FinishedPruneParams
			field  string
		}{
			{backend.FinishedPruneParams{State: backend.StateCancelled, OlderThan: cut, Types: map[string]time.Duration{"a": cut}}, "types"},
			{backend.FinishedPruneParams{State: backend.StateCompleted, Types: map[string]time.Duration{"a": 0}}, "types"},
			{backend.FinishedPruneParams{State: backend.StateCompleted, Types: map[string]time.Duration{"": cut}}, "types"},
			{backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: -cut, Types: map[string]time.Duration{"a": cut}}, "older than"},
		} {
			_, err := r.FinishedPrune(t.Context(), bad.params)
			wantInvalid(t, err, bad.field)
		}
		if got := finishedIDs(finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted})); len(got) != len(recent) {
			t.Fatalf("completed after refused prunes = %v, want %v", got, recent)
		}
	})

	parallel(t, h, "JobList", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		later := job("l", "t")
		later.Delay = time.Hour
		scheduled := insertOne(t, b, later)
		p1 := insertOne(t, b, job("l", "t"))
		held := insertOne(t, b, job("l", "t"))
		p2 := insertOne(t, b, job("l", "t"))
		other := insertOne(t, b, job("m", "u"))
		rows := claim(t, b, 1, longLease, "l")
		// Claim order is by ID: p1 first. Release it and claim again so
		// the held job is the one we named.
		if len(rows) != 1 || rows[0].ID != p1 {
			t.Fatalf("claimed %v, want [%d]", ids(rows), p1)
		}
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{rows[0].Ref()}); err != nil {
			t.Fatal(err)
		}
		list := func(s backend.JobState, f backend.JobFilter, limit int, before int64) []int64 {
			rows, err := r.JobList(t.Context(), backend.JobListParams{State: s, Filter: f, Limit: limit, BeforeID: before})
			if err != nil {
				t.Fatalf("JobList(%s): %v", s, err)
			}
			for _, row := range rows {
				if row.Payload == nil || row.Queue == "" {
					t.Fatalf("JobList row %+v lacks its fields", row)
				}
			}
			return ids(rows)
		}
		if got := list(backend.StatePending, backend.JobFilter{}, 0, 0); !slices.Equal(got, []int64{other, p2, held, p1}) {
			t.Fatalf("pending = %v, want %v", got, []int64{other, p2, held, p1})
		}
		claimed := claimOne(t, b, "l")
		if got := list(backend.StateReserved, backend.JobFilter{}, 0, 0); !slices.Equal(got, []int64{claimed.ID}) {
			t.Fatalf("reserved = %v, want [%d]", got, claimed.ID)
		}
		if got := list(backend.StateScheduled, backend.JobFilter{}, 0, 0); !slices.Equal(got, []int64{scheduled}) {
			t.Fatalf("scheduled = %v, want [%d]", got, scheduled)
		}
		if got := list(backend.StatePending, backend.JobFilter{Queue: "m"}, 0, 0); !slices.Equal(got, []int64{other}) {
			t.Fatalf("pending in m = %v, want [%d]", got, other)
		}
		if got := list(backend.StatePending, backend.JobFilter{Type: "t"}, 1, other); !slices.Equal(got, []int64{p2}) {
			t.Fatalf("pending of type t, 1 before %d = %v, want [%d]", other, got, p2)
		}
		if got := list(backend.StateScheduled, backend.JobFilter{Since: time.Now().Add(30 * time.Minute)}, 0, 0); !slices.Equal(got, []int64{scheduled}) {
			t.Fatalf("scheduled due after 30 minutes = %v, want [%d]", got, scheduled)
		}
		if got := list(backend.StateScheduled, backend.JobFilter{Until: time.Now().Add(30 * time.Minute)}, 0, 0); len(got) != 0 {
			t.Fatalf("scheduled due within 30 minutes = %v, want none", got)
		}
		_, err := r.JobList(t.Context(), backend.JobListParams{State: "done"})
		wantInvalid(t, err, "state")
	})

	parallel(t, h, "PruneTurn", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		turn := func(holder string, ttl time.Duration) bool {
			ok, err := r.PruneTurn(t.Context(), holder, ttl)
			if err != nil {
				t.Fatalf("PruneTurn(%s): %v", holder, err)
			}
			return ok
		}
		// a's turn lasts 10s (it was 2s), so that b's call comes within
		// it however late a loaded machine makes it; the wait for the
		// turn to lapse below is a failure deadline.
		if !turn("a", 10*time.Second) || turn("b", time.Hour) || !turn("a", 10*time.Second) {
			t.Fatal("PruneTurn: want a to take and renew the turn and b refused meanwhile")
		}
		eventually(t, waitLimit, "b to take the turn a stopped renewing", func() bool { return turn("b", time.Hour) })
		if turn("a", time.Hour) {
			t.Fatal("PruneTurn: a took the turn b holds")
		}
	})
}

// retainer returns b's Retainer or skips the test.
func retainer(t *testing.T, b backend.Backend) backend.Retainer {
	t.Helper()
	r, ok := b.(backend.Retainer)
	if !ok {
		t.Skip("backend does not implement backend.Retainer")
	}
	return r
}

func keepDone(ref backend.JobRef) backend.Outcome {
	o := done(ref)
	o.Keep = true
	return o
}

// finishedIDs returns the job IDs of rows.
func finishedIDs(rows []*backend.FinishedJob) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
