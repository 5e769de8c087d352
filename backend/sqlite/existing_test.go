package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// execFile runs queries on path through a plain driver connection (another
// program's), closed before it returns so the file can be compared.
func execFile(t *testing.T, path string, queries ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range queries {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
}

// version1 makes path a database at schema version 1, as the jobq before
// migration 002 left it, holding one pending and one failed job.
func version1(t *testing.T, path string) {
	t.Helper()
	init, err := os.ReadFile("migrations/001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	execFile(t, path, string(init),
		`CREATE TABLE jobq_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		`INSERT INTO jobq_schema VALUES (1, 0)`,
		`INSERT INTO jobs (queue, type, payload, max_attempts, status, available_at, created_at) VALUES ('q', 't', '{}', 3, 'pending', 0, 0)`,
		`INSERT INTO failed_jobs (job_id, queue, type, payload, attempts, max_attempts, priority, error, created_at, failed_at)
			VALUES (7, 'q', 't', '{}', 3, 3, 0, 'boom', 0, 0)`)
}

// snapshot reads path and its -wal and -shm files (nil for a missing one).
func snapshot(t *testing.T, path string) [3][]byte {
	t.Helper()
	var s [3][]byte
	for i, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		s[i] = b
	}
	return s
}

// wantSchemaError fails the test unless err is a *backend.SchemaError
// naming the file, at version have, wanting this build's version, and free
// of command-line advice: which command fixes the file is for the caller
// (the jobq command) to say, not the library.
func wantSchemaError(t *testing.T, err error, path string, have int) {
	t.Helper()
	var se *backend.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is no *backend.SchemaError", err, err)
	}
	if se.Have != have || se.Want != sqlite.SchemaVersion() || se.Store != "sqlite "+path {
		t.Errorf("SchemaError = %+v; want Store %q, Have %d, Want %d", *se, "sqlite "+path, have, sqlite.SchemaVersion())
	}
	if strings.Contains(err.Error(), "jobq migrate") {
		t.Errorf("error %q gives command-line advice", err)
	}
}

// TestOpenExistingRefusesWhatIsNotThere: an Existing open of a missing
// file, an empty one, another program's database or an older jobq schema
// fails with a *backend.SchemaError (ErrNoSchema) that names the file and
// the versions, and leaves the file exactly as it was: a missing one (and
// its -wal and -shm) still missing.
func TestOpenExistingRefusesWhatIsNotThere(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		make  func(t *testing.T, path string)
		about string // what the error says is wrong
		have  int    // the version found
	}{
		{"missing", func(*testing.T, string) {}, "does not exist", 0},
		{"empty", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "empty", 0},
		{"foreign", func(t *testing.T, path string) {
			execFile(t, path, `CREATE TABLE notes (body TEXT)`, `INSERT INTO notes VALUES ('hello')`)
		}, "no jobq tables", 0},
		{"older schema", version1, "version 1", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "jobq.db")
			c.make(t, path)
			before := snapshot(t, path)
			b, err := sqlite.Open(t.Context(), path, sqlite.Options{Existing: true})
			if b != nil {
				_ = b.Close()
			}
			if !errors.Is(err, backend.ErrNoSchema) {
				t.Fatalf("Open(Existing) error = %v, want ErrNoSchema", err)
			}
			wantSchemaError(t, err, path, c.have)
			for _, want := range []string{"sqlite " + path + ": ", c.about} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after := snapshot(t, path); !slices.EqualFunc(after[:], before[:], bytes.Equal) {
				t.Errorf("Open(Existing) changed the file or its -wal/-shm: before %d/%d/%d bytes, after %d/%d/%d",
					len(before[0]), len(before[1]), len(before[2]), len(after[0]), len(after[1]), len(after[2]))
			}
			t.Log(err)
		})
	}
}

// TestOpenExistingThroughURL: backend.OpenWith passes Existing to this
// backend; a mistyped path is reported, not created.
func TestOpenExistingThroughURL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "typo.db")
	_, err := backend.OpenWith(t.Context(), "sqlite:"+path, backend.OpenOptions{Existing: true})
	if !errors.Is(err, backend.ErrNoSchema) {
		t.Fatalf("OpenWith(Existing) error = %v, want ErrNoSchema", err)
	}
	wantSchemaError(t, err, path, 0)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a refused Existing open (stat: %v)", path+suffix, err)
		}
	}

	// A missing directory is named as such: migrate alone would not help.
	path = filepath.Join(t.TempDir(), "typo", "jobq.db")
	_, err = backend.OpenWith(t.Context(), "sqlite:"+path, backend.OpenOptions{Existing: true})
	if !errors.Is(err, backend.ErrNoSchema) || !strings.Contains(err.Error(), "neither the file nor its directory exists") {
		t.Fatalf("OpenWith(Existing) in a missing directory: error = %v, want ErrNoSchema saying the directory is missing", err)
	}
	wantSchemaError(t, err, path, 0)
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s created by a refused Existing open (stat: %v)", filepath.Dir(path), err)
	}
}

// TestOpenExistingUpToDate: a file jobq created opens with Existing and
// works.
func TestOpenExistingUpToDate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	if err := openAt(t, path, sqlite.Options{}).Close(); err != nil {
		t.Fatal(err)
	}
	b := openAt(t, path, sqlite.Options{Existing: true})
	if _, err := b.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatalf("insert after an Existing open: %v", err)
	}
}

// TestMigrateFromVersion1: a file of schema version 1 is migrated on open;
// its jobs read back with no metadata, no releases and claim token 0, and
// their first claim after it hands out token 1.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	version1(t, path)
	b := openAt(t, path, sqlite.Options{})
	ctx := t.Context()
	j, err := b.JobGet(ctx, 1)
	if err != nil || j.Metadata != nil || j.Releases != 0 || j.Queue != "q" || j.Token != 0 {
		t.Fatalf("JobGet(1) after migrating = %+v, %v; want queue q, no metadata, no releases, token 0", j, err)
	}
	f, err := b.FailedGet(ctx, 7)
	if err != nil || f.Metadata != nil || f.JobID != 7 {
		t.Fatalf("FailedGet(7) after migrating = %+v, %v; want job 7, no metadata", f, err)
	}
	if v, err := b.Migrate(ctx); err != nil || v != sqlite.SchemaVersion() {
		t.Fatalf("Migrate = %d, %v; want %d", v, err, sqlite.SchemaVersion())
	}
	// Replay keeps working on a row that failed before the migration.
	if res, err := b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{7}}); err != nil || res.Replayed != 1 {
		t.Fatalf("FailedReplay of a pre-migration row = %+v, %v", res, err)
	}
	if j, err := b.JobGet(ctx, 7); err != nil || j.Metadata != nil || j.Token != 0 {
		t.Fatalf("replayed JobGet(7) = %+v, %v; want no metadata, token 0", j, err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 2, Lease: time.Minute})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim after migrating = %d rows, %v; want both jobs", len(rows), err)
	}
	for _, r := range rows {
		if r.Token != 1 {
			t.Errorf("job %d: first claim after migrating has token %d, want 1", r.ID, r.Token)
		}
	}
}

// TestOpenDirectory: a directory given as the path is refused as one, with
// and without Existing, and nothing is created in it.
func TestOpenDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, existing := range []bool{false, true} {
		_, err := sqlite.Open(t.Context(), dir, sqlite.Options{Existing: existing})
		if !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), "directory") ||
			!strings.HasPrefix(err.Error(), "sqlite "+dir+": ") {
			t.Fatalf("Open(directory, Existing %v) error = %v; want ErrInvalidInput starting %q and saying it is a directory",
				existing, err, "sqlite "+dir+": ")
		}
		t.Log(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("directory holds %v (%v) after the refused opens", entries, err)
	}
}

// TestOpenErrorsSayEachThingOnce: an open that fails names the file once,
// as "sqlite PATH", with the sentinel, the driver's reason and the advice,
// so a caller adds only its own words ("open database: …").
func TestOpenErrorsSayEachThingOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database\n"), 300), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want []string
	}{
		{filepath.Join(dir, "no", "such", "dir", "jobq.db"), []string{"unable to open database file", "directory exists"}},
		{garbage, []string{"not a database", "not a valid sqlite database"}},
	} {
		_, err := sqlite.Open(t.Context(), c.path, sqlite.Options{})
		wantUnavailable(t, err, c.path)
		msg := err.Error()
		if prefix := "sqlite " + c.path + ": backend unavailable: "; !strings.HasPrefix(msg, prefix) {
			t.Errorf("error %q does not start with %q", msg, prefix)
		}
		if n := strings.Count(msg, c.path); n != 1 {
			t.Errorf("error %q names the file %d times, want once", msg, n)
		}
		if strings.Contains(msg, "open sqlite") {
			t.Errorf("error %q repeats the caller's words", msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("error %q lacks %q", msg, w)
			}
		}
		t.Log(msg)
	}
}
