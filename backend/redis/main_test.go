package redis

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend/redis/redistest"
)

func TestMain(m *testing.M) {
	// Worker processes for process_test.go re-execute this test binary.
	if s := os.Getenv(workerEnv); s != "" {
		os.Exit(runWorkerProcess(s))
	}
	goleak.VerifyTestMain(m)
}

// quiet is a logger for tests that do not look at the log: the shared
// server runs without persistence, so every open warns.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testURL returns the shared test server (see redistest.URL): skipped
// when it is unreachable, failed under CI=true.
func testURL(tb testing.TB) string {
	tb.Helper()
	return redistest.URL(tb)
}

// openTest opens a backend on a fresh key prefix (deleted when the test
// ends), closed when the test ends. Every script call it makes checks that
// its keys share one Cluster slot.
func openTest(tb testing.TB, opts Options) *Backend {
	tb.Helper()
	url := testURL(tb)
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = redistest.Prefix(tb, url)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	return openURL(tb, url, opts)
}

// openURL opens a backend on url, closed when the test ends.
func openURL(tb testing.TB, url string, opts Options) *Backend {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, url, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	b.c.slots = &slotCheck{}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}
