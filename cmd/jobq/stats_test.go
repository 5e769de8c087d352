package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
)

// frameWriter cancels the watch once it has drawn n frames.
type frameWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Count(w.buf.String(), "TOTAL") >= w.n {
		w.cancel()
	}
	return len(p), nil
}

func TestStatsWatchRedrawsUntilCancelled(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "enqueue", "http", `{"url":"http://example.com"}`, "--queue", "q1"); r.err != nil {
		t.Fatal(r.err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &frameWriter{n: 2, cancel: cancel}
	root := newRootCmd(out, &bytes.Buffer{})
	root.SetArgs([]string{"--db", db, "stats", "--watch", "--interval", "10ms"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("watch ended with %v, want nil on Ctrl-C", err)
	}
	got := out.buf.String()
	if strings.Count(got, "q1 ") != 2 || strings.Count(got, "\n-- ") != 1 || !strings.HasPrefix(got, "-- ") {
		t.Fatalf("want two time-stamped frames showing q1, got:\n%s", got)
	}
}

func TestStatsEmpty(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	r := run(t, "--db", db, "stats")
	if r.err != nil || !strings.Contains(r.out, "TOTAL  0        0          0         0") {
		t.Fatalf("stats on an empty db: %q, %v", r.out, r.err)
	}
}
