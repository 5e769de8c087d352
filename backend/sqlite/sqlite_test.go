package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/sqlite"
)

func TestMain(m *testing.M) {
	// TestWakeAcrossProcesses runs this test binary again as the process
	// that inserts.
	if path := os.Getenv(inserterEnv); path != "" {
		os.Exit(runInserter(path))
	}
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	var paths sync.Map // *sqlite.Backend -> its file, for BeginTx
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			path := filepath.Join(t.TempDir(), "jobq.db")
			b, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			paths.Store(b, path)
			return b
		},
		// The application's own database on the same file, as
		// JobInsertManyTx asks: BEGIN IMMEDIATE, waiting out a busy file.
		BeginTx: func(t *testing.T, b backend.Backend) backendtest.Tx {
			path, _ := paths.Load(b)
			app, err := sql.Open("sqlite", "file:"+path.(string)+"?_txlock=immediate&_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = app.Close() })
			tx, err := app.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			return backendtest.Tx{Tx: tx, Commit: tx.Commit, Rollback: tx.Rollback}
		},
	})
}
