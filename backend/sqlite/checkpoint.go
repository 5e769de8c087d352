package sqlite

import (
	"context"
	"database/sql"
	"os"
	"time"

	"github.com/jobq/jobq/internal/ticker"
)

// SQLite's automatic checkpoint runs inside whichever commit pushes the WAL
// past 1000 pages, on the single write connection, fsyncing the database
// while every claim waits behind it: that was the whole latency tail (jobq
// bench --workload latency; docs/performance.md). So the write connection
// runs with wal_autocheckpoint(0) and this loop checkpoints on a connection
// of its own, where a PASSIVE checkpoint never blocks the writer.
const (
	checkpointInterval = 500 * time.Millisecond
	// walTruncateBytes: past this size a PASSIVE checkpoint is not keeping
	// up (readers held old snapshots), so a TRUNCATE checkpoint, which waits
	// for them, resets the file.
	walTruncateBytes = 64 << 20
)

// checkpointLoop checkpoints the WAL through b.ckpt every
// checkpointInterval until ctx ends: the checkpointer component Open starts
// in b.loops.
func (b *Backend) checkpointLoop(ctx context.Context) {
	wal := b.path + "-wal"
	ticker.Loop(ctx, checkpointInterval, func(ctx context.Context) {
		checkpoint(ctx, b.ckpt, wal)
	})
}

// checkpoint runs one checkpoint. Errors are not fatal (a busy checkpoint is
// simply retried next tick), so they are dropped.
func checkpoint(ctx context.Context, db *sql.DB, wal string) {
	mode := "PASSIVE"
	if fi, err := os.Stat(wal); err == nil && fi.Size() > walTruncateBytes {
		mode = "TRUNCATE"
	}
	_, _ = db.ExecContext(ctx, "PRAGMA wal_checkpoint("+mode+")")
}
