package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/sqlite"
)

// TestUniqueStatesAsMemory: SQLite answers random batches of unique
// inserts with state sets, conflict modes and KeepLast as the memory
// backend does (see backendtest.UniqueStatesAsMemory).
func TestUniqueStatesAsMemory(t *testing.T) {
	t.Parallel()
	backendtest.UniqueStatesAsMemory(t, "sqlite", func(t *testing.T) backend.Backend {
		b, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}
