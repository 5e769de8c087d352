package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// TestMigrateClaimOrder: migration 007 rebuilds jobs_claim in claim order
// (priority, available_at, id), and the jobs queued before it are claimed
// in that order: a job due earlier first, whatever its id.
func TestMigrateClaimOrder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	// What a jobq at version 6 leaves: job 1 due a minute ago, job 2 (a
	// retry, say) due two minutes ago, job 3 due now.
	queries := []string{`CREATE TABLE jobq_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`}
	for v := 1; v <= 6; v++ {
		names, err := filepath.Glob(fmt.Sprintf("migrations/%03d_*.sql", v))
		if err != nil || len(names) != 1 {
			t.Fatalf("migration %d: %v, %v", v, names, err)
		}
		text, err := os.ReadFile(names[0])
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, string(text), fmt.Sprintf(`INSERT INTO jobq_schema VALUES (%d, 0)`, v))
	}
	now := time.Now().UnixMicro()
	for id, avail := range []int64{now - time.Minute.Microseconds(), now - 2*time.Minute.Microseconds(), now} {
		queries = append(queries, fmt.Sprintf(`INSERT INTO jobs (id, queue, type, payload, max_attempts, status, available_at, created_at)
			VALUES (%d, 'q', 't', '{}', 3, 'pending', %d, %d)`, id+1, avail, avail))
	}
	execFile(t, path, queries...)

	b := openAt(t, path, sqlite.Options{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var def string
	if err := db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_master WHERE name = 'jobs_claim'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	// 010 put the turn (0 for a job without a key) after the priority.
	if !strings.Contains(def, "(queue, priority DESC, turn, available_at, id") {
		t.Fatalf("jobs_claim after the migration: %s", def)
	}
	b = openAt(t, path, sqlite.Options{})
	for _, want := range []int64{2, 1, 3} {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].ID != want {
			t.Fatalf("claim = %v, %v; want job %d", rows, err, want)
		}
	}
}
