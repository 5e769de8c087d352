package jobqtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/backend/postgres"
	"github.com/jobq/jobq/backend/postgres/pgtest"
	"github.com/jobq/jobq/backend/redis"
	"github.com/jobq/jobq/backend/redis/redistest"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/jobqtest"
)

// storing names the backends that keep jobs; clocked ones are opened on
// the clock given (nil: the real one), the others ignore it.
var storing = []struct {
	name    string
	clocked bool
	open    func(t *testing.T, now func() time.Time) backend.Backend
}{
	{"memory", true, func(t *testing.T, now func() time.Time) backend.Backend {
		b := memory.New(memory.Options{Now: now})
		t.Cleanup(func() { b.Close() })
		return b
	}},
	{"sqlite", true, func(t *testing.T, now func() time.Time) backend.Backend {
		b, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{Now: now})
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
	{"postgres", false, func(t *testing.T, _ func() time.Time) backend.Backend {
		url := pgtest.URL(t)
		b, err := postgres.Open(t.Context(), url, postgres.Options{Schema: pgtest.Schema(t, url)})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
	{"redis", false, func(t *testing.T, _ func() time.Time) backend.Backend {
		url := redistest.URL(t)
		b, err := redis.Open(t.Context(), url, redis.Options{KeyPrefix: redistest.Prefix(t, url)})
		if err != nil {
			t.Fatalf("open redis: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
}

// eachStoring runs f as a subtest per storing backend.
func eachStoring(t *testing.T, f func(t *testing.T, b backend.Backend)) {
	for _, s := range storing {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			f(t, s.open(t, nil))
		})
	}
}

func newClock() *jobqtest.Clock {
	return jobqtest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
}

// noop registers a handler that does nothing for each type.
func noop(types ...string) *jobq.Registry {
	reg := jobq.NewRegistry()
	for _, typ := range types {
		reg.HandleFunc(typ, func(ctx context.Context, j *jobq.Job) error { return nil })
	}
	return reg
}

// fakeTB records what an assertion reported instead of failing the test;
// Fatalf ends the calling goroutine as testing does (run it through
// capture).
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  bool
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.mu.Lock()
	f.fatal = true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Logf(format string, args ...any) {}

// capture runs fn with a fakeTB and returns what it reported, joined.
func capture(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errors, "\n")
}

// runUntil runs w, as a real worker runs on its own time, until done
// holds (or a minute passes: the caller's assertions then say what is
// missing), then stops it.
func runUntil(t *testing.T, w *jobq.Worker, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// sqliteAndDB opens a SQLite backend on a new file and a database/sql
// handle of the application's own on the same file, for transactions that
// enqueue.
func sqliteAndDB(t *testing.T) (*sqlite.Backend, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return b, db
}

// inTx runs f in a transaction of db, then commits or rolls it back.
func inTx(t *testing.T, db *sql.DB, commit bool, f func(tx *sql.Tx)) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	f(tx)
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
}
