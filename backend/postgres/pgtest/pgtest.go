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
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable that overrides DefaultURL.
const EnvURL = "JOBQ_TEST_POSTGRES_URL"

// DefaultURL is the shared development server (see DEVELOPERS.md).
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

	tb   testing.TB
	bin  string // PostgreSQL's bin directory
	dir  string // holds data/, the socket and log
	port int
	asPG bool // run the binaries as the postgres user (we are root)
}

// StartServer initialises and starts a private server. The binaries are
// looked up in /usr/lib/postgresql/*/bin (the newest version) or on PATH;
// when none is found the test is skipped (failed under CI=true). When the
// test runs as root the server runs as the postgres user, since PostgreSQL
// refuses to run as root. Durability settings are relaxed (fsync off): a
// restart keeps every committed row, an OS crash would not.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	bin, err := findBin()
	if err != nil {
		unavailable(tb, "no PostgreSQL binaries for a private server: %v", err)
	}
	s := &Server{tb: tb, bin: bin, asPG: os.Geteuid() == 0}
	s.dir, err = os.MkdirTemp("", "jobq-pgtest-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		s.stop("immediate")
		_ = os.RemoveAll(s.dir)
	})
	if s.asPG {
		if err := chownToPostgres(s.dir); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
	}
	s.port, err = freePort()
	if err != nil {
		tb.Fatalf("pgtest: free port: %v", err)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	if out, err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.Start()
	return s
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// Start starts the (stopped) server and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200",
		s.port, s.dir)
	out, err := s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.tb.Fatalf("pgtest: start server: %v\n%s\n%s", err, out, log)
	}
}

// Stop stops the server: "fast" disconnects clients and shuts down
// cleanly, "immediate" kills it as a crash would (recovery runs at the next
// Start).
func (s *Server) Stop(mode string) {
	s.tb.Helper()
	if out, err := s.stop(mode); err != nil {
		s.tb.Fatalf("pgtest: stop server (%s): %v\n%s", mode, err, out)
	}
}

// Restart stops the server in mode and starts it again on the same port.
func (s *Server) Restart(mode string) {
	s.tb.Helper()
	s.Stop(mode)
	s.Start()
}

func (s *Server) stop(mode string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
		return nil, nil // not running
	}
	return s.run("pg_ctl", "-D", s.data(), "-m", mode, "-w", "-t", "60", "stop")
}

// run runs one PostgreSQL binary, as the postgres user when we are root.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// findBin returns the bin directory of the newest installed PostgreSQL.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", fmt.Errorf("pg_ctl not in /usr/lib/postgresql/*/bin nor on PATH")
	}
	return filepath.Dir(p), nil
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// chownToPostgres hands dir to the postgres user.
func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// freePort asks the kernel for a port that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
