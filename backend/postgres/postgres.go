// Package postgres is jobq's production backend: jobs live in a PostgreSQL
// schema that many worker processes on many machines share.
//
// Claims take due jobs with one short statement (SELECT … FOR UPDATE SKIP
// LOCKED in a materialized CTE feeding an UPDATE), so concurrent workers
// never wait on each other's rows and no transaction stays open while a
// handler runs. Outcomes are written back in batches, each fenced by the
// claim's token (the job's claim_token, which every claim raises). Every
// time that decides eligibility or a lease is the database's now(), so
// clock skew between machines cannot release or hide jobs.
//
// Beyond backend.Backend, the backend implements backend.Migrator (embedded,
// versioned migrations), backend.Notifier (LISTEN/NOTIFY), and
// backend.TxInserter and backend.TxCompleter (enqueue and complete inside
// the caller's pgx.Tx or *sql.Tx), and backend.KeyController (keys.go): a
// queue with key rules is claimed under its settings row's lock, so a
// key's limit and an ordered key's head hold across every process, while
// queues without rules keep the one-statement claim.
//
// Importing the package registers the "postgres" and "postgresql" URL
// schemes with backend.Open:
//
//	postgres://user:pass@host:5432/db?jobq_schema=myapp&pool_max_conns=20
//
// The jobq_schema query parameter chooses the schema (see Options.Schema),
// jobq_pooler and jobq_listen say that the URL reaches the server through
// a pooler such as PgBouncer (Options.Pooler, Options.ListenAddr); every
// other parameter is pgx's.
package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/limitwake"
)

func init() {
	open := func(ctx context.Context, url string, oo backend.OpenOptions) (backend.Backend, error) {
		b, err := Open(ctx, url, Options{Existing: oo.Existing})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	backend.Register("postgres", open)
	backend.Register("postgresql", open)
}

// SchemaParam is the URL query parameter that names the schema. Open
// removes it, PoolerParam and ListenParam before handing the URL to pgx.
const SchemaParam = "jobq_schema"

// PoolerParam is the URL query parameter that sets Options.Pooler, and
// ListenParam the one that sets Options.ListenAddr.
const (
	PoolerParam = "jobq_pooler"
	ListenParam = "jobq_listen"
)

// PoolerTransaction is the Options.Pooler of a pooler in transaction
// mode (PgBouncer's pool_mode = transaction).
const PoolerTransaction = "transaction"

// DefaultSchema is the schema used when neither Options.Schema nor the URL
// names one.
const DefaultSchema = "jobq"

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Schema is the PostgreSQL schema (namespace) holding jobq's tables, so
	// several applications can share one database. It must be 1 to 58
	// lowercase letters, digits or underscores, starting with a letter or
	// underscore. The URL parameter jobq_schema sets it too; naming two
	// different schemas is an error. Defaults to "jobq".
	Schema string

	// NoMigrate skips applying pending migrations at Open; the schema must
	// then be migrated by other means (jobq migrate, or Migrate). Defaults
	// to false: Open migrates.
	NoMigrate bool

	// QueryTimeout bounds every statement the backend runs, on top of the
	// caller's context, so a stalled server or a half-open connection cannot
	// hang a worker; a statement that runs out fails with
	// backend.ErrUnavailable. Defaults to 10 seconds.
	QueryTimeout time.Duration

	// MaxConns caps the connection pool. One pool serves a whole worker
	// process: its claimer, completer and sweeper need a few connections
	// however many workers run, plus one per concurrent producer or handler
	// transaction begun on Pool. The URL parameter pool_max_conns sets it
	// too, and wins. Defaults to 4 × GOMAXPROCS, at least 16.
	MaxConns int

	// Logger receives the listener's reconnect warnings. Defaults to
	// slog.Default().
	Logger *slog.Logger

	// Existing opens only a schema that already holds jobq's tables at
	// this build's version: nothing is created or migrated, and a missing
	// or older schema fails with backend.ErrNoSchema (see
	// backend.OpenOptions). Defaults to false: Open creates and migrates.
	Existing bool

	// NoVacuum turns off the backend's own vacuuming of the jobs table (see
	// vacuumer.go) for servers whose autovacuum is tuned for a queue table.
	// Defaults to false: the backend vacuums when dead rows pile up.
	NoVacuum bool

	// Pooler says what stands between the backend and the server: "" (the
	// default) for a direct connection or a session-mode pooler, or
	// PoolerTransaction for a pooler that hands each transaction whichever
	// server connection is free (PgBouncer's pool_mode = transaction),
	// where nothing may outlive a transaction on a connection. The backend
	// keeps no session state anyway (settings, advisory locks and the
	// search path are all transaction-local); with PoolerTransaction it also
	// runs statements unprepared (pgx's QueryExecModeExec, unless the URL's
	// default_query_exec_mode says otherwise), since a pooler of PgBouncer
	// 1.20 or older does not carry named prepared statements over, and it
	// does not LISTEN through the pooler: see ListenAddr. The URL parameter
	// jobq_pooler sets it too.
	Pooler string

	// ListenAddr, with Pooler, is the host:port of the server itself,
	// bypassing the pooler, for the one connection that LISTENs for other
	// processes' wake-ups (same user, password and database as the URL).
	// Without it, a backend behind a transaction pooler does not listen:
	// its workers are woken at once by jobs this process makes available
	// and find other processes' jobs when they poll (WorkerConfig's
	// PollInterval). The URL parameter jobq_listen sets it too.
	ListenAddr string

	// wrapConn, when set, wraps every connection of the backend once it is
	// established, TLS included, and before the protocol starts: the seam
	// the package's tests inject faults through (see fault_test.go). Not an
	// option for users, so unexported.
	wrapConn connWrapper

	// tracer, when set, traces every statement and batch of the backend's
	// connections: the seam the round-trip tests count through (see
	// roundtrip_test.go). Not an option for users, so unexported.
	tracer pgx.QueryTracer
}

// connWrapper wraps a connection (see Options.wrapConn). An interface
// rather than a func, so Options stays comparable.
type connWrapper interface {
	wrap(net.Conn) net.Conn
}

// schemaPattern: lowercase, so the quoted name means what an unquoted one
// would; 58 bytes, so "jobq_" + schema fits a 63-byte channel name.
var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,57}$`)

// validateSchema checks a schema name; see Options.Schema.
func validateSchema(s string) error {
	if !schemaPattern.MatchString(s) {
		return &backend.InputError{Field: "schema", Reason: fmt.Sprintf("%q: use 1 to 58 lowercase letters, digits or '_', starting with a letter or '_'", s)}
	}
	return nil
}

// resolve fills defaults and refuses bad values.
func (o Options) resolve() (Options, error) {
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := validateSchema(o.Schema); err != nil {
		return o, err
	}
	if o.QueryTimeout < 0 {
		return o, &backend.InputError{Field: "query timeout", Reason: fmt.Sprintf("%s is negative", o.QueryTimeout)}
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = 10 * time.Second
	}
	if o.MaxConns < 0 || o.MaxConns > 10000 {
		return o, &backend.InputError{Field: "max conns", Reason: fmt.Sprintf("%d is outside 0..10000", o.MaxConns)}
	}
	if o.MaxConns == 0 {
		o.MaxConns = max(16, 4*runtime.GOMAXPROCS(0))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Pooler != "" && o.Pooler != PoolerTransaction {
		return o, &backend.InputError{Field: "pooler", Reason: fmt.Sprintf("%q: use %q for a pooler in transaction mode, or nothing", o.Pooler, PoolerTransaction)}
	}
	if o.ListenAddr != "" {
		if o.Pooler == "" {
			return o, &backend.InputError{Field: "listen address", Reason: "is only for a backend behind a pooler: set the pooler too (jobq_pooler=transaction)"}
		}
		if _, port, err := net.SplitHostPort(o.ListenAddr); err != nil || !validPort(port) {
			return o, &backend.InputError{Field: "listen address", Reason: fmt.Sprintf("%q: want host:port of the server itself", o.ListenAddr)}
		}
	}
	return o, nil
}

// validPort tells whether s is a TCP port number.
func validPort(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n > 0
}

// TCP keepalive: a peer that vanished without closing (a half-open
// connection) is detected within about idle + count × interval.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	connectTimeout    = 10 * time.Second
)

// Backend is a jobq store in one PostgreSQL schema. It is safe for
// concurrent use; many Backends (in one process or many) may share a schema.
type Backend struct {
	pool       *pgxpool.Pool
	opts       Options
	q          queries
	rq         retQueries // queries_retention.go
	kq         keyQueries // keys_sql.go
	host       string     // host:port for error messages
	closed     atomic.Bool
	closeMu    sync.Mutex
	listener   *listener
	sender     *sender
	background lifecycle.Group    // the vacuumer, listener and sender loops
	limits     *limitwake.Tracker // wakes local workers when a queue limit lets jobs go
	origin     string             // tags this Backend's NOTIFY payloads (see sqlNotify)
	url        string             // as given to Open when it has secrets, to scrub them from errors and logs
	opening    atomic.Bool        // Open is running: its deadline running out is ErrUnavailable (see classify)
	// keyed is the store's keyed queues (not paused) as the last claim
	// read them (sqlClaimPlan's fourth column), nil before the first: a
	// claim of those queues alone skips sqlClaim (see JobClaim).
	keyed atomic.Pointer[[]string]
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Migrator    = (*Backend)(nil)
	_ backend.Notifier    = (*Backend)(nil)
	_ backend.TxInserter  = (*Backend)(nil)
	_ backend.TxCompleter = (*Backend)(nil)

	_ backend.QueueController = (*Backend)(nil)
)

// Open connects to the PostgreSQL server named by a postgres:// or
// postgresql:// URL and, unless opts.NoMigrate or opts.Existing, applies
// pending migrations to the schema. ctx bounds only the opening (connecting
// and migrating), each step of it; the URL's connect_timeout bounds each
// connection's dial, TLS and login.
//
// It fails with backend.ErrInvalidInput for a malformed URL or option,
// backend.ErrUnavailable when the server cannot be reached, refuses the
// login, lacks the database or does not answer before ctx's deadline (a
// TLS setting at odds with the server's says so), backend.ErrSchemaTooNew
// when the schema was migrated by a newer jobq, and, with opts.Existing,
// backend.ErrNoSchema when the schema is missing, empty or older than this
// build. No error (nor any log line of the Backend) shows the URL's
// password or password-like query parameters (see backend.Redact).
func Open(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	b, err := openBackend(ctx, rawURL, opts)
	if err != nil {
		return nil, backend.RedactError(err, rawURL)
	}
	return b, nil
}

// openBackend is Open before its errors are redacted.
func openBackend(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	connString, params, err := stripParams(rawURL)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		field, url string
		opt        *string
	}{{"schema", params.schema, &opts.Schema}, {"pooler", params.pooler, &opts.Pooler}, {"listen address", params.listen, &opts.ListenAddr}} {
		if p.url == "" {
			continue
		}
		if *p.opt != "" && *p.opt != p.url {
			return nil, &backend.InputError{Field: p.field, Reason: fmt.Sprintf("URL names %q but Options says %q", p.url, *p.opt)}
		}
		*p.opt = p.url
	}
	opts, err = opts.resolve()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, &backend.InputError{Field: "backend URL", Reason: err.Error()}
	}
	if !strings.Contains(connString, "pool_max_conns=") {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	configureConn(cfg.ConnConfig)
	if opts.Pooler == PoolerTransaction && !strings.Contains(connString, "default_query_exec_mode=") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
	}
	if w := opts.wrapConn; w != nil {
		// AfterNetConnect, not DialFunc: a dialled connection is wrapped
		// before pgx starts TLS on it (sslmode=prefer, pgx's default, takes
		// TLS whenever the server offers it), and a wrapper there sees
		// only ciphertext.
		cfg.ConnConfig.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
			return w.wrap(c), nil
		}
	}

	b := &Backend{opts: opts, q: newQueries(opts.Schema), rq: newRetQueries(opts.Schema), kq: newKeyQueries(opts.Schema), host: hostOf(cfg.ConnConfig), origin: newOrigin()}
	if len(backend.Secrets(rawURL)) > 0 {
		b.url = rawURL // only a URL with secrets needs scrubbing from errors
	}
	b.opening.Store(true)
	defer b.opening.Store(false)
	b.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, b.mapError(ctx, "open", err)
	}
	b.listener, b.sender = newListener(b), newSender(b)
	b.limits = limitwake.New(func(q string) { b.listener.notifyLocal([]string{q}) })
	err = b.do(ctx, "open", func(ctx context.Context) error { return b.pool.Ping(ctx) })
	if err == nil {
		switch {
		case opts.Existing:
			err = b.checkExisting(ctx)
		case opts.NoMigrate:
			err = b.checkVersion(ctx)
		default:
			_, err = b.Migrate(ctx)
		}
	}
	if err != nil {
		b.pool.Close()
		return nil, err
	}
	if !opts.NoVacuum {
		v := newVacuumer(b)
		b.background.Start(context.Background(), lifecycle.Component{Name: "postgres vacuumer", Run: v.run})
	}
	return b, nil
}

// configureConn sets what every connection (pooled or the listener's)
// needs: a connect timeout and TCP keepalives.
func configureConn(cc *pgx.ConnConfig) {
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = connectTimeout
	}
	dialer := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
	}
	cc.DialFunc = dialer.DialContext
}

// newOrigin returns a random tag that tells this Backend's NOTIFY hints
// from other processes'.
func newOrigin() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

// hostOf names the first server of a config for error messages.
func hostOf(cc *pgx.ConnConfig) string {
	return net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
}

// urlParams are jobq's own query parameters of a URL.
type urlParams struct{ schema, pooler, listen string }

// stripParams removes jobq's parameters (SchemaParam, PoolerParam,
// ListenParam) from a URL's query and returns them. It works on the text
// rather than net/url so multi-host URLs (postgres://h1,h2/db) pass
// through untouched.
func stripParams(raw string) (string, urlParams, error) {
	var p urlParams
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, p, nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", p, &backend.InputError{Field: "backend URL", Reason: fmt.Sprintf("query: %v", err)}
	}
	if !values.Has(SchemaParam) && !values.Has(PoolerParam) && !values.Has(ListenParam) {
		return raw, p, nil
	}
	p = urlParams{schema: values.Get(SchemaParam), pooler: values.Get(PoolerParam), listen: values.Get(ListenParam)}
	values.Del(SchemaParam)
	values.Del(PoolerParam)
	values.Del(ListenParam)
	if len(values) == 0 {
		return base, p, nil
	}
	return base + "?" + values.Encode(), p, nil
}

// Pool is the connection pool the backend runs on. Applications may begin
// their own transactions on it, for instance to enqueue with
// JobInsertManyTx or to complete a job with JobCompleteTx; each such
// transaction holds one of MaxConns connections while open. It is closed by
// Close.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Schema is the schema the backend's tables live in.
func (b *Backend) Schema() string { return b.opts.Schema }

// Close stops the background loops (vacuumer, listener, sender) and
// closes the pool, waiting for calls in flight to return their
// connections. It is idempotent; calls after Close fail with
// backend.ErrClosed.
func (b *Backend) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Swap(true) {
		return nil
	}
	// Stopped first, so neither starts its loop once the group is down.
	b.listener.stop()
	b.sender.stop()
	b.background.Stop()
	b.limits.Close()
	b.pool.Close()
	return nil
}

// maxTries bounds how often do sends a statement that failed retryably.
const maxTries = 4

// do runs fn with QueryTimeout applied, retries it while it fails in a way
// that is safe to repeat (never sent; serialization failure or deadlock,
// which the server rolled back), and maps the final error. Every statement
// the backend runs on its own pool goes through it.
func (b *Backend) do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return b.run(ctx, op, maxTries, b.opts.QueryTimeout, fn)
}

// doInTx is do for a statement inside the caller's transaction: one try,
// since a failed statement aborts the whole transaction.
func (b *Backend) doInTx(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return b.run(ctx, op, 1, b.opts.QueryTimeout, fn)
}

// inTx runs fn in a transaction on the pool and commits it: pgx.BeginFunc,
// but a failed BEGIN comes back marked as one (beginError), which
// retryable may then send again whatever pgx says of it.
func (b *Backend) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return beginError{err}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; a failed fn's error says more
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// checkOpen is ErrClosed, wrapped with op, after Close: every call checks
// it first, so one with nothing to do answers as one with work would.
func (b *Backend) checkOpen(op string) error {
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	return nil
}

func (b *Backend) run(ctx context.Context, op string, maxTries int, timeout time.Duration, fn func(ctx context.Context) error) error {
	if err := b.checkOpen(op); err != nil {
		return err
	}
	for try := 1; ; try++ {
		qctx, cancel := context.WithTimeoutCause(ctx, timeout, errQueryTimeout)
		err := fn(qctx)
		if err == nil {
			cancel()
			return nil
		}
		if try >= maxTries || !retryable(err) || qctx.Err() != nil || b.closed.Load() {
			err = b.mapError(qctx, op, err)
			cancel()
			return err
		}
		cancel()
		pause := time.Duration(try) * time.Millisecond * time.Duration(1+rand.IntN(5))
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%s: %w", op, context.Cause(ctx))
		case <-timer.C:
		}
	}
}
