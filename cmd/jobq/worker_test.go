package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// workUntil runs 'jobq worker --poll 20ms args…' in process over db until
// done holds for the queues' totals, then cancels it (what SIGTERM does)
// and returns what it printed.
func workUntil(t *testing.T, db, what string, done func(jobq.QueueStats) bool, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan result, 1) // a failed wait must not strand the worker's goroutine
	go func() {
		ran <- runCtx(ctx, "", append([]string{"--db", db, "worker", "--poll", "20ms"}, args...)...)
	}()
	b := openDB(t, db)
	waitFor(t, what, func() bool {
		s, err := b.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return done(jobq.Totals(s))
	})
	cancel()
	return <-ran
}

// TestWorkerCommand runs 'jobq worker' in process over a SQLite file: an
// http job to a 2xx endpoint is done, one to a 404 lands in failed jobs,
// and cancelling the context (what SIGTERM does) stops it cleanly.
func TestWorkerCommand(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	db := tempDB(t)
	for _, path := range []string{"/ok", "/gone"} {
		if r := run(t, "--db", db, "enqueue", "http", `{"url":"`+srv.URL+path+`"}`); r.err != nil {
			t.Fatal(r.err)
		}
	}

	r := workUntil(t, db, "both jobs to finish", func(tot jobq.QueueStats) bool {
		return tot.Pending+tot.Reserved == 0 && tot.Failed == 1
	}, "--json-logs", "--http-allow", strings.TrimPrefix(srv.URL, "http://"))
	if r.err != nil || !strings.Contains(r.errOut, `"msg":"worker stopped"`) {
		t.Fatalf("worker: %v\n%s", r.err, r.errOut)
	}

	list := run(t, "--db", db, "failed", "list")
	if !strings.Contains(list.out, "404 Not Found") || strings.Count(list.out, "\n") != 2 {
		t.Fatalf("failed list:\n%s", list.out)
	}
}

// TestWorkerRefusesLoopback runs 'jobq worker' without --http-allow over a
// SQLite file: an http job aimed at a server on 127.0.0.1 is moved to the
// failed jobs after one attempt (of five allowed), with the refusal as its
// error, and the server never hears from it.
func TestWorkerRefusesLoopback(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, nil)
	db := tempDB(t)
	if r := run(t, "--db", db, "enqueue", "http", `{"url":"`+srv.URL+`/hook?token=s3cret"}`, "--max-attempts", "5"); r.err != nil {
		t.Fatal(r.err)
	}

	r := workUntil(t, db, "the job to fail", func(tot jobq.QueueStats) bool {
		return tot.Pending+tot.Reserved+tot.Scheduled == 0 && tot.Failed == 1
	}, "--retry-base", "10ms", "--json-logs")
	if r.err != nil {
		t.Fatalf("worker: %v\n%s", r.err, r.errOut)
	}
	failed, err := openDB(t, db).FailedList(t.Context(), backend.FailedListParams{})
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed jobs: %v, %v", failed, err)
	}
	want := "refused to connect to " + strings.TrimPrefix(srv.URL, "http://") + ": 127.0.0.1 is a loopback address"
	if f := failed[0]; f.Attempts != 1 || !strings.Contains(f.Error, want) || !strings.Contains(f.Error, "--http-allow") {
		t.Fatalf("failed job: %d attempts, error %q; want 1 attempt and an error containing %q and the flag", f.Attempts, f.Error, want)
	}
	if strings.Contains(failed[0].Error, "s3cret") || strings.Contains(r.errOut, "s3cret") {
		t.Fatalf("the URL's query token leaked: error %q, log:\n%s", failed[0].Error, r.errOut)
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback server got %d requests", hits.Load())
	}
}

// TestWorkerHTTPAllowFlag: a bad --http-allow entry exits 2 with one line
// naming the flag and the entry, before the store is touched.
func TestWorkerHTTPAllowFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--http-allow", "10.0.0.0/33"},
		{"--http-allow", "10.0.0.0/8", "--http-allow", "internal.example"},
		{"--http-allow", "10.0.0.0/8,,internal.example:1"},
	} {
		dir := t.TempDir()
		db := "sqlite:" + filepath.Join(dir, "jobq.db")
		r := run(t, append([]string{"--db", db, "worker"}, args...)...)
		if r.code() != exitUsage || !strings.HasPrefix(r.err.Error(), "--http-allow: ") || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("%v: exit %d, %v; want 2 and one line naming --http-allow", args, r.code(), r.err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v: the store was created", args)
		}
	}
}
