package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/proctest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeBinary()
		os.Exit(code)
	}))
}

// result is what one in-process run of the command line produced.
type result struct {
	out, errOut string
	err         error
}

// code is the exit status main would use.
func (r result) code() int {
	if r.err == nil {
		return 0
	}
	return exitCode(r.err)
}

// run executes jobq with args in process, the way main does.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runCtx(t.Context(), "", args...)
}

// runCtx runs jobq with ctx and stdin.
func runCtx(ctx context.Context, stdin string, args ...string) result {
	var out, errOut proctest.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	err := root.ExecuteContext(ctx)
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// tempDB returns the --db URL of a fresh SQLite file for one test.
func tempDB(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "jobq.db")
}

// openDB opens db for a test to arrange or check state directly.
func openDB(t *testing.T, db string) backend.Backend {
	t.Helper()
	b, err := backend.Open(t.Context(), db)
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
