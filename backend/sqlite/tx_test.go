package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// TestTxTypedNil: a nil *sql.Tx, the driver's own type with nothing in it,
// is refused as input rather than used. Writing in the caller's
// transaction is the conformance suite's (backendtest, area Tx).
func TestTxTypedNil(t *testing.T) {
	t.Parallel()
	b := openAt(t, filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
	ctx := t.Context()
	if _, err := b.JobInsertMany(ctx, oneJob("q")); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %v, %v; want one job", rows, err)
	}
	if err := b.JobCompleteTx(ctx, (*sql.Tx)(nil), rows[0].Ref()); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("JobCompleteTx(nil tx): %v, want ErrInvalidInput", err)
	}
	if row, err := b.JobGet(ctx, rows[0].ID); err != nil || row.Status != backend.StateReserved {
		t.Fatalf("job after the refused JobCompleteTx = %+v, %v; want still reserved", row, err)
	}
}
