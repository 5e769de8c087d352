package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jobq/jobq/backend"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// mapErr is the one place driver errors become jobq's sentinels. op names
// the call ("claim jobs"); the result reads "op: cause", and an error that
// means the file cannot be used reads "op: sqlite PATH: backend
// unavailable: driver error: what to do", naming the file once. An empty op
// (Open's own steps) starts the text at "sqlite PATH". Errors that already
// carry a jobq sentinel, and context errors, pass through wrapped with op.
func (b *Backend) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	prefix := op
	if op == "" {
		prefix = b.name()
	}
	if ctx != nil && ctx.Err() != nil {
		// An interrupted statement or a busy wait cut short by the
		// context reports a driver error; the caller asked for the
		// context's reason.
		return fmt.Errorf("%s: %w", prefix, ctx.Err())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if b.closed.Load() || errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "sql: database is closed") {
		return fmt.Errorf("%s: %w", prefix, backend.ErrClosed)
	}
	if hint := b.unavailableHint(err); hint != "" {
		if op != "" {
			prefix = op + ": " + b.name()
		}
		return fmt.Errorf("%s: %w: %w: %s", prefix, backend.ErrUnavailable, err, hint)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// unavailableHint says, for a driver error that means the file cannot be
// used, what is wrong and what to do; "" for any other error. The file's
// name is not repeated: mapErr gives it.
func (b *Backend) unavailableHint(err error) string {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Sprintf("another connection held the lock past the %s busy timeout; retry, stop the process holding it, or raise busy_timeout", b.busyTimeout)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return "not a valid sqlite database (corrupt, or another kind of file); check the path or restore the file from a backup"
	case sqlite3.SQLITE_CANTOPEN:
		return "check that its directory exists and is writable"
	case sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_AUTH:
		return "permission denied; check the permissions of the file, its -wal and -shm files and its directory"
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL:
		return "i/o error; check free disk space and the device"
	}
	return ""
}
