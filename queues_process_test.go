package jobq_test

// Process tests of queue control (pause, resume, concurrency and rate
// limits) on every durable backend: several worker processes, this test
// binary re-executed (see init below), share one store. The handlers
// measure what they see: a counter of handlers running at once, kept in a
// file under an flock so all processes share it, and a ledger line per
// job with its start and end times.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
)

const (
	ctlURLEnv     = "JOBQ_TEST_CTL_URL"
	ctlQueueEnv   = "JOBQ_TEST_CTL_QUEUE"
	ctlCounterEnv = "JOBQ_TEST_CTL_COUNTER"
	ctlLedgerEnv  = "JOBQ_TEST_CTL_LEDGER"
	ctlSlots      = 10
)

// init runs the worker process before the test framework starts when the
// binary was re-executed as one; main_test.go's TestMain stays as it is.
func init() {
	if os.Getenv(ctlURLEnv) != "" {
		os.Exit(runCtlChild())
	}
}

// ctlPayload is the job: how long its handler works.
type ctlPayload struct {
	SleepMS int `json:"sleep_ms"`
}

// runCtlChild works one queue with 10 slots and the default poll interval
// (1s) until SIGTERM.
func runCtlChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := backend.Open(ctx, os.Getenv(ctlURLEnv))
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	counter, err := os.OpenFile(os.Getenv(ctlCounterEnv), os.O_RDWR, 0)
	if err != nil {
		return childFailed(ctx, "counter", err)
	}
	defer counter.Close()
	ledger, err := os.OpenFile(os.Getenv(ctlLedgerEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return childFailed(ctx, "ledger", err)
	}
	defer ledger.Close()
	var ledgerMu sync.Mutex
	// When the backend claimed each job, by its clock: created plus the
	// wait the claim reports (the jobs are due when created); and when
	// this worker had the claim's answer, by its own.
	type claimTimes struct{ claimed, seen time.Time }
	var claimedAt sync.Map
	hooks := jobq.WorkerHooks{Claimed: func(e jobq.ClaimedEvent) {
		claimedAt.Store(e.Job.ID, claimTimes{e.Job.CreatedAt.Add(e.Wait), time.Now()})
	}}
	reg := jobq.NewRegistry()
	jobq.Handle(reg, "ctl", func(ctx context.Context, p ctlPayload) error {
		start := time.Now()
		j, _ := jobq.JobFromContext(ctx)
		if err := bump(counter, 1); err != nil {
			return err
		}
		time.Sleep(time.Duration(p.SleepMS) * time.Millisecond)
		end := time.Now()
		if err := bump(counter, -1); err != nil {
			return err
		}
		at, _ := claimedAt.LoadAndDelete(j.ID)
		ct, _ := at.(claimTimes)
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		_, err := fmt.Fprintf(ledger, "%d %d %d %d %d %d %d\n", j.ID, j.Attempt, start.UnixNano(), end.UnixNano(), ct.claimed.UnixNano(), ct.seen.UnixNano(), os.Getpid())
		return err
	})
	// The ready mark tells start that SIGTERM is handled from now on:
	// a signal that came before would kill the process by default.
	ready := func() error { return os.WriteFile(os.Getenv(ctlLedgerEnv)+".ready", nil, 0o644) }
	return runChildWorker(ctx, b, reg, jobq.WorkerConfig{
		Queues: []string{os.Getenv(ctlQueueEnv)}, Concurrency: ctlSlots, Logger: quietLog,
		Hooks: []jobq.WorkerHooks{hooks},
	}, ready)
}

// bumpMu serializes this process's handlers: an flock is held by the open
// file, so it keeps other processes out but not this one's goroutines.
var bumpMu sync.Mutex

// bump adds d to the shared count of running handlers and raises the peak,
// under an exclusive flock of the counter file (16 bytes: running, peak).
func bump(f *os.File, d int64) error {
	bumpMu.Lock()
	defer bumpMu.Unlock()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	var buf [16]byte
	if _, err := f.ReadAt(buf[:], 0); err != nil {
		return err
	}
	running := int64(binary.LittleEndian.Uint64(buf[:8])) + d
	peak := max(int64(binary.LittleEndian.Uint64(buf[8:])), running)
	binary.LittleEndian.PutUint64(buf[:8], uint64(running))
	binary.LittleEndian.PutUint64(buf[8:], uint64(peak))
	_, err := f.WriteAt(buf[:], 0)
	return err
}

// ctlStore is one backend under test.
type ctlStore struct {
	name string
	url  string
}

// ctlStores returns a fresh store of each durable backend: skipped (failed
// under CI=true) when a server is unreachable.
func ctlStores(t *testing.T) []ctlStore {
	t.Helper()
	var stores []ctlStore
	for _, s := range durableStores {
		stores = append(stores, ctlStore{s.Name, s.URL(t)})
	}
	return stores
}

// ctlRun is one test's store, its worker processes and their measurements.
type ctlRun struct {
	t       *testing.T
	b       backend.Backend
	ctl     backend.QueueController
	url     string
	queue   string
	dir     string
	counter string
	procs   []*exec.Cmd
}

func newCtlRun(t *testing.T, url, queue string) *ctlRun {
	t.Helper()
	b, err := backend.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("open %s: %v", backend.RedactURL(url), err)
	}
	t.Cleanup(func() { b.Close() })
	ctl, ok := b.(backend.QueueController)
	if !ok {
		t.Fatalf("%T does not implement backend.QueueController", b)
	}
	dir := t.TempDir()
	r := &ctlRun{t: t, b: b, ctl: ctl, url: url, queue: queue, dir: dir, counter: filepath.Join(dir, "counter")}
	if err := os.WriteFile(r.counter, make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// enqueue adds n jobs that each work sleep.
func (r *ctlRun) enqueue(n int, sleep time.Duration) {
	r.t.Helper()
	payload, _ := json.Marshal(ctlPayload{SleepMS: int(sleep / time.Millisecond)})
	for done := 0; done < n; {
		batch := make([]backend.InsertParams, min(500, n-done))
		for i := range batch {
			batch[i] = backend.InsertParams{Queue: r.queue, Type: "ctl", Payload: payload, MaxAttempts: 3}
		}
		if _, err := r.b.JobInsertMany(r.t.Context(), batch); err != nil {
			r.t.Fatalf("enqueue: %v", err)
		}
		done += len(batch)
	}
}

// start starts n worker processes and waits until each has its worker
// made and SIGTERM handled, so that stop's signal always meets a worker
// that stops cleanly (a fast drain may end before a slow start does).
func (r *ctlRun) start(n int) {
	r.t.Helper()
	var marks []string
	for i := range n {
		ledger := filepath.Join(r.dir, fmt.Sprintf("ledger-%d", i))
		marks = append(marks, ledger+".ready")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), ctlURLEnv+"="+r.url, ctlQueueEnv+"="+r.queue, ctlCounterEnv+"="+r.counter,
			ctlLedgerEnv+"="+ledger)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			r.t.Fatalf("start worker process: %v", err)
		}
		r.t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		r.procs = append(r.procs, cmd)
	}
	for _, m := range marks {
		eventually(r.t, settle, "worker process ready ("+filepath.Base(m)+")", func() bool {
			_, err := os.Stat(m)
			return err == nil
		})
	}
}

// stop ends the worker processes with SIGTERM and asserts clean exits.
func (r *ctlRun) stop() {
	r.t.Helper()
	for _, c := range r.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range r.procs {
		if err := c.Wait(); err != nil {
			r.t.Errorf("worker process %d: %v", c.Process.Pid, err)
		}
	}
}

// waitEmpty waits until no job of the queue is live or failed.
func (r *ctlRun) waitEmpty(within time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, err := r.b.QueueStats(r.t.Context())
		if err != nil {
			r.t.Fatal(err)
		}
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("jobs left after %s: %+v", within, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running is how many handlers run now, by the shared counter.
func (r *ctlRun) running() int64 {
	r.t.Helper()
	buf, err := os.ReadFile(r.counter)
	if err != nil {
		r.t.Fatal(err)
	}
	return int64(binary.LittleEndian.Uint64(buf[:8]))
}

// peak is the most handlers that ran at once, by the shared counter.
func (r *ctlRun) peak() int64 {
	r.t.Helper()
	buf, err := os.ReadFile(r.counter)
	if err != nil {
		r.t.Fatal(err)
	}
	return int64(binary.LittleEndian.Uint64(buf[8:]))
}

// ctlRecord is one ledger line: one finished handler.
type ctlRecord struct {
	id                  int64
	attempt             int
	start, end, claimed time.Time // claimed: by the backend's clock
	seen                time.Time // when the worker had the claim's answer
}

// records reads every process's ledger, by start time.
func (r *ctlRun) records() []ctlRecord {
	r.t.Helper()
	var out []ctlRecord
	files, _ := filepath.Glob(filepath.Join(r.dir, "ledger-*"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			r.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec ctlRecord
			var s, e, c, seen, pid int64
			if _, err := fmt.Sscan(sc.Text(), &rec.id, &rec.attempt, &s, &e, &c, &seen, &pid); err != nil {
				r.t.Fatalf("ledger %s: %q: %v", name, sc.Text(), err)
			}
			rec.start, rec.end, rec.claimed, rec.seen = time.Unix(0, s), time.Unix(0, e), time.Unix(0, c), time.Unix(0, seen)
			out = append(out, rec)
		}
		f.Close()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// exactlyOnce asserts n handlers ran, each job once, on its first attempt:
// waiting for a limit or a resume spent no attempt.
func (r *ctlRun) exactlyOnce(recs []ctlRecord, n int) {
	r.t.Helper()
	seen := map[int64]bool{}
	for _, rec := range recs {
		if seen[rec.id] {
			r.t.Fatalf("job %d ran twice", rec.id)
		}
		seen[rec.id] = true
		if rec.attempt != 1 {
			r.t.Fatalf("job %d ran on attempt %d, want 1", rec.id, rec.attempt)
		}
	}
	if len(recs) != n {
		r.t.Fatalf("%d handlers ran, want %d", len(recs), n)
	}
	failed, err := r.b.FailedList(r.t.Context(), backend.FailedListParams{})
	if err != nil || len(failed) != 0 {
		r.t.Fatalf("failed jobs: %d, %v; want none", len(failed), err)
	}
}

// TestProcessConcurrencyLimit: a queue limited to 3 jobs at once, worked by
// 4 processes of 10 slots: the handlers never see more than 3 of them
// running, and every job runs once on its first attempt.
func TestProcessConcurrencyLimit(t *testing.T) {
	// Not parallel with the package's other tests: its 12 worker
	// processes would starve theirs on a small machine.
	for _, st := range ctlStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const jobs, limit = 120, 3
			r := newCtlRun(t, st.url, "limited")
			if err := r.ctl.QueueSetLimits(t.Context(), r.queue, backend.QueueLimits{Concurrency: limit}); err != nil {
				t.Fatal(err)
			}
			r.enqueue(jobs, 40*time.Millisecond)
			start := time.Now()
			r.start(4)
			r.waitEmpty(60 * time.Second) // a few seconds on a quiet machine
			took := time.Since(start)
			r.stop()
			recs := r.records()
			r.exactlyOnce(recs, jobs)
			peak := r.peak()
			t.Logf("%s: %d jobs of 40ms, limit %d, 4 processes × %d slots: peak running %d (shared counter), drained in %s",
				st.name, jobs, limit, ctlSlots, peak, took.Round(time.Millisecond))
			if peak != limit {
				t.Fatalf("peak running = %d, want %d", peak, limit)
			}
		})
	}
}

// TestProcessRateLimit: 1,000 jobs under a rate of 50 per second, 4
// processes of 10 slots: handlers start at most 50 times in any second of
// the clock, every job runs once on its first attempt.
func TestProcessRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("20 seconds per backend")
	}
	// Not parallel with the package's other tests (see
	// TestProcessConcurrencyLimit).
	for _, st := range ctlStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const jobs, rate = 1000, 50
			r := newCtlRun(t, st.url, "rated")
			if err := r.ctl.QueueSetLimits(t.Context(), r.queue, backend.QueueLimits{Rate: rate, RatePeriod: time.Second}); err != nil {
				t.Fatal(err)
			}
			r.enqueue(jobs, 0)
			start := time.Now()
			r.start(4)
			r.waitEmpty(60 * time.Second) // 20s at 50/s
			took := time.Since(start)
			r.stop()
			recs := r.records()
			r.exactlyOnce(recs, jobs)
			// Claims per window by the backend's clock: the limit itself.
			perWindow := map[int64]int{}
			for _, rec := range recs {
				perWindow[rec.claimed.Unix()]++
			}
			// Handler starts per second of the clock: what the users see.
			// A job claimed at the very end of one window starts a few
			// milliseconds into the next second: one window's edge.
			perSecond := map[int64]int{}
			for _, rec := range recs {
				perSecond[rec.start.Unix()]++
			}
			starts, mostStarts, over := series(perSecond, rate)
			claims, mostClaims, _ := series(perWindow, rate)
			t.Logf("%s: %d jobs at %d/s over 4 processes × %d slots: %s; claims per window: %s (most %d); handler starts per second: %s (most %d)",
				st.name, jobs, rate, ctlSlots, took.Round(time.Millisecond), claims, mostClaims, starts, mostStarts)
			if mostClaims > rate {
				t.Fatalf("%d claims in one window, want at most %d", mostClaims, rate)
			}
			// A start lags its claim by the worker's dispatch, which a
			// loaded machine stretches: at most a window's claims may
			// spill into the next second, so no second sees more than
			// two windows' worth.
			if mostStarts > 2*rate {
				t.Fatalf("%d handler starts in one second (%d seconds over %d): more than one window's edge", mostStarts, over, rate)
			}
			secs := perSecond
			if len(secs) < jobs/rate {
				t.Fatalf("%d jobs started within %d seconds, want at least %d at %d/s", jobs, len(secs), jobs/rate, rate)
			}
		})
	}
}

// TestProcessPauseResume: 4 processes work a queue; it is paused under
// load: no job is claimed from the pause's return to the resume (a
// handler may still start one claimed before), the jobs running then
// finish, jobs enqueued while paused wait; once resumed, the next start comes at once (SQLite: other
// processes find it at their next poll, 1s), and every job runs exactly
// once.
func TestProcessPauseResume(t *testing.T) {
	// Not parallel with the package's other tests: its 12 worker
	// processes would starve theirs on a small machine.
	for _, st := range ctlStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const early, late = 1200, 200
			const jobs = early + late
			r := newCtlRun(t, st.url, "pausable")
			r.enqueue(early, 50*time.Millisecond)
			r.start(4)
			// Under load: wait until jobs are running (the processes
			// may take seconds to start on a busy machine).
			deadline := time.Now().Add(settle)
			for r.running() < 10 {
				if time.Now().After(deadline) {
					t.Fatalf("fewer than 10 handlers running after %s: no load to pause", settle)
				}
				time.Sleep(10 * time.Millisecond)
			}
			atPause := r.running()
			pauseSent := time.Now()
			if err := r.ctl.QueuePause(t.Context(), r.queue, true); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			// Jobs enqueued into the paused queue: on a fast backend the
			// first load may all be claimed before the pause lands (the
			// last process to start can take as long as the drain), and
			// these are what the resume must start then.
			r.enqueue(late, 50*time.Millisecond)
			time.Sleep(2 * time.Second)
			// Starts are counted as during the pause up to the moment
			// the resume is sent: once it is applied, workers may start
			// jobs before the call has returned here.
			resumed := time.Now()
			if err := r.ctl.QueuePause(t.Context(), r.queue, false); err != nil {
				t.Fatal(err)
			}
			r.waitEmpty(60 * time.Second) // 2s on a quiet machine
			r.stop()
			recs := r.records()
			r.exactlyOnce(recs, jobs)
			var lastBefore, firstAfter time.Time
			var duringPause, runningAtPause int
			for _, rec := range recs {
				// What the pause stops is claims: none took effect
				// between its return and the resume's sending. A claim
				// took effect after the time the backend stamped it
				// with (one clock on this machine; 50ms for how each
				// backend stores and reports it) and before its worker
				// had the answer, so one stamped after the pause and
				// answered before the resume was claimed while paused.
				// A handler may start later a job claimed before. The
				// check was "no start later than a second after the
				// pause", which a worker starved between its claim and
				// the start (-race, a CPU hog) can miss with no claim
				// late.
				if rec.claimed.After(paused.Add(50*time.Millisecond)) && rec.seen.Before(resumed) {
					t.Errorf("job %d was claimed while paused: stamped %s after the pause returned, answered %s before the resume was sent",
						rec.id, rec.claimed.Sub(paused), resumed.Sub(rec.seen))
				}
				switch {
				case rec.start.Before(paused):
					lastBefore = rec.start
					if rec.start.Before(pauseSent) && rec.end.After(pauseSent) {
						runningAtPause++
					}
				case rec.start.Before(resumed):
					duringPause++
					lastBefore = rec.start
				case firstAfter.IsZero():
					firstAfter = rec.start
				}
			}
			// The shared counter proves the load (at least 10 were running
			// just before the pause); the ledger's count is only reported,
			// since on a starved machine a handler's recorded end can
			// precede its counter's decrement.
			t.Logf("%s: paused under load with %d handlers running by the counter (%d by the ledger) when the pause was sent; last start %s after the pause returned, %d starts during the pause; first start %s after resume",
				st.name, atPause, runningAtPause, lastBefore.Sub(paused).Round(time.Millisecond), duringPause, firstAfter.Sub(resumed).Round(time.Millisecond))
			// SQLite's other processes poll every second; the notifiers
			// of the others wake them at once. The bound only has to
			// catch a resume left unseen well past a poll, so it has
			// room for a loaded machine (it was 1s, 3s for SQLite); the
			// log line has the figure.
			pickup := 10 * time.Second
			if firstAfter.IsZero() || firstAfter.Sub(resumed) > pickup {
				t.Fatalf("first start after resume: %s, want within %s", firstAfter.Sub(resumed), pickup)
			}
		})
	}
}

// series formats per-second counts in time order and returns the largest
// and how many exceed limit.
func series(per map[int64]int, limit int) (string, int, int) {
	keys := make([]int64, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	most, over := 0, 0
	for i, k := range keys {
		parts[i] = strconv.Itoa(per[k])
		most = max(most, per[k])
		if per[k] > limit {
			over++
		}
	}
	return strings.Join(parts, " "), most, over
}
