package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// TestSharedFile: two backends on one file, as two worker processes would
// have, claim and complete concurrently; every job runs exactly once.
func TestSharedFile(t *testing.T) {
	t.Parallel()
	const jobs, batch = 2000, 25
	path := filepath.Join(t.TempDir(), "shared.db")
	a := openAt(t, path, sqlite.Options{})
	b := openAt(t, path, sqlite.Options{})
	ctx := t.Context()

	ps := make([]backend.InsertParams, jobs)
	for i := range ps {
		ps[i] = oneJob("q")[0]
	}
	if _, err := a.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := make(map[int64]int, jobs)
	var wg sync.WaitGroup
	for w := range 4 {
		be := a
		if w%2 == 1 {
			be = b
		}
		wg.Go(func() {
			for {
				rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: batch, Lease: time.Hour})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(rows) == 0 {
					return
				}
				outcomes := make([]backend.Outcome, len(rows))
				mu.Lock()
				for i, r := range rows {
					seen[r.ID]++
					outcomes[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
				}
				mu.Unlock()
				res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
				if err != nil || len(res.Stale) != 0 {
					t.Errorf("complete: %+v, %v", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("%d distinct jobs ran, want %d", len(seen), jobs)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %d was claimed %d times", id, n)
		}
	}
	if st, err := b.QueueStats(ctx); err != nil || len(st) != 0 {
		t.Fatalf("QueueStats after the drain = %+v, %v; want none", st, err)
	}
}
