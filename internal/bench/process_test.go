//go:build unix

package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/internal/proctest"
)

// fakeWorkerDrain runs drain on a fresh SQLite file with a worker process
// that is the shell script script, not jobq, and returns the error, what
// the process wrote on its standard error, and how long the run took.
func fakeWorkerDrain(t *testing.T, stall time.Duration, script string) (stderr string, took time.Duration, err error) {
	t.Helper()
	b, err := backend.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var errs proctest.Buffer
	cfg := Config{
		Backend: b, N: 10, Workers: 2, Stall: stall, WorkerStderr: &errs,
		WorkerProcess: func(queue, workload string) *exec.Cmd {
			return exec.Command("sh", "-c", script)
		},
	}
	start := time.Now()
	err = Run(t.Context(), cfg, []string{Drain}, func(Result) error { return nil })
	return errs.String(), time.Since(start), err
}

// TestWorkerProcessFailures: a worker process that fails, hangs, talks
// nonsense or quits half-way fails the run at once (or after the stall
// deadline) with what it said on its standard error, and is reaped.
func TestWorkerProcessFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		script string
		want   []string
	}{
		{"ExitsBeforeReady", `echo 'jobq: open sqlite:x.db: unable to open' >&2; exit 1`,
			[]string{"quit before it was ready", "exit status 1", "unable to open"}},
		{"QuitsHalfWay", `echo ready; read c; echo 'c 1000 10 0'; read g; echo 'd 4 0'; echo 'jobq: lost the store' >&2; exit 3`,
			[]string{"4 of 10 jobs done", "exit status 3", "lost the store"}},
		{"JobsFail", `echo ready; read c; echo 'c 1000 10 0'; read g; echo 'd 5 1'; exec sleep 30`,
			[]string{"1 no-op attempts did not succeed"}},
		{"Nonsense", `echo ready; read c; echo 'c 1000 10 0'; read g; echo 'hello there'; exec sleep 30`,
			[]string{`worker process said "hello there"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stderr, took, err := fakeWorkerDrain(t, 20*time.Second, c.script)
			if err == nil {
				t.Fatal("the run succeeded")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if took > 10*time.Second {
				t.Errorf("took %s: waited for a deadline", took)
			}
			if strings.Contains(c.script, ">&2") && !strings.HasPrefix(stderr, "worker process: jobq: ") {
				t.Errorf("standard error not passed on: %q", stderr)
			}
		})
	}
}

// TestWorkerProcessNotReady: one that never says ready is killed at the
// stall deadline and reaped.
func TestWorkerProcessNotReady(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, took, err := fakeWorkerDrain(t, 300*time.Millisecond, `echo $$ > `+pidFile+`; echo 'still opening' >&2; exec sleep 30`)
	if err == nil || !strings.Contains(err.Error(), "not ready after 300ms: still opening") {
		t.Fatalf("error %v; want it not ready after 300ms", err)
	}
	if took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("worker process %d still there (kill 0: %v)", pid, err)
	}
}
