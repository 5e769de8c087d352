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
// the call ("claim jobs"); the result reads "op: cause". Errors that already
// carry a jobq sentinel, and context errors, pass through wrapped with op.
func (b *Backend) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil && ctx.Err() != nil {
		// An interrupted statement or a busy wait cut short by the
		// context reports a driver error; the caller asked for the
		// context's reason.
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if b.closed.Load() || errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "sql: database is closed") {
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	if hint := b.unavailableHint(err); hint != "" {
		return fmt.Errorf("%s: %w: %s (%w)", op, backend.ErrUnavailable, hint, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailableHint says, for a driver error that means the file cannot be
// used, what is wrong and what to do; "" for any other error.
func (b *Backend) unavailableHint(err error) string {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Sprintf("sqlite database %s stayed locked by another connection past the %s busy timeout; retry, stop the process holding it, or raise busy_timeout", b.path, b.busyTimeout)
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Sprintf("%s is not a valid sqlite database (corrupt, or another kind of file); check the path or restore the file from a backup", b.path)
	case sqlite3.SQLITE_CANTOPEN:
		return fmt.Sprintf("cannot open sqlite database %s; check that its directory exists and is writable", b.path)
	case sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_AUTH:
		return fmt.Sprintf("permission denied writing sqlite database %s; check the permissions of the file, its -wal and -shm files and its directory", b.path)
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL:
		return fmt.Sprintf("i/o error on sqlite database %s; check free disk space and the device", b.path)
	}
	return ""
}
