package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
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

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result)
	go func() { done <- runCtx(ctx, "", "--db", db, "worker", "--poll", "20ms", "--json-logs") }()
	b := openDB(t, db)
	waitFor(t, "both jobs to finish", func() bool {
		s, err := b.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tot := jobq.Totals(s)
		return tot.Pending+tot.Reserved == 0 && tot.Failed == 1
	})
	cancel()
	r := <-done
	if r.err != nil || !strings.Contains(r.errOut, `"msg":"worker stopped"`) {
		t.Fatalf("worker: %v\n%s", r.err, r.errOut)
	}

	list := run(t, "--db", db, "failed", "list")
	if !strings.Contains(list.out, "404 Not Found") || strings.Count(list.out, "\n") != 2 {
		t.Fatalf("failed list:\n%s", list.out)
	}
}
