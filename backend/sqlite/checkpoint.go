package sqlite

import (
	"context"
	"database/sql"
	"os"
	"time"
)

// SQLite's automatic checkpoint runs inside whichever commit pushes the WAL
// past 1000 pages, on the single write connection, fsyncing the database
// while every claim waits behind it: that was the whole latency tail (p99
// 5-7 ms, max 20-36 ms at 200 jobs/s). So the write connection runs with
// wal_autocheckpoint(0) and this loop checkpoints on a connection of its
// own, where a PASSIVE checkpoint never blocks the writer.
const (
	checkpointInterval = 500 * time.Millisecond
	// walTruncateBytes: past this size a PASSIVE checkpoint is not keeping
	// up (readers held old snapshots), so a TRUNCATE checkpoint, which waits
	// for them, resets the file.
	walTruncateBytes = 64 << 20
)

// checkpointer runs WAL checkpoints until Close.
type checkpointer struct {
	db     *sql.DB
	wal    string
	cancel context.CancelFunc
	done   chan struct{}
}

func startCheckpointer(db *sql.DB, path string) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, wal: path + "-wal", cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.runOnce(ctx)
		}
	}
}

// runOnce checkpoints once. Errors are not fatal (a busy checkpoint is
// simply retried next tick), so they are dropped.
func (c *checkpointer) runOnce(ctx context.Context) {
	mode := "PASSIVE"
	if fi, err := os.Stat(c.wal); err == nil && fi.Size() > walTruncateBytes {
		mode = "TRUNCATE"
	}
	_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint("+mode+")")
}

// stop ends the loop and waits for it.
func (c *checkpointer) stop() {
	c.cancel()
	<-c.done
}
