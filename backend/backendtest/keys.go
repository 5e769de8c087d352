package backendtest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testKeys: a backend.KeyController stores each job's key, gives keyed
// jobs turns so claims rotate between keys, and enforces a queue's key
// rules inside the claim: at most Limit jobs of a key reserved, ordered
// keys one at a time in ID order, and the hold, continue and halt
// policies of a head that ends badly. A backend without it refuses keyed
// jobs with ErrNotSupported. The ordered rules are in keys_order.go.
func testKeys(t *testing.T, h Harness) {
	parallel(t, h, "RefusedWithout", func(t *testing.T, b backend.Backend) {
		if _, ok := b.(backend.KeyController); ok {
			t.Skip("backend implements backend.KeyController")
		}
		if _, ok := b.(backend.Inline); ok {
			t.Skip("the sync backend runs keyed jobs at once")
		}
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("k", "t"), keyed("k", "a")})
		if !errors.Is(err, backend.ErrNotSupported) {
			t.Fatalf("insert of a keyed job = %v, want ErrNotSupported", err)
		}
		wantNoStats(t, b)
	})
	parallel(t, h, "Stored", func(t *testing.T, b backend.Backend) {
		keyCtl(t, b)
		ids := insertIDs(t, b, keyed("k", "acct-1"), job("k", "t"))
		if g := get(t, b, ids[0]); g.Key != "acct-1" || g.Turn != 1 {
			t.Fatalf("JobGet(keyed) Key %q Turn %d, want acct-1 and 1", g.Key, g.Turn)
		}
		if g := get(t, b, ids[1]); g.Key != "" || g.Turn != 0 {
			t.Fatalf("JobGet(unkeyed) Key %q Turn %d, want none and 0", g.Key, g.Turn)
		}
		rows := claim(t, b, 10, longLease, "k")
		if len(rows) != 2 || rows[0].ID != ids[1] || rows[1].Key != "acct-1" || rows[1].Turn != 1 {
			t.Fatalf("claim = %v, want the unkeyed job then the keyed one with its key and turn", keysOf(rows))
		}
		completeFresh(t, b, fail(rows[1].Ref(), "boom"), done(rows[0].Ref()))
		f := failedByJob(t, b, ids[0])
		if f.Key != "acct-1" || f.Turn != 1 {
			t.Fatalf("failed job Key %q Turn %d, want acct-1 and 1", f.Key, f.Turn)
		}
		if got := failedList(t, b, backend.FailedListParams{Filter: backend.FailedFilter{Key: "other"}}); len(got) != 0 {
			t.Fatalf("FailedList(key other) = %d jobs, want 0", len(got))
		}
		if got := failedList(t, b, backend.FailedListParams{Filter: backend.FailedFilter{Key: "acct-1"}}); len(got) != 1 {
			t.Fatalf("FailedList(key acct-1) = %d jobs, want 1", len(got))
		}
		replay(t, b, backend.FailedReplayParams{Filter: backend.FailedFilter{Key: "acct-1"}}, 1)
		if g := get(t, b, ids[0]); g.Key != "acct-1" || g.Turn != 1 {
			t.Fatalf("replayed job Key %q Turn %d, want acct-1 and 1", g.Key, g.Turn)
		}
		if r, ok := b.(backend.Retainer); ok {
			list := func(key string) []*backend.JobRow {
				rows, err := r.JobList(t.Context(), backend.JobListParams{State: backend.StatePending, Filter: backend.JobFilter{Key: key}})
				if err != nil {
					t.Fatalf("JobList(key %q): %v", key, err)
				}
				return rows
			}
			if got := list("acct-1"); len(got) != 1 || got[0].ID != ids[0] || got[0].Key != "acct-1" {
				t.Fatalf("JobList(key acct-1) = %v, want job %d", keysOf(got), ids[0])
			}
			if got := list("nobody"); len(got) != 0 {
				t.Fatalf("JobList(key nobody) = %v, want none", keysOf(got))
			}
		}
		if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{keyed("k", "bad\x00key")}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("insert with a NUL in its key = %v, want ErrInvalidInput", err)
		}
	})
	parallel(t, h, "Turns", func(t *testing.T, b backend.Backend) {
		keyCtl(t, b)
		// One key queues 50 jobs first, then ten keys queue 3 each: the
		// small keys' jobs join the round being worked, so they are all
		// claimed long before the big key's backlog.
		var big []backend.InsertParams
		for range 50 {
			big = append(big, keyed("r", "big"))
		}
		bigIDs := insertIDs(t, b, big...)
		for i, id := range bigIDs {
			if g := get(t, b, id); g.Turn != int64(i+1) {
				t.Fatalf("big job %d has turn %d, want %d", i, g.Turn, i+1)
			}
		}
		small := map[int64]bool{}
		for k := range 10 {
			key := fmt.Sprintf("small-%d", k)
			for i, id := range insertIDs(t, b, keyed("r", key), keyed("r", key), keyed("r", key)) {
				small[id] = true
				if g := get(t, b, id); g.Turn != int64(i+2) {
					t.Fatalf("%s job %d has turn %d, want %d (one past the lowest pending turn, 1)", key, i, g.Turn, i+2)
				}
			}
		}
		var order []*backend.JobRow
		for range 80 {
			r := claimOne(t, b, "r")
			order = append(order, r)
			completeFresh(t, b, done(r.Ref()))
		}
		for i, r := range order {
			if i >= 34 && small[r.ID] {
				t.Fatalf("a small key's job was claimed %dth, want every one within the first 34 (a round each): %v", i+1, keysOf(order))
			}
		}
		if !slices.IsSortedFunc(order, backend.CompareClaimOrder) {
			t.Fatalf("claims are not in claim order (priority, turn, due time, ID): %v", keysOf(order))
		}
	})
	parallel(t, h, "TurnsAndPriority", func(t *testing.T, b backend.Backend) {
		keyCtl(t, b)
		hi := keyed("p", "a")
		hi.Priority = 5
		in := insertIDs(t, b, keyed("p", "a"), keyed("p", "b"), job("p", "t"), hi)
		rows := claim(t, b, 10, longLease, "p")
		// Priority first (a's second job); at one priority the unkeyed job
		// (turn 0), then by turn: a's first (1), b's first (2: the round
		// after the lowest pending turn).
		if want := []int64{in[3], in[2], in[0], in[1]}; !slices.Equal(ids(rows), want) {
			t.Fatalf("claim order %v, want %v (priority, turn 0 for no key, turn, ID)", keysOf(rows), want)
		}
	})
	parallel(t, h, "Limit", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "l", backend.KeyRules{Limit: 2})
		a := insertIDs(t, b, keyed("l", "a"), keyed("l", "a"), keyed("l", "a"), keyed("l", "a"), keyed("l", "b"), job("l", "t"), job("l", "t"))
		rows := claim(t, b, 100, longLease, "l")
		if got := countKeys(rows); got["a"] != 2 || got["b"] != 1 || got[""] != 2 {
			t.Fatalf("first claim took %v, want 2 of a, 1 of b and both unkeyed", got)
		}
		claimNone(t, b, "l")
		held := byKey(rows, "a")
		// A retry frees the slot at once, and so does a release, a done,
		// a failure; each lets exactly one more of a in.
		completeFresh(t, b, retry(held[0].Ref(), time.Hour, "later"))
		next := claim(t, b, 100, longLease, "l")
		if got := countKeys(next); got["a"] != 1 || len(next) != 1 {
			t.Fatalf("after a retry, claim took %v, want 1 of a", got)
		}
		claimNone(t, b, "l")
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{next[0].Ref()}); err != nil {
			t.Fatalf("JobRelease: %v", err)
		}
		again := claimOne(t, b, "l")
		if again.Key != "a" {
			t.Fatalf("after a release, claimed key %q, want a", again.Key)
		}
		claimNone(t, b, "l")
		completeFresh(t, b, done(held[1].Ref()))
		last := claimOne(t, b, "l")
		if last.Key != "a" || !slices.Contains(a[:4], last.ID) {
			t.Fatalf("after a done, claimed %v, want the last job of a", keysOf([]*backend.JobRow{last}))
		}
		claimNone(t, b, "l")
		// Rules changed: a looser limit lets more in at once.
		completeFresh(t, b, done(last.Ref()), done(again.Ref()))
		setKeys(t, c, "l", backend.KeyRules{})
		wantKeyInfo(t, c, backend.KeyListParams{Queue: "l"}, "a", 1, 0, 0, false)
	})
	parallel(t, h, "LimitAcrossClaimers", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "c", backend.KeyRules{Limit: 3})
		var ps []backend.InsertParams
		for i := range 120 {
			ps = append(ps, keyed("c", fmt.Sprintf("k%d", i%4)))
		}
		insertIDs(t, b, ps...)
		// Eight claimers race; each holds what it claimed while counting
		// what every claimer holds per key, then completes it.
		var mu sync.Mutex
		running := map[string]int{}
		var worst, total int
		deadline := time.Now().Add(waitLimit)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for {
					rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"c"}, Max: 5, Lease: longLease})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if len(rows) == 0 && (total == 120 || time.Now().After(deadline)) {
						mu.Unlock()
						return
					}
					for _, r := range rows {
						running[r.Key]++
						worst = max(worst, running[r.Key])
					}
					total += len(rows)
					mu.Unlock()
					var outs []backend.Outcome
					for _, r := range rows {
						outs = append(outs, done(r.Ref()))
					}
					// Counted down before the completion: a claim racing
					// with it may then see the slot still taken, never
					// the other way round.
					mu.Lock()
					for _, r := range rows {
						running[r.Key]--
					}
					mu.Unlock()
					if len(outs) > 0 {
						if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("claimer: %v", err)
		}
		if total != 120 {
			t.Fatalf("claimers took %d of 120 jobs before the deadline", total)
		}
		if worst > 3 {
			t.Fatalf("%d jobs of one key were held at once, want at most the limit, 3", worst)
		}
	})
	parallel(t, h, "LimitLease", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "s", backend.KeyRules{Limit: 1})
		ids := insertIDs(t, b, keyed("s", "a"), keyed("s", "a"))
		first := claim(t, b, 10, shortLease, "s")
		if len(first) != 1 || first[0].ID != ids[0] {
			t.Fatalf("claim = %v, want only the first job of a", keysOf(first))
		}
		// The holder is gone: its slot stays taken until the sweep
		// rescues the job, never before.
		time.Sleep(2 * shortLease)
		claimNone(t, b, "s")
		eventually(t, waitLimit, "the sweep to rescue the expired holder", func() bool {
			res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
			if err != nil {
				t.Fatalf("LeaseSweep: %v", err)
			}
			return res.Rescued == 1
		})
		second := claimOne(t, b, "s")
		if second.Key != "a" {
			t.Fatalf("after the sweep claimed %q, want a job of a", second.Key)
		}
		// The stale holder's outcome frees nothing: the new holder keeps
		// the key's only slot.
		res := complete(t, b, done(first[0].Ref()))
		if len(res.Stale) != 1 {
			t.Fatalf("stale holder's done = %+v, want it stale", res)
		}
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{first[0].Ref()}); err != nil {
			t.Fatalf("stale JobRelease: %v", err)
		}
		claimNone(t, b, "s")
		completeFresh(t, b, done(second.Ref()))
		third := claimOne(t, b, "s")
		if third.Key != "a" || third.ID == second.ID {
			t.Fatalf("after the holder's done claimed %v, want the other job of a", keysOf([]*backend.JobRow{third}))
		}
	})
	parallel(t, h, "Settings", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		qc, ok := b.(backend.QueueController)
		if !ok {
			t.Fatal("a KeyController must be a QueueController: key rules are listed with the queue's settings")
		}
		for _, bad := range []backend.KeyRules{
			{Limit: -1},
			{Limit: backend.MaxKeyLimit + 1},
			{Ordered: true, Limit: 2},
			{OnFailure: backend.KeyHalt},
			{Ordered: true, OnFailure: "skip"},
		} {
			if err := c.QueueSetKeys(t.Context(), "q", bad); !errors.Is(err, backend.ErrInvalidInput) {
				t.Fatalf("QueueSetKeys(%+v) = %v, want ErrInvalidInput", bad, err)
			}
		}
		if err := c.QueueSetKeys(t.Context(), "bad queue!", backend.KeyRules{Limit: 1}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("QueueSetKeys(bad queue) = %v, want ErrInvalidInput", err)
		}
		if s, err := qc.QueueSettingsList(t.Context()); err != nil || len(s) != 0 {
			t.Fatalf("after refused rules, QueueSettingsList = %+v, %v; want none", s, err)
		}
		setKeys(t, c, "q", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt})
		if err := qc.QueuePause(t.Context(), "q", true); err != nil {
			t.Fatal(err)
		}
		if err := qc.QueueSetLimits(t.Context(), "q", backend.QueueLimits{Concurrency: 4}); err != nil {
			t.Fatal(err)
		}
		want := []backend.QueueSettings{{Queue: "q", Paused: true, QueueLimits: backend.QueueLimits{Concurrency: 4}, Keys: backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt}}}
		if s, err := qc.QueueSettingsList(t.Context()); err != nil || !slices.Equal(s, want) {
			t.Fatalf("QueueSettingsList = %+v, %v; want %+v", s, err, want)
		}
		setKeys(t, c, "q", backend.KeyRules{Limit: 3})
		if err := qc.QueuePause(t.Context(), "q", false); err != nil {
			t.Fatal(err)
		}
		if err := qc.QueueSetLimits(t.Context(), "q", backend.QueueLimits{}); err != nil {
			t.Fatal(err)
		}
		want = []backend.QueueSettings{{Queue: "q", Keys: backend.KeyRules{Limit: 3}}}
		if s, err := qc.QueueSettingsList(t.Context()); err != nil || !slices.Equal(s, want) {
			t.Fatalf("QueueSettingsList = %+v, %v; want %+v", s, err, want)
		}
		setKeys(t, c, "q", backend.KeyRules{})
		if s, err := qc.QueueSettingsList(t.Context()); err != nil || len(s) != 0 {
			t.Fatalf("after clearing, QueueSettingsList = %+v, %v; want none", s, err)
		}
	})
	parallel(t, h, "List", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "o", backend.KeyRules{Ordered: true})
		in := insertIDs(t, b, keyed("o", "x"), keyed("o", "x"), keyed("o", "y"), keyed("m", "x"), keyed("m", "x"), keyed("m", "x"), job("o", "t"))
		r := claim(t, b, 10, longLease, "o")
		if got := countKeys(r); got["x"] != 1 || got["y"] != 1 {
			t.Fatalf("claim = %v, want one job of each ordered key", got)
		}
		completeFresh(t, b, fail(byKey(r, "y")[0].Ref(), "boom"))
		list, err := c.KeyList(t.Context(), backend.KeyListParams{})
		if err != nil {
			t.Fatalf("KeyList: %v", err)
		}
		want := []backend.KeyInfo{
			{Queue: "m", Key: "x", Pending: 3},
			{Queue: "o", Key: "x", Pending: 1, Reserved: 1},
			{Queue: "o", Key: "y", Failed: 1, Held: true, HeadID: in[2]},
		}
		if len(list) == 3 {
			// When it failed: the Hold test checks it is the head's FailedAt.
			want[2].HeldSince = list[2].HeldSince
		}
		if !slices.Equal(list, want) || want[2].HeldSince.IsZero() {
			t.Fatalf("KeyList = %+v, want %+v", list, want)
		}
		if held := keyList(t, c, backend.KeyListParams{Held: true}); len(held) != 1 || held[0].Key != "y" {
			t.Fatalf("KeyList(held) = %+v, want only key y", held)
		}
		if m := keyList(t, c, backend.KeyListParams{Queue: "m"}); len(m) != 1 || m[0].Queue != "m" {
			t.Fatalf("KeyList(queue m) = %+v, want only queue m's key", m)
		}
		if one := keyList(t, c, backend.KeyListParams{Limit: 1}); len(one) != 1 || one[0] != want[0] {
			t.Fatalf("KeyList(limit 1) = %+v, want the busiest key", one)
		}
		if _, err := c.KeyList(t.Context(), backend.KeyListParams{Limit: -1}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("KeyList(limit -1) = %v, want ErrInvalidInput", err)
		}
	})
	testKeysOrdered(t, h)
	testKeysInteract(t, h)
}

// keyed returns insert params for a job of queue with key.
func keyed(queue, key string) backend.InsertParams {
	p := job(queue, "t")
	p.Key = key
	return p
}

// keyCtl returns b's KeyController or skips the test.
func keyCtl(t *testing.T, b backend.Backend) backend.KeyController {
	t.Helper()
	c, ok := b.(backend.KeyController)
	if !ok {
		t.Skip("backend does not implement backend.KeyController")
	}
	return c
}

func setKeys(t *testing.T, c backend.KeyController, queue string, r backend.KeyRules) {
	t.Helper()
	if err := c.QueueSetKeys(t.Context(), queue, r); err != nil {
		t.Fatalf("QueueSetKeys(%s, %+v): %v", queue, r, err)
	}
}

func keyList(t *testing.T, c backend.KeyController, p backend.KeyListParams) []backend.KeyInfo {
	t.Helper()
	list, err := c.KeyList(t.Context(), p)
	if err != nil {
		t.Fatalf("KeyList(%+v): %v", p, err)
	}
	return list
}

// wantKeyInfo asserts what KeyList says of one key.
func wantKeyInfo(t *testing.T, c backend.KeyController, p backend.KeyListParams, key string, pending, reserved, failed int64, held bool) backend.KeyInfo {
	t.Helper()
	for _, k := range keyList(t, c, p) {
		if k.Key != key {
			continue
		}
		if k.Pending != pending || k.Reserved != reserved || k.Failed != failed || k.Held != held {
			t.Fatalf("KeyList says of %s %+v; want pending %d, reserved %d, failed %d, held %v", key, k, pending, reserved, failed, held)
		}
		return k
	}
	if pending+reserved+failed != 0 {
		t.Fatalf("KeyList does not list key %s", key)
	}
	return backend.KeyInfo{}
}

func replay(t *testing.T, b backend.Backend, p backend.FailedReplayParams, want int) {
	t.Helper()
	res, err := b.FailedReplay(t.Context(), p)
	if err != nil || res.Replayed != want {
		t.Fatalf("FailedReplay(%+v) = %+v, %v; want %d replayed", p, res, err, want)
	}
}

func countKeys(rows []*backend.JobRow) map[string]int {
	m := map[string]int{}
	for _, r := range rows {
		m[r.Key]++
	}
	return m
}

func byKey(rows []*backend.JobRow, key string) []*backend.JobRow {
	var out []*backend.JobRow
	for _, r := range rows {
		if r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// keysOf shows rows as id:key/turn for failure messages.
func keysOf(rows []*backend.JobRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%d:%s/%d", r.ID, r.Key, r.Turn)
	}
	return out
}
