// Package pgtest helps tests that need a PostgreSQL server: the shared
// development server with a throwaway schema per test, or a private server
// the test starts, stops and restarts itself (for fault tests that must not
// disturb the shared one).
//
// A missing server skips the test with the reason, except under CI=true,
// where it fails: there a missing server is a broken setup, not a choice.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/internal/localserver"
)

// EnvURL names the environment variable that overrides DefaultURL.
const EnvURL = "JOBQ_TEST_POSTGRES_URL"

// DefaultURL is the shared development server (see docs/contributing.md).
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

var (
	reachOnce sync.Once
	reachErr  error
)

// URL returns the shared test server's URL ($JOBQ_TEST_POSTGRES_URL or
// DefaultURL) after checking once per process that it answers; otherwise it
// skips tb (fails it under CI=true).
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		url = DefaultURL
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Close(ctx)
	})
	if reachErr != nil {
		unavailable(tb, "postgres not reachable at %s: %v", url, reachErr)
	}
	return url
}

// unavailable skips, or fails under CI=true.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// Schema returns a fresh schema name ("jobq_t_" and 12 hex digits) on the
// server at url and drops the schema, with everything in it, when tb ends.
// The drop runs after cleanups registered later (closing backends on it).
func Schema(tb testing.TB, url string) string {
	tb.Helper()
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	schema := "jobq_t_" + hex.EncodeToString(buf[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := Exec(ctx, url, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Exec runs one statement on its own connection to url.
func Exec(ctx context.Context, url, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Server is a private PostgreSQL server in a temporary directory, on its
// own port, for tests that stop or restart the server. It is stopped and
// its directory removed when the test that started it ends.
type Server struct {
	// URL connects to the server's "postgres" database as the superuser
	// postgres (trust authentication, 127.0.0.1 only).
	URL string

	tb testing.TB
	pg *localserver.Postgres
}

// StartServer initialises and starts a private server (see
// localserver.NewPostgres); when there are no PostgreSQL binaries the test
// is skipped (failed under CI=true). Durability settings are relaxed
// (fsync off): a restart keeps every committed row, an OS crash would not.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	pg, err := localserver.NewPostgres([]string{"fsync=off", "full_page_writes=off", "max_connections=200"}, "--no-sync")
	if err != nil {
		unavailable(tb, "pgtest: %v", err)
	}
	s := &Server{URL: pg.URL, tb: tb, pg: pg}
	tb.Cleanup(pg.Close)
	s.Start()
	return s
}

// Start starts the (stopped) server and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.pg.Start(); err != nil {
		s.tb.Fatalf("pgtest: %v", err)
	}
}

// Stop stops the server: "fast" disconnects clients and shuts down
// cleanly, "immediate" kills it as a crash would (recovery runs at the next
// Start).
func (s *Server) Stop(mode string) {
	s.tb.Helper()
	if err := s.pg.Stop(mode); err != nil {
		s.tb.Fatalf("pgtest: %v", err)
	}
}

// Restart stops the server in mode and starts it again on the same port.
func (s *Server) Restart(mode string) {
	s.tb.Helper()
	s.Stop(mode)
	s.Start()
}

// Pooled is the shared test server reached through a private PgBouncer in
// transaction pooling mode (localserver.StartPgBouncer), stopped when the
// test ends.
type Pooled struct {
	// URL reaches the server's database through PgBouncer, as the shared
	// server's URL names it, with jobq's parameter jobq_pooler set.
	URL string
	// Direct is the host:port of the server itself, which jobq_listen
	// names for the listener (see postgres.Options.ListenAddr).
	Direct string
}

// StartPooled starts a PgBouncer in front of the shared server; without
// the pgbouncer program the test is skipped (failed under CI=true).
func StartPooled(tb testing.TB) Pooled {
	tb.Helper()
	cfg, err := pgx.ParseConfig(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if _, err := localserver.PgBouncerBin(); err != nil {
		unavailable(tb, "pgtest: %v", err)
	}
	pb, err := localserver.StartPgBouncer(cfg.Host, int(cfg.Port), cfg.User)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pb.Close)
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(pb.Port)),
		Path: "/" + cfg.Database, RawQuery: "sslmode=disable&jobq_pooler=transaction"}
	return Pooled{URL: u.String(), Direct: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
}
