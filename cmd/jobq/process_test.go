package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// lineWatch collects a process's output and closes seen once want appears.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// await waits for ch or fails the test with the worker's log.
func await(t *testing.T, ch <-chan struct{}, what string, log *lineWatch) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s; worker log:\n%s", what, log)
	}
}

var (
	buildOnce sync.Once
	binDir    string // holds the built jobq; removed by TestMain
	binErr    error
)

// jobqBinary builds jobq once for the tests that run it as a process and
// returns its path. Such tests skip under -short.
func jobqBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the jobq binary")
	}
	buildOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "jobq-cmd-test-"); binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "jobq"), ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "jobq")
}

// proc is a jobq process a test started; it is killed should the test end
// first.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess starts bin with args, its output going to log, and
// without JOBQ_DB from the test's environment.
func startProcess(t *testing.T, bin string, log io.Writer, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "JOBQ_DB=")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit code is read from cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait returns the process's exit code once it exits (-1 when a signal
// killed it), failing the test with log after 30 s.
func (p *proc) wait(t *testing.T, log fmt.Stringer) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("process did not exit in 30s; log:\n%s", log)
		return 0
	}
}

// binResult is what one run of the built binary produced.
type binResult struct {
	stdout, stderr string
	code           int
}

// runBinary runs the built jobq with args, stdin as its standard input and
// env added to a copy of the test's environment without JOBQ_DB.
func runBinary(t *testing.T, stdin string, env []string, args ...string) binResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), jobqBinary(t), args...)
	cmd.Env = append(append(os.Environ(), "JOBQ_DB="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run jobq %v: %v", args, err)
	}
	return binResult{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// heldServer starts an HTTP server whose handlers block until release is
// called (at the latest when the test ends); started is closed when the
// first request arrives.
func heldServer(t *testing.T) (url string, started <-chan struct{}, release func()) {
	t.Helper()
	first, held := make(chan struct{}), make(chan struct{})
	var startOnce, releaseOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		startOnce.Do(func() { close(first) })
		<-held
	}))
	release = func() { releaseOnce.Do(func() { close(held) }) }
	t.Cleanup(func() {
		release() // a failed test must not leave the server blocked
		srv.Close()
	})
	return srv.URL, first, release
}

// TestWorkerProcessSIGTERM builds jobq and runs 'jobq worker' as a process:
// SIGTERM while an http job is in flight lets that job finish, claims
// nothing new, and exits 0.
func TestWorkerProcessSIGTERM(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()

	srvURL, started, release := heldServer(t)
	db := tempDB(t)
	payload := `{"url":"` + srvURL + `"}`
	first := jobID(t, run(t, "--db", db, "enqueue", "http", payload))

	log := &lineWatch{want: "worker stopping", seen: make(chan struct{})}
	worker := startProcess(t, bin, log, "--db", db, "worker", "--poll", "20ms", "--shutdown-timeout", "30s", "--http-allow", "127.0.0.1")
	await(t, started, "the http job to start", log)
	if err := worker.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, log.seen, "the worker to stop claiming", log)
	second := jobID(t, run(t, "--db", db, "enqueue", "http", payload))
	release()
	if code := worker.wait(t, log); code != 0 {
		t.Fatalf("worker exited %d, want 0; log:\n%s", code, log)
	}
	// The command's line about the signal comes before the worker's own.
	out := log.String()
	if i, j := strings.Index(out, "shutting down: running jobs may finish"), strings.Index(out, "worker stopped"); i < 0 || j < i {
		t.Errorf("the shutdown line at %d, \"worker stopped\" at %d; want the first before the second:\n%s", i, j, out)
	}

	b := openDB(t, db)
	if _, err := b.JobGet(t.Context(), first); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("in-flight job %d after shutdown: %v, want done (deleted)", first, err)
	}
	job, err := b.JobGet(t.Context(), second)
	if err != nil || job.Status != backend.StatePending || job.Attempts != 0 {
		t.Fatalf("job enqueued after SIGTERM = %+v, %v; want pending, never tried", job, err)
	}
	if failed, _ := b.FailedList(t.Context(), backend.FailedListParams{}); len(failed) != 0 {
		t.Fatalf("failed jobs: %+v", failed[0])
	}
}

func jobID(t *testing.T, r result) int64 {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	var id int64
	if _, err := fmt.Sscan(strings.TrimSpace(r.out), &id); err != nil {
		t.Fatalf("enqueue printed %q", r.out)
	}
	return id
}

// TestWorkerProcessSecondSignal: the first SIGTERM starts the graceful
// stop, which waits for a job that hangs; a second signal (here SIGINT)
// ends the process at once with 128 + its number, leaving the job reserved
// for its lease to expire rather than lost.
func TestWorkerProcessSecondSignal(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()
	srvURL, started, _ := heldServer(t) // never answers while the worker runs
	db := tempDB(t)
	id := jobID(t, run(t, "--db", db, "enqueue", "http", `{"url":"`+srvURL+`","timeout":"10m"}`))
	log := &lineWatch{want: "send SIGTERM or Ctrl-C again", seen: make(chan struct{})}
	worker := startProcess(t, bin, log, "--db", db, "worker", "--poll", "20ms", "--shutdown-timeout", "10m", "--http-allow", "127.0.0.1")
	await(t, started, "the http job to start", log)
	if err := worker.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, log.seen, "the worker to start its graceful stop", log)
	if !worker.running() {
		t.Fatalf("worker exited on the first SIGTERM with a job running; log:\n%s", log)
	}
	sent := time.Now()
	if err := worker.signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := worker.wait(t, log); code != exitSignal+int(syscall.SIGINT) {
		t.Fatalf("worker exited %d after the second signal, want %d; log:\n%s", code, exitSignal+int(syscall.SIGINT), log)
	}
	// At once, not after the 10 minute shutdown timeout: 30 s (what wait
	// allows) tells the two apart with room for a loaded machine (it was
	// 10 s).
	if waited := time.Since(sent); waited > 30*time.Second {
		t.Errorf("worker took %s to exit after the second signal", waited)
	}
	if !strings.Contains(log.String(), "jobq: received interrupt again: exiting now") {
		t.Errorf("no line saying why it exited:\n%s", log)
	}
	job, err := openDB(t, db).JobGet(t.Context(), id)
	if err != nil || job.Status != backend.StateReserved || job.Attempts != 1 {
		t.Fatalf("hung job after a forced exit = %+v, %v; want reserved, attempt 1", job, err)
	}
}
