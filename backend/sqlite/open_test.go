package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// rawConn opens a plain driver connection to path, standing in for another
// process sharing the file.
func rawConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func exec(t *testing.T, c *sql.Conn, query string) {
	t.Helper()
	if _, err := c.ExecContext(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// wantUnavailable asserts err wraps ErrUnavailable and names path.
func wantUnavailable(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("error = %v, want one wrapping ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file %s", err, path)
	}
}

func openAt(t *testing.T, path string, opts sqlite.Options) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func oneJob(queue string) []backend.InsertParams {
	return []backend.InsertParams{{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 3}}
}

func TestOpenGarbageFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if b != nil {
		t.Fatalf("Open returned a backend for a garbage file")
	}
	wantUnavailable(t, err, path)
	if !strings.Contains(err.Error(), "not a valid sqlite database") {
		t.Errorf("error %q does not say what is wrong", err)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "no", "such", "dir", "jobq.db")
	_, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	wantUnavailable(t, err, path)

	// A regular file where a directory should be (unwritable for any
	// user, root included).
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(file, "jobq.db")
	_, err = sqlite.Open(t.Context(), path, sqlite.Options{})
	wantUnavailable(t, err, path)
}

func TestOpenUnwritableDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "jobq.db")
	_, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	wantUnavailable(t, err, path)
}

func TestOpenLockedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "locked.db")
	other := rawConn(t, path)
	// A rollback-journal database with an exclusive transaction open: no
	// other connection can even read it.
	exec(t, other, "BEGIN EXCLUSIVE")
	exec(t, other, "CREATE TABLE held (x)")

	start := time.Now()
	_, err := sqlite.Open(t.Context(), path, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	wantUnavailable(t, err, path)
	if !strings.Contains(err.Error(), "locked") {
		t.Errorf("error %q does not say the file is locked", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Open waited %s with a 100ms busy timeout", waited)
	}

	exec(t, other, "COMMIT")
	openAt(t, path, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
}

func TestWriteLockedByAnotherProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b := openAt(t, path, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	res, err := b.JobInsertMany(ctx, oneJob("q"))
	if err != nil {
		t.Fatal(err)
	}

	other := rawConn(t, path)
	exec(t, other, "BEGIN IMMEDIATE")
	exec(t, other, "UPDATE jobs SET priority = 1")

	_, err = b.JobInsertMany(ctx, oneJob("q"))
	wantUnavailable(t, err, path)
	_, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	wantUnavailable(t, err, path)
	// WAL readers are not blocked by the writer.
	if _, err := b.JobGet(ctx, res[0].ID); err != nil {
		t.Fatalf("JobGet while another connection writes: %v", err)
	}

	exec(t, other, "COMMIT")
	if _, err := b.JobInsertMany(ctx, oneJob("q")); err != nil {
		t.Fatalf("insert after the lock was released: %v", err)
	}
}

func TestContextEndsBusyWait(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b := openAt(t, path, sqlite.Options{BusyTimeout: time.Minute})
	other := rawConn(t, path)
	exec(t, other, "BEGIN IMMEDIATE")
	exec(t, other, "DELETE FROM jobs")
	defer exec(t, other, "ROLLBACK")

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.JobInsertMany(ctx, oneJob("q"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
	// Ending at the context's 100ms, not at the minute's busy timeout: 30s
	// tells the two apart with room for a loaded machine (it was 10s).
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("insert waited %s after its context ended", waited)
	}
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	other := rawConn(t, path)
	exec(t, other, "INSERT INTO jobq_schema (version, applied_at) VALUES (999, 0)")

	for _, noMigrate := range []bool{false, true} {
		_, err := sqlite.Open(t.Context(), path, sqlite.Options{NoMigrate: noMigrate})
		if !errors.Is(err, backend.ErrSchemaTooNew) {
			t.Fatalf("Open(NoMigrate %v) error = %v, want ErrSchemaTooNew", noMigrate, err)
		}
		wantSchemaError(t, err, path, 999)
	}
}

func TestMigrateExplicitly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b := openAt(t, path, sqlite.Options{NoMigrate: true})
	ctx := t.Context()
	if _, err := b.JobInsertMany(ctx, oneJob("q")); err == nil {
		t.Fatal("insert into an unmigrated file succeeded")
	}
	for range 2 { // idempotent
		v, err := b.Migrate(ctx)
		if err != nil || v != sqlite.SchemaVersion() {
			t.Fatalf("Migrate = %d, %v; want %d", v, err, sqlite.SchemaVersion())
		}
	}
	if _, err := b.JobInsertMany(ctx, oneJob("q")); err != nil {
		t.Fatalf("insert after Migrate: %v", err)
	}
	// A second backend on the migrated file finds nothing to do.
	openAt(t, path, sqlite.Options{})
}

func TestOpenRefusesMemoryAndBadOptions(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		if _, err := sqlite.Open(t.Context(), path, sqlite.Options{}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Errorf("Open(%q) error = %v, want ErrInvalidInput", path, err)
		}
	}
	path := filepath.Join(t.TempDir(), "jobq.db")
	if _, err := sqlite.Open(t.Context(), path, sqlite.Options{BusyTimeout: -time.Second}); !errors.Is(err, backend.ErrInvalidInput) {
		t.Errorf("negative busy timeout: error = %v, want ErrInvalidInput", err)
	}
}

func TestPathWithURICharacters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "odd ?name#%41.db")
	b := openAt(t, path, sqlite.Options{})
	if _, err := b.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not created at the literal path: %v", err)
	}
}
