// Package sqlite is jobq's embedded backend: jobs live in one SQLite file,
// no server needed. It is the default ("sqlite:jobq.db").
//
// The file is opened in WAL mode with synchronous=NORMAL, so readers never
// wait for the writer and a commit costs no fsync (a power cut may lose the
// last commits, never corrupt the file). Writes go through a single
// connection and take the write lock up front (BEGIN IMMEDIATE), so
// concurrent claims queue instead of failing; several worker processes may
// share one file, each waiting up to the busy timeout for the lock. Reads
// (JobGet, QueueStats, failed-job listing) use a separate pool of read-only
// connections.
//
// Workers in the same process are woken through Subscribe (backend.Notifier)
// right after jobs become claimable; workers in other processes find them by
// polling.
//
// The driver is modernc.org/sqlite (pure Go, no cgo).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// DefaultBusyTimeout is how long a write waits for another connection or
// process to release the file's write lock before failing with
// backend.ErrUnavailable.
const DefaultBusyTimeout = 10 * time.Second

// insertChunkRows is how many jobs one multi-row INSERT carries: 8
// parameters each keeps a statement far below SQLite's 32766-variable limit
// while amortizing the per-statement cost.
const insertChunkRows = 500

// maxCachedClaimQueues bounds the claim statements kept prepared (one per
// number of queues); claims over more queues prepare theirs per call.
const maxCachedClaimQueues = 8

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now is the backend's clock: every time the backend stores or compares
	// (eligibility, leases, created and failed times) comes from it, so tests
	// can inject a fake clock. Defaults to time.Now.
	Now func() time.Time

	// NoMigrate skips applying pending migrations at Open; the schema
	// version is still read (and a newer one refused). Use it when migrations
	// are applied explicitly through Migrate. Defaults to false: Open
	// migrates.
	NoMigrate bool

	// Existing opens only a file that already holds jobq's schema at this
	// build's version: no file is created and nothing migrated, and a
	// missing file, an empty one or an older schema fails with
	// backend.ErrNoSchema (see backend.OpenOptions). Defaults to false:
	// Open creates and migrates.
	Existing bool

	// BusyTimeout is how long a statement waits for a lock held by another
	// connection before failing with backend.ErrUnavailable. Negative is an
	// error. Defaults to DefaultBusyTimeout (10s).
	BusyTimeout time.Duration
}

// Backend is a jobq backend stored in one SQLite file. It implements
// backend.Backend, backend.Notifier and backend.Migrator. Create it with
// Open; it is safe for concurrent use.
type Backend struct {
	path        string
	busyTimeout time.Duration
	now         func() time.Time
	w           *sql.DB // one connection: every write
	r           *sql.DB // read-only connections
	ckpt        *sql.DB // one connection: WAL checkpoints, see checkpoint.go
	stopCkpt    func()  // stops the checkpoint loop; nil until Open succeeds
	hub         hub
	closed      atomic.Bool
	closeOnce   sync.Once

	stmtMu sync.Mutex
	st     *stmts // prepared on first use, see statements
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Notifier = (*Backend)(nil)
	_ backend.Migrator = (*Backend)(nil)
)

// Open opens (creating it if needed) the SQLite database at path, applies
// pending migrations unless opts.NoMigrate, and checks the file is usable.
// ctx bounds only the opening. An unreadable, corrupt or locked file, or a
// path whose directory does not exist, fails here with an error wrapping
// backend.ErrUnavailable that names the file; a schema newer than this
// build fails with backend.ErrSchemaTooNew; a bad path or option with
// backend.ErrInvalidInput.
func Open(ctx context.Context, path string, opts Options) (*Backend, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, &backend.InputError{Field: "sqlite path", Reason: fmt.Sprintf("%q: give a file path (an in-memory database cannot be shared by the read and write connections; use the memory: backend)", path)}
	}
	if opts.BusyTimeout < 0 {
		return nil, &backend.InputError{Field: "busy timeout", Reason: fmt.Sprintf("%s is negative", opts.BusyTimeout)}
	}
	b := &Backend{path: path, busyTimeout: opts.BusyTimeout, now: opts.Now}
	if b.busyTimeout == 0 {
		b.busyTimeout = DefaultBusyTimeout
	}
	if b.now == nil {
		b.now = time.Now
	}
	if err := b.open(ctx, opts.NoMigrate); err != nil {
		b.closeDBs()
		return nil, err
	}
	return b, nil
}

func (b *Backend) open(ctx context.Context, noMigrate bool) error {
	var err error
	if b.w, err = sql.Open("sqlite", dsn(b.path, b.busyTimeout, true)); err != nil {
		return fmt.Errorf("open sqlite %s: %w", b.path, err)
	}
	// One writer: SQLite serializes writers anyway, and queueing them in
	// database/sql is cheaper than SQLITE_BUSY retries between connections.
	b.w.SetMaxOpenConns(1)
	b.w.SetMaxIdleConns(1)
	b.w.SetConnMaxIdleTime(0)
	b.w.SetConnMaxLifetime(0)
	if b.r, err = sql.Open("sqlite", dsn(b.path, b.busyTimeout, false)); err != nil {
		return fmt.Errorf("open sqlite %s: %w", b.path, err)
	}
	b.r.SetMaxOpenConns(4)
	b.r.SetMaxIdleConns(4)

	// Connecting runs the pragmas (journal_mode=WAL reads the header), so a
	// missing directory, a locked or a non-database file fails here.
	if err := b.w.PingContext(ctx); err != nil {
		return b.mapErr(ctx, "open sqlite", err)
	}
	if noMigrate {
		_, err = b.schemaState(ctx, b.r)
	} else {
		_, err = b.Migrate(ctx)
	}
	if err != nil {
		return err
	}
	if b.ckpt, err = sql.Open("sqlite", dsn(b.path, b.busyTimeout, true)); err != nil {
		return fmt.Errorf("open sqlite %s: %w", b.path, err)
	}
	b.ckpt.SetMaxOpenConns(1)
	b.stopCkpt = startCheckpointer(b.ckpt, b.path)
	return nil
}

// dsn builds the driver's data source name: a file: URI (so any path
// character is safe) with the pragmas every connection needs.
func dsn(path string, busy time.Duration, write bool) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(OFF)", busy.Milliseconds())
	if write {
		// wal_autocheckpoint(0): checkpoints run off the write path, see
		// checkpoint.go.
		q += "&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_txlock=immediate"
	} else {
		q += "&_pragma=query_only(1)"
	}
	return "file:" + esc + q
}

// Close closes the database. It is idempotent; calls made after it return
// backend.ErrClosed. Subscriptions stay valid (they just stop firing).
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		err = b.closeDBs()
	})
	return err
}

func (b *Backend) closeDBs() error {
	var errs []error
	if b.stopCkpt != nil {
		b.stopCkpt()
	}
	if b.ckpt != nil {
		errs = append(errs, b.ckpt.Close())
	}
	b.stmtMu.Lock()
	if b.st != nil {
		errs = append(errs, b.st.close())
		b.st = nil
	}
	b.stmtMu.Unlock()
	if b.r != nil {
		errs = append(errs, b.r.Close())
	}
	if b.w != nil {
		errs = append(errs, b.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite %s: %w", b.path, err)
	}
	return nil
}

// checkOpen returns the ErrClosed error for op once Close was called.
func (b *Backend) checkOpen(op string) error {
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	return nil
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the single
// write connection) and commits it. Errors fn returns are mapped unless
// they already carry a jobq sentinel.
func (b *Backend) write(ctx context.Context, op string, fn func(tx *sql.Tx, st *stmts) error) error {
	if err := b.checkOpen(op); err != nil {
		return err
	}
	st, err := b.statements(ctx)
	if err != nil {
		return b.mapErr(ctx, op, err)
	}
	tx, err := b.w.BeginTx(ctx, nil)
	if err != nil {
		return b.mapErr(ctx, op, err)
	}
	if err := fn(tx, st); err != nil {
		_ = tx.Rollback()
		if isSentinel(err) {
			return fmt.Errorf("%s: %w", op, err)
		}
		return b.mapErr(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return b.mapErr(ctx, op, err)
	}
	return nil
}

// isSentinel reports errors that already say what went wrong in jobq's
// terms and must not be re-mapped.
func isSentinel(err error) bool {
	return errors.Is(err, backend.ErrInvalidInput) || errors.Is(err, backend.ErrNotFound) ||
		errors.Is(err, backend.ErrSchemaTooNew)
}

// micros is how times are stored: unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the inverse of micros.
func fromMicros(us int64) time.Time { return time.UnixMicro(us) }
