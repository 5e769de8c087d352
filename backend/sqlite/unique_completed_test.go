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

// heldCompleted is the set of a job that keeps its unique key in every
// state, kept completed included.
const heldCompleted = backend.UniqueAllStates | backend.UniqueCompleted

// migrationsTo returns the statements that leave a file at schema version
// v, as the jobq of that version did.
func migrationsTo(t *testing.T, v int) []string {
	t.Helper()
	queries := []string{`CREATE TABLE jobq_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`}
	for n := 1; n <= v; n++ {
		names, err := filepath.Glob(fmt.Sprintf("migrations/%03d_*.sql", n))
		if err != nil || len(names) != 1 {
			t.Fatalf("migration %d: %v, %v", n, names, err)
		}
		text, err := os.ReadFile(names[0])
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, string(text), fmt.Sprintf(`INSERT INTO jobq_schema VALUES (%d, 0)`, n))
	}
	return queries
}

// insertKeyed inserts a job of queue q with unique key key and set
// states, and returns its result.
func insertKeyed(t *testing.T, b backend.Backend, key string, states backend.UniqueStates) backend.InsertResult {
	t.Helper()
	p := oneJob("q")[0]
	p.UniqueKey, p.UniqueStates = key, states
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil {
		t.Fatalf("insert of key %s: %v", key, err)
	}
	return res[0]
}

// completeKept claims the next job of queue q, wants it to be id, and
// completes it kept among the finished jobs.
func completeKept(t *testing.T, b backend.Backend, id int64) {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("claim = %v, %v; want job %d", rows, err, id)
	}
	res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone, Keep: true}}})
	if err != nil || len(res.Stale) != 0 {
		t.Fatalf("complete job %d kept = %+v, %v", id, res, err)
	}
}

// wantHeldBy inserts key and wants a duplicate of job id, or a new job
// when id is 0; it returns the job the insert named.
func wantHeldBy(t *testing.T, b backend.Backend, key string, id int64, when string) int64 {
	t.Helper()
	r := insertKeyed(t, b, key, heldCompleted)
	if id == 0 && r.Duplicate || id != 0 && (!r.Duplicate || r.ID != id || r.Replaced) {
		t.Fatalf("%s: insert of key %s = %+v; want held by job %d (0: a new job)", when, key, r, id)
	}
	return r.ID
}

// heldColumn returns the unique_held column of finished job id, read
// through a connection of its own.
func heldColumn(t *testing.T, path string, id int64) sql.NullInt64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var held sql.NullInt64
	if err := db.QueryRowContext(t.Context(), `SELECT unique_held FROM finished_jobs WHERE id = ?`, id).Scan(&held); err != nil {
		t.Fatalf("unique_held of finished job %d: %v", id, err)
	}
	return held
}

// TestMigrateUniqueCompleted: a file of schema version 14 migrates to 15
// with its kept completed jobs holding nothing, as before (their keys
// were freed when they completed); a job live across the migration
// keeps its key in the live states only, and a job inserted after it
// with the completed state holds its key once it completes kept.
func TestMigrateUniqueCompleted(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	now := time.Now().UnixMicro()
	queries := append(migrationsTo(t, 14),
		// Job 1 completed holding key "old" and was kept; job 2 waits
		// holding key "live".
		fmt.Sprintf(`INSERT INTO finished_jobs (id, state, queue, type, payload, attempts, max_attempts, priority, unique_key, created_at, finished_at)
			VALUES (1, 'completed', 'q', 't', '{}', 1, 3, 0, 'old', %d, %d)`, now, now),
		fmt.Sprintf(`INSERT INTO jobs (id, queue, type, payload, max_attempts, status, available_at, created_at, unique_key)
			VALUES (2, 'q', 't', '{}', 3, 'pending', %d, %d, 'live')`, now, now))
	execFile(t, path, queries...)

	b := openAt(t, path, sqlite.Options{})
	if v, err := b.Migrate(t.Context()); err != nil || v != sqlite.SchemaVersion() {
		t.Fatalf("Migrate = %d, %v; want %d, the build's", v, err, sqlite.SchemaVersion())
	}
	if held := heldColumn(t, path, 1); held.Valid {
		t.Fatalf("unique_held of the job kept before the migration = %v, want NULL", held)
	}
	fresh := wantHeldBy(t, b, "old", 0, "key of a job completed before the migration")
	wantHeldBy(t, b, "live", 2, "key of a job waiting across the migration")
	// Job 2, of every live state, frees its key when it completes.
	completeKept(t, b, 2)
	wantHeldBy(t, b, "live", 0, "after the job from before the migration completed")
	completeKept(t, b, fresh)
	if held := heldColumn(t, path, fresh); !held.Valid {
		t.Fatalf("unique_held of job %d, kept with its key = NULL, want set", fresh)
	}
	wantHeldBy(t, b, "old", fresh, "held by a job completed after the migration")
	rows, err := b.FinishedList(t.Context(), backend.FinishedListParams{State: backend.StateCompleted})
	if err != nil || len(rows) != 3 {
		t.Fatalf("completed jobs = %d, %v; want 3, the old one among them", len(rows), err)
	}
}

// TestUniqueCompletedOneHolder: finished_jobs_unique_held refuses a
// second completed holder of a key. A live job a producer of an older
// build let take a completed holder's key (it never looked at
// finished_jobs) completes kept without it, instead of failing its
// completion on that index, and the completed holder keeps the key.
func TestUniqueCompletedOneHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b := openAt(t, path, sqlite.Options{})
	a := insertKeyed(t, b, "k", heldCompleted).ID
	completeKept(t, b, a)

	now := time.Now().UnixMicro()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.ExecContext(t.Context(), fmt.Sprintf(`INSERT INTO finished_jobs
		(id, state, queue, type, payload, attempts, max_attempts, priority, unique_key, created_at, finished_at, unique_held)
		VALUES (%d, 'completed', 'q', 't', '{}', 1, 3, 0, 'k', %d, %d, 1)`, a+100, now, now))
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed") {
		t.Fatalf("a second completed holder of key k: error = %v, want the unique index's refusal", err)
	}

	// What an older producer leaves: a live job holding the key, in a set
	// with the completed state (as a new producer would have given it).
	live := a + 1
	if _, err := db.ExecContext(t.Context(), fmt.Sprintf(`INSERT INTO jobs
		(id, queue, type, payload, max_attempts, status, available_at, created_at, unique_key, unique_states)
		VALUES (%d, 'q', 't', '{}', 3, 'pending', %d, %d, 'k', %d)`, live, now, now, heldCompleted)); err != nil {
		t.Fatal(err)
	}
	wantHeldBy(t, b, "k", a, "a live and a completed holder")
	completeKept(t, b, live)
	if held := heldColumn(t, path, live); held.Valid {
		t.Fatalf("unique_held of job %d, completed while job %d held its key = %v, want NULL", live, a, held)
	}
	wantHeldBy(t, b, "k", a, "the second completed")
}

// TestUniqueCompletedPrunedByType: a prune by type, which finds its
// chunks on a read connection and deletes them by ID, frees the keys of
// the jobs it deletes and of no other.
func TestUniqueCompletedPrunedByType(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := openAt(t, filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{Now: clock.Now})
	a := insertKeyed(t, b, "a", heldCompleted).ID
	completeKept(t, b, a)
	p := oneJob("q")[0]
	p.Type, p.UniqueKey, p.UniqueStates = "other", "b", heldCompleted
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	other := res[0].ID
	completeKept(t, b, other)

	clock.Advance(time.Hour)
	n, err := b.FinishedPrune(t.Context(), backend.FinishedPruneParams{State: backend.StateCompleted, Types: map[string]time.Duration{"t": time.Minute}})
	if err != nil || n != 1 {
		t.Fatalf("FinishedPrune of type t = %d, %v; want job %d pruned", n, err, a)
	}
	wantHeldBy(t, b, "a", 0, "after the prune of its holder")
	wantHeldBy(t, b, "b", other, "held by a job of a type the prune spared")
}
