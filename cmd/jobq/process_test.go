package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// TestWorkerProcessSIGTERM builds jobq and runs 'jobq worker' as a process:
// SIGTERM while an http job is in flight lets that job finish, claims
// nothing new, and exits 0.
func TestWorkerProcessSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "jobq")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		<-release
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test must not leave the server blocked
		}
	}()

	db := tempDB(t)
	payload := `{"url":"` + srv.URL + `"}`
	first := jobID(t, run(t, "--db", db, "enqueue", "http", payload))

	log := &lineWatch{want: "worker stopping", seen: make(chan struct{})}
	worker := exec.Command(bin, "--db", db, "worker", "--poll", "20ms", "--shutdown-timeout", "30s")
	worker.Stdout, worker.Stderr = log, log
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			worker.Process.Kill()
			<-exited
		}
	}()

	await(t, started, "the http job to start", log)
	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(t, log.seen, "the worker to stop claiming", log)
	second := jobID(t, run(t, "--db", db, "enqueue", "http", payload))
	close(release)

	select {
	case err := <-exited:
		exited <- err // for the deferred check
		if err != nil {
			t.Fatalf("worker exited with %v, want 0; log:\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not exit after SIGTERM; log:\n%s", log)
	}

	b := openDB(t, db)
	if _, err := b.JobGet(t.Context(), first); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("in-flight job %d after shutdown: %v, want done (deleted)", first, err)
	}
	job, err := b.JobGet(t.Context(), second)
	if err != nil || job.Status != backend.StatusPending || job.Attempts != 0 {
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
