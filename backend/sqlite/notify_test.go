package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/internal/proctest"
)

// wakeBound is how soon after another connection's commit a subscriber
// must be woken: far above the watcher's 5ms interval, so a loaded machine
// or -race cannot fail it, and far below any poll interval (the tests'
// subscriptions never poll: nothing but a wake-up fires them).
const wakeBound = 500 * time.Millisecond

// inserterEnv names the file a child process inserts one job into (see
// runInserter); its presence makes the test binary that child.
const inserterEnv = "JOBQ_SQLITETEST_INSERT"

// insertedLine starts the line the inserter prints: "at_us=<µs>
// done_us=<µs>", the times just before its insert began and after it
// committed.
const insertedLine = "jobq-inserted "

// waitWake waits for a wake-up on ch, failing after a minute (a failure
// deadline, not a bound), and returns when it came.
func waitWake(t *testing.T, ch <-chan struct{}, after string) time.Time {
	t.Helper()
	select {
	case <-ch:
		return time.Now()
	case <-time.After(time.Minute):
		t.Fatalf("no wake-up within a minute after %s", after)
		return time.Time{}
	}
}

// noWake asserts that ch stays quiet for d.
func noWake(t *testing.T, ch <-chan struct{}, d time.Duration, after string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("woken within %s after %s; want no wake-up", d, after)
	case <-time.After(d):
	}
}

// subscribed subscribes to queue on b and waits for the watcher's first
// wake-up, after which a commit of another connection is seen as one.
func subscribed(t *testing.T, b *sqlite.Backend, queue string) <-chan struct{} {
	t.Helper()
	ch, cancel := b.Subscribe([]string{queue})
	t.Cleanup(cancel)
	waitWake(t, ch, "subscribing (the watcher's first look)")
	return ch
}

// wantWokenSoon waits for the wake-up of a commit made at (or just after)
// since and asserts it came within wakeBound.
func wantWokenSoon(t *testing.T, ch <-chan struct{}, since time.Time, what string) {
	t.Helper()
	if took := waitWake(t, ch, what).Sub(since); took > wakeBound {
		t.Fatalf("woken %s after %s; want within %s", took, what, wakeBound)
	}
}

// TestWakeAcrossBackends: a subscriber of one Backend is woken soon after
// another Backend on the file (another connection, as another process
// would have) inserts, and after the application's own transaction that
// inserted a job (JobInsertManyTx) commits; nothing else wakes it.
func TestWakeAcrossBackends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	a := openAt(t, path, sqlite.Options{})
	other := openAt(t, path, sqlite.Options{})
	ch := subscribed(t, a, "q")
	// 20 looks of the watcher with no commit anywhere.
	noWake(t, ch, 100*time.Millisecond, "the first wake-up, with no commit")

	began := time.Now()
	if _, err := other.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}
	wantWokenSoon(t, ch, began, "an insert through another Backend")

	app, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close() })
	tx, err := app.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := a.JobInsertManyTx(t.Context(), tx, oneJob("q")); err != nil {
		t.Fatal(err)
	}
	noWake(t, ch, 50*time.Millisecond, "a transactional insert, not committed yet")
	began = time.Now()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantWokenSoon(t, ch, began, "the commit of a transactional insert")
}

// TestWakeAcrossProcesses: a subscriber is woken soon after another
// process (the test binary run again, see runInserter) inserted into the
// file.
func TestWakeAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	a := openAt(t, path, sqlite.Options{})
	ch := subscribed(t, a, "q")

	lag := proctest.StartLagMeter(t)
	p := proctest.StartProc(t, inserterEnv+"="+path)
	woke := waitWake(t, ch, "starting a process that inserts")
	waitFor(t, "the inserting process to exit", func() bool { return !p.Running() })
	if err := p.Err(); err != nil {
		t.Fatalf("inserting process: %v\n%s", err, p.Output())
	}
	lag.Stop()
	sum := p.Summary(t, insertedLine)
	began, committed := time.UnixMicro(sum["at_us"]), time.UnixMicro(sum["done_us"])
	if woke.Before(began) {
		t.Fatalf("woken %s before the other process began its insert", began.Sub(woke))
	}
	// Counted from the commit, and beyond how late this process woke any
	// goroutine meanwhile: the bound is the watcher's, not the machine's.
	if took := woke.Sub(committed); took > wakeBound+lag.Max() {
		t.Fatalf("woken %s after the other process committed its insert (this process woke goroutines up to %s late); want within %s of that",
			took, lag.Max(), wakeBound)
	}
	if st, err := a.QueueStats(t.Context()); err != nil || len(st) != 1 || st[0].Pending != 1 {
		t.Fatalf("QueueStats = %+v, %v; want the other process's job pending", st, err)
	}
}

// runInserter is the child process of TestWakeAcrossProcesses: it inserts
// one job into the file at path and prints when it began and committed.
func runInserter(path string) int {
	ctx, cancel := proctest.ChildContext()
	defer cancel()
	b, err := sqlite.Open(ctx, path, sqlite.Options{Existing: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	began := time.Now()
	if _, err := b.JobInsertMany(ctx, oneJob("q")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%sat_us=%d done_us=%d\n", insertedLine, began.UnixMicro(), time.Now().UnixMicro())
	return 0
}

// TestWakeOff: with the watcher off, another Backend's insert wakes no
// one (its workers poll), while the Backend's own still do.
func TestWakeOff(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	a := openAt(t, path, sqlite.Options{WakeInterval: -1})
	other := openAt(t, path, sqlite.Options{})
	ch, cancel := a.Subscribe([]string{"q"})
	defer cancel()
	if _, err := other.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}
	noWake(t, ch, 100*time.Millisecond, "an insert through another Backend, the watcher off")
	if _, err := a.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ch, "an insert through the Backend itself")
}

// TestWatcherStopsWithClose: Close ends the watcher, leaving no goroutine
// behind. Not parallel, so no other test's goroutines are running (the
// parallel ones wait until the sequential ones are done).
func TestWatcherStopsWithClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobq.db")
	b, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel := b.Subscribe([]string{"q"})
	defer cancel()
	waitWake(t, ch, "subscribing")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t)
	// Subscribing after Close starts nothing.
	_, cancel2 := b.Subscribe([]string{"q"})
	defer cancel2()
	goleak.VerifyNone(t)
}

// TestWatcherRecovers: while the file cannot be opened the watcher warns
// once and retries with backoff (each retry at debug level); once it can,
// it wakes the subscribers, as commits may have been missed meanwhile.
func TestWatcherRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobq.db")
	log := &countingLog{}
	a := openAt(t, path, sqlite.Options{Logger: slog.New(log)})
	// The Backend's own connections keep the file open; the watcher's,
	// made at the first Subscribe, finds a directory in its place.
	aside := filepath.Join(dir, "aside.db")
	if err := os.Rename(path, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	ch, cancel := a.Subscribe([]string{"q"})
	defer cancel()
	waitFor(t, "three retries of the watcher", func() bool { return log.count(slog.LevelDebug) >= 3 })
	if n := log.count(slog.LevelWarn); n != 1 {
		t.Fatalf("%d warnings after three retries; want 1", n)
	}
	select {
	case <-ch:
		t.Fatal("woken while the watcher could not look")
	default:
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, path); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ch, "the file was back")
	waitFor(t, "the recovery logged", func() bool { return log.count(slog.LevelInfo) == 1 })
	began := time.Now()
	if _, err := openAt(t, path, sqlite.Options{}).JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}
	wantWokenSoon(t, ch, began, "an insert through another Backend after the recovery")
}

// countingLog is a slog handler that counts records per level.
type countingLog struct {
	mu     sync.Mutex
	levels map[slog.Level]int
}

func (l *countingLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *countingLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *countingLog) WithGroup(string) slog.Handler            { return l }

func (l *countingLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.levels == nil {
		l.levels = map[slog.Level]int{}
	}
	l.levels[r.Level]++
	return nil
}

func (l *countingLog) count(level slog.Level) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.levels[level]
}

// waitFor polls cond until it holds, failing after a minute (a failure
// deadline, not a bound on how soon cond holds).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after a minute waiting for %s", what)
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
}
