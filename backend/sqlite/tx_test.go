package sqlite_test

import (
	"database/sql"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// appStore opens a backend and, on the same file, the application's own
// database, whose transactions the tests hand to the backend.
func appStore(t *testing.T) (*sqlite.Backend, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b := openAt(t, path, sqlite.Options{})
	app, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return b, app
}

func TestTxInsertAndComplete(t *testing.T) {
	t.Parallel()
	b, app := appStore(t)
	ctx := t.Context()

	// Rolled back: the job never existed.
	tx, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.JobInsertManyTx(ctx, tx, oneJob("q"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobGet(ctx, res[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job of a rolled-back tx: %v, want ErrNotFound", err)
	}

	// Committed: it exists, invisible before the commit, with its metadata.
	tx, err = app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	traced := oneJob("q")
	traced[0].Metadata = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	res, err = b.JobInsertManyTx(ctx, tx, traced)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobGet(ctx, res[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("uncommitted job visible: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 || rows[0].ID != res[0].ID {
		t.Fatalf("claim = %v, %v; want job %d", rows, err, res[0].ID)
	}
	if !maps.Equal(rows[0].Metadata, traced[0].Metadata) {
		t.Fatalf("claimed metadata %v, want %v as inserted in the tx", rows[0].Metadata, traced[0].Metadata)
	}

	// Completed inside the handler's tx.
	tx, err = app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.JobCompleteTx(ctx, tx, rows[0].Ref()); err != nil {
		t.Fatal(err)
	}
	if err := b.JobCompleteTx(ctx, tx, rows[0].Ref()); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("second JobCompleteTx: %v, want ErrNotFound", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobGet(ctx, rows[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job completed in tx still live: %v", err)
	}

	if _, err := b.JobInsertManyTx(ctx, "not a tx", oneJob("q")); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("JobInsertManyTx(string): %v, want ErrInvalidInput", err)
	}
	if err := b.JobCompleteTx(ctx, (*sql.Tx)(nil), rows[0].Ref()); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("JobCompleteTx(nil tx): %v, want ErrInvalidInput", err)
	}
}
