package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend/postgres/pgtest"
)

func TestMain(m *testing.M) {
	// Worker processes for process_test.go re-execute this test binary.
	if os.Getenv(procURLEnv) != "" {
		os.Exit(runWorkerProcess())
	}
	goleak.VerifyTestMain(m)
}

// testURL returns the shared test server (see pgtest.URL): skipped when
// it is unreachable, failed under CI=true.
func testURL(tb testing.TB) string {
	tb.Helper()
	return pgtest.URL(tb)
}

// testSchema returns a fresh schema name, dropped when the test ends.
func testSchema(tb testing.TB) string {
	tb.Helper()
	return pgtest.Schema(tb, testURL(tb))
}

// openTest opens a backend on a fresh schema, closed when the test ends.
func openTest(tb testing.TB, opts Options) *Backend {
	tb.Helper()
	url := testURL(tb)
	if opts.Schema == "" {
		opts.Schema = testSchema(tb)
	}
	return openSchema(tb, url, opts)
}

// openSchema opens a backend on opts.Schema (another instance on a schema
// that openTest made, for example), closed when the test ends.
func openSchema(tb testing.TB, url string, opts Options) *Backend {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, url, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// execTest runs one statement on the test server outside any backend.
func execTest(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pgtest.Exec(ctx, testURL(tb), sql, args...); err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
}

// testRole creates a login role with a password that may use the tables
// and sequences of schema without owning them (the role a deployment
// might give its workers), and returns the role and a URL that logs in as
// it with the password in it (trust authentication ignores the password).
// The role is dropped when tb ends, after the cleanups registered later
// (closing backends that use it) and before the schema's own.
func testRole(tb testing.TB, schema string) (role, roleURL string) {
	tb.Helper()
	url := testURL(tb)
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	role = "jobq_r_" + hex.EncodeToString(buf[:])
	password := "pw-" + hex.EncodeToString(buf[:])
	execTest(tb, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// DROP OWNED also revokes the role's privileges, which DROP ROLE
		// insists on.
		if err := pgtest.Exec(ctx, url, fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %s", role, role)); err != nil {
			tb.Errorf("drop role %s: %v", role, err)
		}
	})
	s := quoteIdent(schema)
	execTest(tb, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s; GRANT ALL ON ALL TABLES IN SCHEMA %s TO %s; GRANT ALL ON ALL SEQUENCES IN SCHEMA %s TO %s",
		s, role, s, role, s, role))
	u, err := neturl.Parse(url)
	if err != nil {
		tb.Fatalf("test URL: %v", err)
	}
	u.User = neturl.UserPassword(role, password)
	return role, u.String()
}

// logRecords keeps what a Backend logs, for tests of its log lines.
type logRecords struct {
	mu    sync.Mutex
	lines []logLine
}

// logLine is one record with its attributes (those of Logger.With too)
// rendered as text.
type logLine struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
	Text  string // the message and every attribute as key=value
}

// newLogRecords returns an empty record and a logger writing to it.
func newLogRecords() (*logRecords, *slog.Logger) {
	r := &logRecords{}
	return r, slog.New(&recordHandler{r: r})
}

// at returns the lines logged at level.
func (r *logRecords) at(level slog.Level) []logLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logLine
	for _, l := range r.lines {
		if l.Level == level {
			out = append(out, l)
		}
	}
	return out
}

// all returns every line logged so far.
func (r *logRecords) all() []logLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logLine(nil), r.lines...)
}

type recordHandler struct {
	r     *logRecords
	attrs []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordHandler) Handle(_ context.Context, rec slog.Record) error {
	line := logLine{Level: rec.Level, Msg: rec.Message, Attrs: map[string]string{}}
	text := []string{rec.Message}
	add := func(a slog.Attr) bool {
		v := a.Value.Resolve().String()
		line.Attrs[a.Key] = v
		text = append(text, a.Key+"="+v)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(add)
	line.Text = strings.Join(text, " ")
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.lines = append(h.r.lines, line)
	return nil
}
