package postgres

import (
	"context"
	"os"
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
