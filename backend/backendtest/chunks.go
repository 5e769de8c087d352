package backendtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// manyFailed is more failed jobs than two chunks of a replay or purge by
// filter hold, so a backend must loop over chunks and carry what it counts.
const manyFailed = 2*backend.ChunkSize + 5

// bulkLimit bounds one bulk replay or purge, so a backend whose chunk loop
// never ends fails the test instead of hanging the suite. It is far above
// the few seconds a bulk call takes alone: under -race, with the whole
// suite and another package's tests sharing two cores, one took over a
// minute.
const bulkLimit = 3 * time.Minute

// failMany inserts ps in one batch, claims them all and fails them in one
// JobComplete, and returns their failed rows in ascending failed-ID order.
// The backend must hold no other pending job in ps's queues.
func failMany(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []*backend.FailedJob {
	t.Helper()
	ids := insertIDs(t, b, ps...)
	queues := map[string]bool{}
	for _, p := range ps {
		queues[p.Queue] = true
	}
	var outs []backend.Outcome
	for len(outs) < len(ps) {
		rows := claim(t, b, len(ps), longLease, slices.Sorted(maps.Keys(queues))...)
		if len(rows) == 0 {
			t.Fatalf("failMany: claimed %d of %d jobs", len(outs), len(ps))
		}
		for _, r := range rows {
			outs = append(outs, fail(r.Ref(), "boom"))
		}
	}
	completeFresh(t, b, outs...)
	inserted := make(map[int64]bool, len(ids))
	for _, id := range ids {
		inserted[id] = true
	}
	var made []*backend.FailedJob
	for _, f := range failedList(t, b, backend.FailedListParams{Limit: 10 * manyFailed}) {
		if inserted[f.JobID] {
			made = append(made, f)
			delete(inserted, f.JobID)
		}
	}
	if len(made) != len(ps) {
		t.Fatalf("failMany: %d failed rows for %d jobs", len(made), len(ps))
	}
	slices.Reverse(made)
	return made
}

// manyJobs returns n jobs of queue, each made by edit(i, &p) from job(queue, "t").
func manyJobs(queue string, n int, edit func(i int, p *backend.InsertParams)) []backend.InsertParams {
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = job(queue, "t")
		if edit != nil {
			edit(i, &ps[i])
		}
	}
	return ps
}

// leftFailed returns the IDs of every failed row, newest first.
func leftFailed(t *testing.T, b backend.Backend) []int64 {
	t.Helper()
	return failedIDs(failedList(t, b, backend.FailedListParams{Limit: 10 * manyFailed}))
}

// testChunks: replay and purge by filter over more jobs than one chunk
// holds: every match handled once, counts exact, skips counted once,
// KeepNewest counted over all chunks, other queues untouched. One backend
// serves the three steps, so the thousands of jobs are made once.
func testChunks(t *testing.T, h Harness) {
	parallel(t, h, "ReplayAndPurge", func(t *testing.T, b backend.Backend) {
		ctx, cancel := context.WithTimeout(t.Context(), bulkLimit)
		defer cancel()
		made := failMany(t, b, manyJobs("q", manyFailed, func(i int, p *backend.InsertParams) {
			p.UniqueKey = fmt.Sprintf("k%d", i)
		})...)
		// other's rows are the newest of all: keeping the newest over every
		// queue instead of the filtered one keeps the wrong rows.
		others := failMany(t, b, manyJobs("other", 3, nil)...)

		// 1. KeepNewest over more than a chunk, deleting more than a chunk:
		// keeping KeepNewest per chunk, or deleting one chunk only, gets
		// the count wrong.
		keep := backend.ChunkSize + 3
		n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "q"}, KeepNewest: keep})
		if err != nil || n != manyFailed-keep {
			t.Fatalf("FailedPurge(queue q, keep %d) of %d = %d, %v; want %d", keep, manyFailed, n, err, manyFailed-keep)
		}
		made = made[len(made)-keep:]
		want := failedIDs(append(slices.Clone(made), others...))
		slices.Reverse(want)
		if got := leftFailed(t, b); !slices.Equal(got, want) {
			t.Fatalf("%d failed rows left, want q's %d newest and other's 3", len(got), keep)
		}

		// 2. Replay by filter with the keys of the oldest ChunkSize rows
		// held by live jobs, so a whole chunk is skipped: a loop that
		// re-reads the first chunk, or stops at a chunk that replayed
		// nothing, gets the counts wrong.
		held := backend.ChunkSize
		var holders []backend.InsertParams
		for _, f := range made[:held] {
			p := job("live", "t")
			p.UniqueKey = f.UniqueKey
			holders = append(holders, p)
		}
		insertIDs(t, b, holders...)
		res, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: keep - held, Skipped: held}) {
			t.Fatalf("FailedReplay(queue q) of %d with %d keys held = %+v, %v; want %d replayed, %d skipped",
				keep, held, res, err, keep-held, held)
		}
		want = failedIDs(append(slices.Clone(made[:held]), others...))
		slices.Reverse(want)
		if got := leftFailed(t, b); !slices.Equal(got, want) {
			t.Fatalf("%d failed rows left, want the %d skipped and other's 3", len(got), held)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: int64(keep - held), Failed: int64(held)})
		var wantJobs []int64
		for _, f := range made[held:] {
			wantJobs = append(wantJobs, f.JobID)
		}
		if got := sortedIDs(claim(t, b, 10*manyFailed, longLease, "q")); !slices.Equal(got, wantJobs) {
			t.Fatalf("claimed replayed jobs %v, want %v (those whose keys were free)", got, wantJobs)
		}
		// Again: nothing to replay, the same skips counted once.
		res, err = b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Skipped: held}) {
			t.Fatalf("second FailedReplay(queue q) = %+v, %v; want %d skipped", res, err, held)
		}

		// 3. Purge by filter of more than a chunk.
		n, err = b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{Type: "t"}})
		if err != nil || n != held+len(others) {
			t.Fatalf("FailedPurge(type t) = %d, %v; want %d", n, err, held+len(others))
		}
		if got := leftFailed(t, b); len(got) != 0 {
			t.Fatalf("%d failed rows left after purging them all", len(got))
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: int64(keep - held)})
		wantStats(t, b, backend.QueueStats{Queue: "other"})
	})
}
