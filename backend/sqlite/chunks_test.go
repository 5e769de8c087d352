package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// bulkChunks is how many chunks the bulk operations of these tests take:
// the writer they let in must find chunks still to come.
const bulkChunks = 3

// openSeeded opens a fresh backend whose failed_jobs holds n rows of queue
// "q", failed IDs and job IDs 1..n; the first has unique key "first", the
// last "last". New jobs get IDs above n, as if those n had been enqueued.
func openSeeded(t *testing.T, n int) *Backend {
	t.Helper()
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, seed := range []string{
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO failed_jobs (job_id, queue, type, payload, attempts, max_attempts, priority, error, unique_key, created_at, failed_at)
SELECT i, 'q', 't', '{}', 1, 1, 0, 'boom', CASE i WHEN 1 THEN 'first' WHEN ?1 THEN 'last' END, 0, 0 FROM n`,
		`INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?1)`,
	} {
		if _, err := b.w.ExecContext(t.Context(), seed, n); err != nil {
			t.Fatalf("seed %d failed jobs: %v", n, err)
		}
	}
	return b
}

// whileBulk runs bulk (a replay or purge of bulkChunks chunks) and, as
// soon as its first chunk runs, write in another goroutine. The write
// connection is held until bulk waits for it, so bulk's first chunk goes
// before write; write asks for the connection while that chunk runs. A
// bulk operation that lets writers in between chunks serves write after
// its first chunk (or, on a slow machine, a later one, with chunks still to
// come); one that holds the write lock throughout serves it after the last.
func whileBulk(t *testing.T, b *Backend, bulk func(context.Context) error, write func(context.Context) error) {
	t.Helper()
	// A bound against a hang only (see backendtest's bulkLimit): on two
	// shared cores under -race a bulk call alone has taken a minute.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Prepared now: preparing later would take the write connection
	// between bulk's steps.
	if _, err := b.statements(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := b.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waits := b.w.Stats().WaitCount
	bulkDone := make(chan error, 1)
	go func() { bulkDone <- bulk(ctx) }()
	for b.w.Stats().WaitCount == waits {
		if ctx.Err() != nil {
			_ = held.Close()
			t.Fatal("bulk operation never asked for the write connection")
		}
		time.Sleep(time.Millisecond)
	}
	_ = held.Close() // to bulk, the only one waiting
	writeDone := make(chan error, 1)
	go func() { writeDone <- write(ctx) }()
	if err := <-writeDone; err != nil {
		t.Errorf("write during the bulk operation: %v", err)
	}
	if err := <-bulkDone; err != nil {
		t.Fatalf("bulk operation: %v", err)
	}
}

// TestReplayByFilterLetsWritersIn: a replay by filter releases the write
// lock between chunks, so an enqueue issued while it runs commits between
// two of them instead of waiting for the whole replay. The enqueue carries
// the unique keys of the first and the last replayed job: the first is
// already live again (its chunk committed), the last not yet.
func TestReplayByFilterLetsWritersIn(t *testing.T) {
	t.Parallel()
	const n = bulkChunks * backend.ChunkSize
	b := openSeeded(t, n)

	var replayed backend.ReplayResult
	var inserted []backend.InsertResult
	whileBulk(t, b, func(ctx context.Context) error {
		var err error
		replayed, err = b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}})
		return err
	}, func(ctx context.Context) error {
		ps := []backend.InsertParams{
			{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: "first"},
			{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: "last"},
		}
		var err error
		inserted, err = b.JobInsertMany(ctx, ps)
		return err
	})
	if len(inserted) != 2 || !inserted[0].Duplicate || inserted[0].ID != 1 || inserted[1].Duplicate {
		t.Fatalf("enqueue during the replay = %+v; want key \"first\" held by replayed job 1 and key \"last\" still free: "+
			"the enqueue must commit between two chunks", inserted)
	}
	if replayed.Replayed != n-1 || replayed.Skipped != 1 {
		t.Fatalf("FailedReplay = %+v, want %d replayed and the job keyed \"last\" skipped", replayed, n-1)
	}
}

// TestPurgeByFilterLetsWritersIn: a purge by filter releases the write
// lock between chunks, so a purge of the first and the last failed job
// issued while it runs commits between two of its chunks: it finds the
// first gone and the last still there.
func TestPurgeByFilterLetsWritersIn(t *testing.T) {
	t.Parallel()
	const n = bulkChunks * backend.ChunkSize
	b := openSeeded(t, n)

	var bulk, byID int
	whileBulk(t, b, func(ctx context.Context) error {
		var err error
		bulk, err = b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "q"}})
		return err
	}, func(ctx context.Context) error {
		var err error
		byID, err = b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{1, n}})
		return err
	})
	if byID != 1 || bulk != n-1 {
		t.Fatalf("purge of the failed jobs of jobs 1 and %d during a purge by filter deleted %d, the purge by filter %d; "+
			"want 1 (the last, not yet reached) and %d: the purge by IDs must commit between two chunks", n, byID, bulk, n-1)
	}
}
