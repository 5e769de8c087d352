package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/backend/redis/redistest"
)

// Tests of issue 35: a TLS URL for a plain Redis (one letter more in the
// scheme) hung every command for good, past --timeout and past SIGTERM.

// tlsURL is the test Redis server's URL with rediss://: a TLS URL for a
// port that speaks no TLS, with a password that must not be shown.
func tlsURL(t *testing.T) string {
	t.Helper()
	u := redistest.URL(t)
	if !strings.HasPrefix(u, "redis://") {
		t.Skipf("the test server's URL %s is not redis://", u)
	}
	return "rediss://:s3cret-pw@" + strings.TrimPrefix(u, "redis://")
}

// runWithin runs the built jobq with args, killing it after limit (an
// error of the test: the command was to end by itself), and returns what
// it printed, its exit code and how long it ran.
func runWithin(t *testing.T, limit time.Duration, args ...string) (binResult, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, jobqBinary(t), args...)
	cmd.Env = append(os.Environ(), "JOBQ_DB=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	_ = cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("jobq %s still ran after %s; killed. stdout %q, stderr %q", args[0], limit, out.String(), errOut.String())
	}
	return binResult{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}, took
}

const plainPortHint = "is it a plain port? use redis:// for one without TLS"

// TestCheckTLSToPlainRedis: 'jobq check --timeout 3s' with rediss:// for
// a plain Redis prints UNKNOWN (exit 3) within about the 3 s, on one line
// that names the likely cause and no password.
func TestCheckTLSToPlainRedis(t *testing.T) {
	jobqBinary(t)
	db := tlsURL(t)
	t.Parallel()
	r, took := runWithin(t, 20*time.Second, "check", "--timeout", "3s", "--db", db)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != checkUnknown || len(lines) != 1 || !strings.HasPrefix(r.stdout, "JOBQ UNKNOWN - ") ||
		!strings.Contains(r.stdout, plainPortHint) || r.stderr != "" {
		t.Fatalf("jobq check: exit %d, stdout %q, stderr %q; want exit 3 and one UNKNOWN line saying %q", r.code, r.stdout, r.stderr, plainPortHint)
	}
	if took > 6*time.Second {
		t.Fatalf("jobq check --timeout 3s took %s", took)
	}
	if strings.Contains(r.stdout, "s3cret-pw") {
		t.Fatalf("the password reached the output: %q", r.stdout)
	}
}

// TestStatsTLSToPlainRedis: 'jobq stats' with rediss://…?timeout=2s for a
// plain Redis fails (exit 1) within about the 2 s, with one line naming
// the likely cause and no password.
func TestStatsTLSToPlainRedis(t *testing.T) {
	jobqBinary(t)
	db := tlsURL(t)
	if strings.Contains(db, "?") {
		db += "&timeout=2s"
	} else {
		db += "?timeout=2s"
	}
	t.Parallel()
	r, took := runWithin(t, 20*time.Second, "stats", "--db", db)
	if r.code != exitError || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jobq: open: backend unavailable: ") ||
		!strings.Contains(r.stderr, plainPortHint) {
		t.Fatalf("jobq stats: exit %d, stderr %q; want exit 1 and one line saying %q", r.code, r.stderr, plainPortHint)
	}
	if took > 5*time.Second {
		t.Fatalf("jobq stats with timeout=2s took %s", took)
	}
	if strings.Contains(r.stdout+r.stderr, "s3cret-pw") {
		t.Fatalf("the password reached the output: %q %q", r.stdout, r.stderr)
	}
}

// TestOpenSIGTERM: the first SIGTERM ends a command still opening its
// store (here waiting 10 s, the default timeout, for a TLS handshake)
// at once, with exit 1 and the reason; the first signal used to be lost.
func TestOpenSIGTERM(t *testing.T) {
	bin := jobqBinary(t)
	db := tlsURL(t)
	t.Parallel()
	log := &lineWatch{want: "jobq: open:", seen: make(chan struct{})}
	p := startProcess(t, bin, log, "stats", "--db", db)
	//nolint:forbidigo // the command must be inside its open, which prints nothing to wait for
	time.Sleep(500 * time.Millisecond)
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	code := p.wait(t, log)
	if waited := time.Since(sent); waited > 3*time.Second {
		t.Fatalf("jobq stats exited %s after SIGTERM; log:\n%s", waited, log)
	}
	if code != exitError || !strings.Contains(log.String(), "jobq: open: received terminated") {
		t.Fatalf("jobq stats after SIGTERM: exit %d; want 1 and a line saying why; log:\n%s", code, log)
	}
	if strings.Contains(log.String(), "s3cret-pw") {
		t.Fatalf("the password reached the output: %s", log)
	}
}
