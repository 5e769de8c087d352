package backendtest

import (
	"testing"

	"github.com/jobq/jobq/backend"
)

// testRelease: JobRelease gives interrupted jobs back at once, un-counting
// the attempt.
func testRelease(t *testing.T, h Harness) {
	release := func(t *testing.T, b backend.Backend, refs ...backend.JobRef) int {
		t.Helper()
		n, err := b.JobRelease(t.Context(), refs)
		if err != nil {
			t.Fatalf("JobRelease: %v", err)
		}
		return n
	}

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
		stale := backend.JobRef{ID: rows[2].ID, Attempt: 5}
		if n := release(t, b, rows[0].Ref(), rows[1].Ref(), stale); n != 2 {
			t.Fatalf("JobRelease = %d, want 2", n)
		}
		wantPendingNow(t, b, rows[0].ID, 0)
		wantPendingNow(t, b, rows[1].ID, 0)
		wantStatus(t, b, rows[2].ID, backend.StatusReserved, 1)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2, Reserved: 1})
	})
}
