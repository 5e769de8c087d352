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
// right after jobs become claimable; workers in other processes within a few
// milliseconds, by a watcher of the file's PRAGMA data_version (notify.go).
//
// The driver is modernc.org/sqlite (pure Go, no cgo).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/limitwake"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// DefaultBusyTimeout is how long a write waits for another connection or
// process to release the file's write lock before failing with
// backend.ErrUnavailable.
const DefaultBusyTimeout = 10 * time.Second

// insertChunkRows is how many jobs one multi-row INSERT carries: 9
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

	// WakeInterval is how often a Backend whose Subscribe has been
	// called looks whether another connection (another process, another
	// Backend on the file) committed, to wake its subscribers: a worker
	// then starts a job another process enqueued within about this long
	// instead of at its next poll. While nothing is committed the looks
	// space out, up to 250ms apart, so an idle process pays next to
	// nothing for them. Negative turns the watcher off (workers find such
	// jobs by polling). Defaults to DefaultWakeInterval (5ms).
	WakeInterval time.Duration

	// Logger receives the warning that the watcher of other connections'
	// commits cannot read the file. Defaults to slog.Default().
	Logger *slog.Logger
}

// Backend is a jobq backend stored in one SQLite file. It implements
// backend.Backend, backend.Notifier and backend.Migrator. Create it with
// Open; it is safe for concurrent use.
type Backend struct {
	path        string
	busyTimeout time.Duration
	now         func() time.Time
	w           *sql.DB         // one connection: every write
	r           *sql.DB         // read-only connections
	ckpt        *sql.DB         // one connection: WAL checkpoints, see checkpoint.go
	loops       lifecycle.Group // the checkpointer and the watcher (notify.go); stopped by Close
	hub         hub
	log         *slog.Logger
	limits      *limitwake.Tracker // wakes idle workers when a queue limit lets jobs go
	// expired holds the jobs a claim moved to failed_jobs for their
	// deadline, which this process's next LeaseSweep reports (see
	// expireInClaim).
	expiredMu sync.Mutex
	expired   []backend.SweptJob
	// keyQueues holds the queues whose key rules limit or order their
	// keys, as the last claim or QueueSetKeys of this process saw them
	// (see wakeKeyQueues); nil or empty when none.
	keyQueues atomic.Pointer[map[string]struct{}]
	closed    atomic.Bool
	closeOnce sync.Once

	stmtMu sync.Mutex
	st     *stmts // prepared on first use, see statements
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Notifier = (*Backend)(nil)
	_ backend.Migrator = (*Backend)(nil)

	_ backend.QueueController = (*Backend)(nil)
)

// Open opens (creating it if needed) the SQLite database at path, applies
// pending migrations unless opts.NoMigrate, and checks the file is usable.
// With opts.Existing it opens only a file that already holds this build's
// schema, creating and migrating nothing. ctx bounds only the opening.
//
// An error about the file names it once, as "sqlite PATH", so a caller
// adds only what it was doing ("open database: …"). An unreadable, corrupt or locked file, or a path
// whose directory does not exist, wraps backend.ErrUnavailable; a schema
// newer than this build wraps backend.ErrSchemaTooNew; with Existing, a
// missing file, one without jobq's tables or with an older schema wraps
// backend.ErrNoSchema; a bad path (a directory, say) or option wraps
// backend.ErrInvalidInput.
func Open(ctx context.Context, path string, opts Options) (*Backend, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file::memory:") {
		return nil, &backend.InputError{Field: "sqlite path", Reason: fmt.Sprintf("%q: give a file path (an in-memory database cannot be shared by the read and write connections; use the memory: backend)", path)}
	}
	if opts.BusyTimeout < 0 {
		return nil, &backend.InputError{Field: "busy timeout", Reason: fmt.Sprintf("%s is negative", opts.BusyTimeout)}
	}
	b := &Backend{path: path, busyTimeout: opts.BusyTimeout, now: opts.Now, log: opts.Logger}
	b.hub.interval = opts.WakeInterval
	if b.busyTimeout == 0 {
		b.busyTimeout = DefaultBusyTimeout
	}
	if b.hub.interval == 0 {
		b.hub.interval = DefaultWakeInterval
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.limits = limitwake.New(func(q string) { b.hub.notify(map[string]struct{}{q: {}}) })
	if err := b.open(ctx, opts); err != nil {
		_ = b.closeDBs()
		return nil, err
	}
	return b, nil
}

func (b *Backend) open(ctx context.Context, opts Options) error {
	size, err := b.checkPath(opts.Existing)
	if err != nil {
		return err
	}
	// sql.Open only records the DSN: nothing touches the file until the
	// first connection. The watcher's connects only when the first
	// subscriber starts it, by when the file exists: it never creates one.
	for _, c := range []struct {
		db            **sql.DB
		write, create bool
	}{{&b.r, false, !opts.Existing}, {&b.w, true, !opts.Existing}, {&b.ckpt, true, !opts.Existing}, {&b.hub.db, false, false}} {
		if *c.db, err = sql.Open("sqlite", dsn(b.path, b.busyTimeout, c.write, c.create)); err != nil {
			return fmt.Errorf("%s: %w", b.name(), err)
		}
	}
	b.r.SetMaxOpenConns(4)
	b.r.SetMaxIdleConns(4)
	// One writer: SQLite serializes writers anyway, and queueing them in
	// database/sql is cheaper than SQLITE_BUSY retries between connections.
	b.w.SetMaxOpenConns(1)
	b.w.SetMaxIdleConns(1)
	b.w.SetConnMaxIdleTime(0)
	b.w.SetConnMaxLifetime(0)
	b.ckpt.SetMaxOpenConns(1)
	b.hub.db.SetMaxOpenConns(1)

	if opts.Existing {
		// Checked on a read connection, whose pragmas write nothing,
		// before the write connection's journal_mode=WAL would convert a
		// foreign file.
		if err := b.checkExisting(ctx, size); err != nil {
			return err
		}
	}
	// Connecting runs the pragmas (journal_mode=WAL reads the header), so a
	// missing directory, a locked or a non-database file fails here.
	if err := b.w.PingContext(ctx); err != nil {
		return b.mapErr(ctx, "", err)
	}
	switch {
	case opts.Existing:
	case opts.NoMigrate:
		_, err = b.schemaState(ctx, b.r)
	default:
		_, err = b.Migrate(ctx)
	}
	if err != nil {
		return err
	}
	b.loops.Start(context.Background(), lifecycle.Component{Name: "sqlite checkpointer " + b.path, Run: b.checkpointLoop})
	return nil
}

// name is how errors name the store: "sqlite PATH".
func (b *Backend) name() string { return "sqlite " + b.path }

// checkPath refuses a directory and, for an Existing open, a missing file,
// before any connection could create one. It returns the file's size (-1
// when unknown).
func (b *Backend) checkPath(existing bool) (int64, error) {
	fi, err := os.Stat(b.path)
	switch {
	case err == nil && fi.IsDir():
		return 0, fmt.Errorf("%s: %w", b.name(), &backend.InputError{Field: "path", Reason: fmt.Sprintf("it is a directory, not a database file; give a file's path, e.g. %s", filepath.Join(b.path, "jobq.db"))})
	case err == nil:
		return fi.Size(), nil
	case existing && errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Dir(b.path)); errors.Is(err, fs.ErrNotExist) {
			// Said apart from a missing file because migrating alone
			// cannot help: the directory must be created first.
			return 0, b.schemaError(0, "neither the file nor its directory exists (the directory must be created first)")
		}
		return 0, b.schemaError(0, "the file does not exist")
	}
	// Anything else (a missing directory, no permission) is for the
	// driver to report when it connects.
	return -1, nil
}

// checkExisting refuses, for an Existing open, a file that does not hold
// this build's schema. size is the file's size (0: empty).
func (b *Backend) checkExisting(ctx context.Context, size int64) error {
	var tables int
	if err := b.r.QueryRowContext(ctx, qJobqTables).Scan(&tables); err != nil {
		return b.mapErr(ctx, "", err)
	}
	switch {
	case tables == 0 && size == 0:
		return b.schemaError(0, "the file is empty")
	case tables < 3:
		return b.schemaError(0, "the file holds no jobq tables")
	}
	v, err := b.schemaState(ctx, b.r)
	if err != nil {
		return err
	}
	if v < SchemaVersion() {
		return b.schemaError(v, "")
	}
	return nil
}

// schemaError is the error of a file whose schema is at version have (0:
// none, missing saying what is not there) when this build needs
// SchemaVersion. It names the file itself, as name does, so callers add
// only their operation.
func (b *Backend) schemaError(have int, missing string) error {
	return &backend.SchemaError{Store: b.name(), Have: have, Want: SchemaVersion(), Missing: missing}
}

// dsn builds the driver's data source name: a file: URI (so any path
// character is safe) with the pragmas every connection needs. create false
// opens the file read-write without creating it (mode=rw).
func dsn(path string, busy time.Duration, write, create bool) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(OFF)", busy.Milliseconds())
	if !create {
		q += "&mode=rw"
	}
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
	b.loops.Stop()
	b.limits.Close()
	for _, db := range []*sql.DB{b.ckpt, b.hub.db} {
		if db != nil {
			errs = append(errs, db.Close())
		}
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
		return fmt.Errorf("close %s: %w", b.name(), err)
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
