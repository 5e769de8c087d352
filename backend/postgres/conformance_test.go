package postgres

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

func TestConformance(t *testing.T) {
	testURL(t)
	backendtest.Run(t, backendtest.Harness{
		New:     func(t *testing.T) backend.Backend { return openTest(t, Options{}) },
		BeginTx: beginTx,
	})
}

// beginTx begins an application's transaction on b's pool, for the
// conformance suite's Tx area.
func beginTx(t *testing.T, b backend.Backend) backendtest.Tx {
	ctx := t.Context()
	tx, err := b.(*Backend).Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return backendtest.Tx{Tx: tx, Commit: func() error { return tx.Commit(ctx) }, Rollback: func() error { return tx.Rollback(ctx) }}
}
