package backendtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobq/jobq/backend"
)

// testReplayByType: a replay's ByType names each queue and type it moved
// once, with counts that add up to Replayed, whether it went by IDs or by
// filter over several chunks; skipped jobs are not in it.
func testReplayByType(t *testing.T, h Harness) {
	parallel(t, h, "ReplayByTypeIDs", func(t *testing.T, b backend.Backend) {
		held := job("a", "x")
		held.UniqueKey = "held"
		made := makeFailed(t, b, job("a", "x"), job("a", "y"), job("b", "x"), job("a", "x"), held, job("b", "z"))
		insertOne(t, b, held) // made[4] is skipped: a live job holds its key
		ids := []int64{made[0].JobID, made[1].JobID, made[2].JobID, made[3].JobID, made[4].JobID}
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: ids})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 4, Skipped: 1}) {
			t.Fatalf("FailedReplay(5 IDs, 1 key held) = %+v, %v; want 4 replayed, 1 skipped", res, err)
		}
		wantByType(t, res, map[backend.TypeCount]int{{Queue: "a", Type: "x"}: 2, {Queue: "a", Type: "y"}: 1, {Queue: "b", Type: "x"}: 1})

		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[4].JobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("FailedReplay(held key) = %+v, %v; want 1 skipped", res, err)
		}
		wantByType(t, res, nil)
	})

	parallel(t, h, "ReplayByTypeChunks", func(t *testing.T, b backend.Backend) {
		ctx, cancel := context.WithTimeout(t.Context(), bulkLimit)
		defer cancel()
		// Types cycle through every chunk, so a backend that reports each
		// chunk's counts without merging them names a type several times.
		// Every seventh job's key is held by a live job and skipped.
		types := []string{"t0", "t1", "t2"}
		var holders []backend.InsertParams
		want := map[backend.TypeCount]int{}
		heldT1 := 0
		ps := manyJobs("q", manyFailed, func(i int, p *backend.InsertParams) {
			p.Type = types[i%len(types)]
			p.UniqueKey = fmt.Sprintf("k%d", i)
			if i%7 == 0 {
				holder := job("live", "t")
				holder.UniqueKey = p.UniqueKey
				holders = append(holders, holder)
				if p.Type == "t1" {
					heldT1++
				}
				return
			}
			want[backend.TypeCount{Queue: "q", Type: p.Type}]++
		})
		ps = append(ps, job("other", "t0"), job("other", "t1"))
		failMany(t, b, ps...)
		insertIDs(t, b, holders...)

		res, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: manyFailed - len(holders), Skipped: len(holders)}) {
			t.Fatalf("FailedReplay(queue q) of %d, %d keys held = %+v, %v", manyFailed, len(holders), res, err)
		}
		wantByType(t, res, want)

		res, err = b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Type: "t1"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1, Skipped: heldT1}) {
			t.Fatalf("FailedReplay(type t1) = %+v, %v; want other's t1 replayed", res, err)
		}
		wantByType(t, res, map[backend.TypeCount]int{{Queue: "other", Type: "t1"}: 1})
	})
}

// wantByType asserts res.ByType holds want's counts (keys with Count 0),
// each queue and type once, adding up to res.Replayed.
func wantByType(t *testing.T, res backend.ReplayResult, want map[backend.TypeCount]int) {
	t.Helper()
	got := map[backend.TypeCount]int{}
	sum := 0
	for _, c := range res.ByType {
		k := backend.TypeCount{Queue: c.Queue, Type: c.Type}
		if _, dup := got[k]; dup {
			t.Fatalf("ByType names %s/%s twice: %+v", c.Queue, c.Type, res.ByType)
		}
		if c.Count <= 0 {
			t.Fatalf("ByType holds %s/%s with count %d: %+v", c.Queue, c.Type, c.Count, res.ByType)
		}
		got[k] = c.Count
		sum += c.Count
	}
	if sum != res.Replayed {
		t.Fatalf("ByType counts add up to %d, Replayed is %d: %+v", sum, res.Replayed, res.ByType)
	}
	if len(got) != len(want) {
		t.Fatalf("ByType = %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("ByType = %v, want %v", got, want)
		}
	}
}
