package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestFakeClock: every time the backend stores or compares comes from
// Options.Now, so a test can move time without sleeping.
func TestFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &fakeClock{now: start}
	b, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	claimQ := func(lease time.Duration) []*backend.JobRow {
		t.Helper()
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	p := oneJob("q")
	p[0].Delay = time.Hour
	p[0].MaxAttempts = 2
	res, err := b.JobInsertMany(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].ID
	row, err := b.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !row.CreatedAt.Equal(start) || !row.AvailableAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("CreatedAt %v AvailableAt %v, want %v and an hour later", row.CreatedAt, row.AvailableAt, start)
	}
	if rows := claimQ(time.Minute); len(rows) != 0 {
		t.Fatalf("claimed a job due in an hour")
	}
	if st, _ := b.QueueStats(ctx); len(st) != 1 || st[0].Scheduled != 1 || st[0].Pending != 0 {
		t.Fatalf("QueueStats = %+v, want one scheduled", st)
	}

	clock.Advance(time.Hour)
	rows := claimQ(time.Minute)
	if len(rows) != 1 || !rows[0].ReservedAt.Equal(clock.Now()) || !rows[0].LeaseUntil.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("claim after the delay = %+v", rows)
	}

	// The lease runs out only on the fake clock.
	if r, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil || r.Rescued+r.Failed != 0 || len(r.Jobs) != 0 {
		t.Fatalf("sweep before expiry = %+v, %v", r, err)
	}
	clock.Advance(2 * time.Minute)
	if r, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil || r.Rescued != 1 {
		t.Fatalf("sweep after expiry = %+v, %v; want 1 rescued", r, err)
	}
	row, err = b.JobGet(ctx, id)
	if err != nil || row.Status != backend.StatePending || !row.AvailableAt.Equal(clock.Now()) || row.LastError != "lease expired" {
		t.Fatalf("rescued job = %+v, %v", row, err)
	}

	// Second and last attempt expires too: to failed_jobs at the fake time.
	if rows := claimQ(time.Minute); len(rows) != 1 || rows[0].Attempts != 2 {
		t.Fatalf("second claim = %+v", rows)
	}
	clock.Advance(time.Hour)
	if r, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil || r.Failed != 1 {
		t.Fatalf("final sweep = %+v, %v; want 1 failed", r, err)
	}
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(failed) != 1 {
		t.Fatalf("FailedList = %v, %v", failed, err)
	}
	f := failed[0]
	if f.JobID != id || !f.FailedAt.Equal(clock.Now()) || !f.CreatedAt.Equal(start) || f.Error != "lease expired" || f.Attempts != 2 {
		t.Fatalf("failed job = %+v", f)
	}
	before := clock.Now()
	clock.Advance(time.Second)
	if n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{FailedBefore: before}}); err != nil || n != 0 {
		t.Fatalf("purge failed before its failure time = %d, %v; want 0", n, err)
	}
	if n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{FailedBefore: clock.Now()}}); err != nil || n != 1 {
		t.Fatalf("purge failed before now = %d, %v; want 1", n, err)
	}
}
