package backendtest

import (
	"slices"
	"testing"

	"github.com/jobq/jobq/backend"
)

// release calls JobRelease and returns how many refs it gave back: those
// neither stale nor ended cancelled.
func release(t *testing.T, b backend.Backend, refs ...backend.JobRef) int {
	t.Helper()
	res := releaseRes(t, b, refs...)
	return len(refs) - len(res.Stale) - len(res.Cancelled)
}

// releaseRes calls JobRelease and returns its result.
func releaseRes(t *testing.T, b backend.Backend, refs ...backend.JobRef) backend.CompleteResult {
	t.Helper()
	res, err := b.JobRelease(t.Context(), refs)
	if err != nil {
		t.Fatalf("JobRelease: %v", err)
	}
	return res
}

// freeReleases claims the pending job id from queue and releases it until
// it has used every free release, checking each: the claimed row carries
// the Releases so far, and the release puts the attempts back, counts
// Releases up and leaves the job pending now.
func freeReleases(t *testing.T, b backend.Backend, queue string, id int64) {
	t.Helper()
	releases := get(t, b, id).Releases
	if releases >= backend.MaxFreeReleases {
		t.Fatalf("job %d has Releases %d: no free release left", id, releases)
	}
	for releases < backend.MaxFreeReleases {
		r := claimOne(t, b, queue)
		if r.ID != id || r.Releases != releases {
			t.Fatalf("claimed job %d with Releases %d, want job %d with %d", r.ID, r.Releases, id, releases)
		}
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		releases++
		if row := wantPendingNow(t, b, id, r.Attempts-1); row.Releases != releases {
			t.Fatalf("job %d: Releases %d after a free release, want %d", id, row.Releases, releases)
		}
	}
}

// testRelease: JobRelease gives interrupted jobs back at once, un-counting
// the attempt MaxFreeReleases times; after that a release counts it.
func testRelease(t *testing.T, h Harness) {

	parallel(t, h, "BackToPendingUncounted", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		r := claimOne(t, b, "q")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		wantPendingNow(t, b, id, 0)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		if again := claimOne(t, b, "q"); again.ID != id || again.Attempts != 1 {
			t.Fatalf("claim after release: job %d attempts %d, want job %d attempts 1", again.ID, again.Attempts, id)
		}
	})

	parallel(t, h, "KeepsEarlierAttempts", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), 0, "first try"))
		r := claimOne(t, b, "q")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease = %d, want 1", n)
		}
		wantPendingNow(t, b, id, 1)
	})

	parallel(t, h, "Batch", func(t *testing.T, b backend.Backend) {
		insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"))
		rows := claim(t, b, 3, longLease, "q")
		if len(rows) != 3 {
			t.Fatalf("claim got %d jobs, want 3", len(rows))
		}
		stale := rows[2].Ref()
		stale.Token++
		// A stale claim of a job released in the same call is still
		// stale: refs are told apart by (ID, token), not by ID, and not
		// by (ID, attempt) either.
		twin := rows[0].Ref()
		twin.Token++
		res := releaseRes(t, b, rows[0].Ref(), stale, twin, rows[1].Ref())
		if !slices.Equal(res.Stale, []backend.JobRef{stale, twin}) || len(res.Cancelled) != 0 {
			t.Fatalf("JobRelease = %+v, want Stale [%v %v] alone", res, stale, twin)
		}
		wantPendingNow(t, b, rows[0].ID, 0)
		wantPendingNow(t, b, rows[1].ID, 0)
		wantStatus(t, b, rows[2].ID, backend.StateReserved, 1)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2, Reserved: 1})
	})

	parallel(t, h, "FreeReleasesCount", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, job("q", "t"))
		if r := get(t, b, id); r.Releases != 0 {
			t.Fatalf("new job: Releases %d, want 0", r.Releases)
		}
		freeReleases(t, b, "q", id)
		if row := get(t, b, id); row.LastError != "" {
			t.Errorf("LastError %q after free releases, want none", row.LastError)
		}
		r := claimOne(t, b, "q")
		if r.Attempts != 1 || r.Releases != backend.MaxFreeReleases {
			t.Fatalf("claim after %d free releases: attempts %d releases %d, want 1 and %d", backend.MaxFreeReleases, r.Attempts, r.Releases, backend.MaxFreeReleases)
		}
	})

	parallel(t, h, "CountedAfterFree", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.MaxAttempts = 3
		id := insertOne(t, b, p)
		freeReleases(t, b, "q", id)
		r := claimOne(t, b, "q")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("counted JobRelease = %d, want 1", n)
		}
		row := wantPendingNow(t, b, id, 1)
		if row.Releases != backend.MaxFreeReleases+1 || row.LastError != backend.ReleasedError {
			t.Fatalf("after a counted release: releases %d last error %q, want %d and %q", row.Releases, row.LastError, backend.MaxFreeReleases+1, backend.ReleasedError)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		r = claimOne(t, b, "q")
		if r.ID != id || r.Attempts != 2 || r.LastError != backend.ReleasedError {
			t.Fatalf("claim after a counted release: job %d attempts %d last error %q, want job %d attempts 2 %q", r.ID, r.Attempts, r.LastError, id, backend.ReleasedError)
		}
		// Every release from now on counts.
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("second counted JobRelease = %d, want 1", n)
		}
		if row := wantPendingNow(t, b, id, 2); row.Releases != backend.MaxFreeReleases+2 {
			t.Fatalf("releases %d, want %d", row.Releases, backend.MaxFreeReleases+2)
		}
	})

	parallel(t, h, "CountedSpendsLastAttempt", func(t *testing.T, b backend.Backend) {
		p := withMetadata("q", "t", traced())
		p.MaxAttempts = 1
		p.UniqueKey = "k"
		id := insertOne(t, b, p)
		freeReleases(t, b, "q", id)
		r := claimOne(t, b, "q")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease of the last attempt = %d, want 1", n)
		}
		gone(t, b, id)
		f := failedByJob(t, b, id)
		if f.Error != backend.ReleasedError || f.Attempts != 1 || f.MaxAttempts != 1 || f.UniqueKey != "k" {
			t.Fatalf("failed row error %q attempts %d max %d key %q; want %q 1 1 %q", f.Error, f.Attempts, f.MaxAttempts, f.UniqueKey, backend.ReleasedError, "k")
		}
		wantMetadata(t, "failed row of a released job", f.Metadata, traced())
		wantStats(t, b, backend.QueueStats{Queue: "q", Failed: 1})
		claimNone(t, b, "q")
		// The failed job freed its unique key.
		if res := insert(t, b, p); res[0].Duplicate {
			t.Fatalf("unique key still held by job %d after it failed", res[0].ID)
		}
	})

	parallel(t, h, "BatchCountsEachJob", func(t *testing.T, b backend.Backend) {
		// One batch: a job on its first release, one past its free
		// releases with attempts left, one on its last attempt.
		fresh := insertOne(t, b, job("q", "fresh"))
		r0 := claimOne(t, b, "q")
		left := job("q2", "left")
		left.MaxAttempts = 2
		leftID := insertOne(t, b, left)
		freeReleases(t, b, "q2", leftID)
		last := job("q3", "last")
		last.MaxAttempts = 1
		lastID := insertOne(t, b, last)
		freeReleases(t, b, "q3", lastID)
		r1, r2 := claimOne(t, b, "q2"), claimOne(t, b, "q3")
		if n := release(t, b, r1.Ref(), r2.Ref(), r0.Ref()); n != 3 {
			t.Fatalf("JobRelease = %d, want 3", n)
		}
		if row := wantPendingNow(t, b, fresh, 0); row.Releases != 1 || row.LastError != "" {
			t.Errorf("first release: releases %d last error %q, want 1 and none", row.Releases, row.LastError)
		}
		if row := wantPendingNow(t, b, leftID, 1); row.Releases != backend.MaxFreeReleases+1 || row.LastError != backend.ReleasedError {
			t.Errorf("counted release: releases %d last error %q, want %d %q", row.Releases, row.LastError, backend.MaxFreeReleases+1, backend.ReleasedError)
		}
		gone(t, b, lastID)
		if f := failedByJob(t, b, lastID); f.Error != backend.ReleasedError {
			t.Errorf("failed row error %q, want %q", f.Error, backend.ReleasedError)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q3", Failed: 1})
	})

	parallel(t, h, "ReplayResetsReleases", func(t *testing.T, b backend.Backend) {
		// One job replayed by ID, one by filter: both start over.
		var failed []*backend.FailedJob
		for _, queue := range []string{"a", "b"} {
			p := job(queue, "t")
			p.MaxAttempts = 1
			id := insertOne(t, b, p)
			freeReleases(t, b, queue, id)
			if n := release(t, b, claimOne(t, b, queue).Ref()); n != 1 {
				t.Fatalf("JobRelease = %d, want 1", n)
			}
			failed = append(failed, failedByJob(t, b, id))
		}
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{failed[0].JobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay(ids) = %+v, %v; want 1 replayed", res, err)
		}
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "b"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay(queue b) = %+v, %v; want 1 replayed", res, err)
		}
		for _, f := range failed {
			if row := wantPendingNow(t, b, f.JobID, 0); row.Releases != 0 {
				t.Fatalf("replayed job %d: Releases %d, want 0", f.JobID, row.Releases)
			}
			// Its releases are free again.
			freeReleases(t, b, f.Queue, f.JobID)
		}
	})
}
