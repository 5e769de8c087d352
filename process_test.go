package jobq_test

// Tests that prove the queue across real operating-system processes: several
// worker processes sharing one SQLite file, a worker killed with SIGKILL, a
// worker stopped with SIGTERM. The worker processes are this test binary
// re-executed with childEnv set (see TestMain).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

const (
	childEnv       = "JOBQ_TEST_CHILD_DB"
	childLedgerEnv = "JOBQ_TEST_CHILD_LEDGER"
	childConcEnv   = "JOBQ_TEST_CHILD_CONCURRENCY"
	childLeaseEnv  = "JOBQ_TEST_CHILD_LEASE"
	// childOldEnv makes the child an older deployment: it has none of
	// the handlers below, and writes "<job id> <attempt> <pid> deferred"
	// for each job it gives back for want of one.
	childOldEnv = "JOBQ_TEST_CHILD_OLD"
)

// runChild is a worker process: it works the "record" type, which appends
// "<job id> <attempt> <pid> <event>" to this process's own ledger file, until
// SIGTERM. Attempt 1 of a "hang-first" job hangs until cancelled, so a test
// can kill the process in the middle of it.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := sqlite.Open(ctx, os.Getenv(childEnv), sqlite.Options{})
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	ledger, err := os.OpenFile(os.Getenv(childLedgerEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return childFailed(ctx, "ledger", err)
	}
	defer ledger.Close()
	record := func(j *jobq.Job, event string) error {
		_, err := fmt.Fprintf(ledger, "%d %d %d %s\n", j.ID, j.Attempt, os.Getpid(), event)
		return err
	}
	conc, _ := strconv.Atoi(os.Getenv(childConcEnv))
	lease, _ := time.ParseDuration(os.Getenv(childLeaseEnv))
	cfg := jobq.WorkerConfig{
		Concurrency: conc, Lease: lease, PollInterval: 20 * time.Millisecond,
		SweepInterval: 100 * time.Millisecond, Logger: quietLog,
	}
	reg := jobq.NewRegistry()
	if os.Getenv(childOldEnv) != "" {
		reg.HandleFunc("legacy", func(ctx context.Context, j *jobq.Job) error { return record(j, "ran") })
		cfg.Hooks = []jobq.WorkerHooks{{Written: func(e jobq.Event) {
			if e.Kind == jobq.EventDeferred {
				_ = record(e.Job, "deferred")
			}
		}}}
		return runChildWorker(ctx, b, reg, cfg, nil)
	}
	reg.HandleFunc("record", func(ctx context.Context, j *jobq.Job) error { return record(j, "ran") })
	reg.HandleFunc("hang-first", func(ctx context.Context, j *jobq.Job) error {
		if err := record(j, "started"); err != nil {
			return err
		}
		if j.Attempt == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return record(j, "ran")
	})
	reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
		if err := record(j, "started"); err != nil {
			return err
		}
		time.Sleep(time.Second) // the work the shutdown must wait for
		return record(j, "ran")
	})
	return runChildWorker(ctx, b, reg, cfg, nil)
}

type child struct {
	cmd    *exec.Cmd
	ledger string
}

func startChild(t *testing.T, db, dir string, n, concurrency int, lease time.Duration, env ...string) *child {
	t.Helper()
	ledger := filepath.Join(dir, fmt.Sprintf("ledger-%d.txt", n))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+db, childLedgerEnv+"="+ledger,
		childConcEnv+"="+strconv.Itoa(concurrency), childLeaseEnv+"="+lease.String())
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return &child{cmd: cmd, ledger: ledger}
}

// stop sends SIGTERM and asserts a clean exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal worker: %v", err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("worker process exited with %v after SIGTERM, want exit 0", err)
	}
}

type ledgerLine struct {
	id      int64
	attempt int
	pid     int
	event   string
}

func readLedgers(t *testing.T, children ...*child) []ledgerLine {
	t.Helper()
	var out []ledgerLine
	for _, c := range children {
		f, err := os.Open(c.ledger)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l ledgerLine
			if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %s", &l.id, &l.attempt, &l.pid, &l.event); err != nil {
				t.Fatalf("ledger line %q: %v", sc.Text(), err)
			}
			out = append(out, l)
		}
		f.Close()
	}
	return out
}

func openSQLite(t *testing.T, path string) backend.Backend {
	t.Helper()
	b, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// queueLeft is how many jobs are live (pending, scheduled or reserved), or
// -1 when the stats cannot be read.
func queueLeft(b backend.Backend) int64 {
	s, err := b.QueueStats(context.Background())
	if err != nil {
		return -1
	}
	t := jobq.Totals(s)
	return t.Pending + t.Scheduled + t.Reserved
}

// drained waits until no job is live, failing the test only when none has
// ended for stall: how long thousands of jobs take depends on the machine's
// load, so a fixed deadline assumed a quiet one (the shared SQLite file's
// test below ran out of its 2 minutes under a CPU hog); a drain that stops
// is what fails.
func drained(t *testing.T, b backend.Backend, stall time.Duration, what string) {
	t.Helper()
	least, since := int64(-1), time.Now()
	for {
		n := queueLeft(b)
		if n == 0 {
			return
		}
		if n >= 0 && (least < 0 || n < least) {
			least, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("no job ended for %s waiting for %s: %d left", stall, what, least)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantEachOnce asserts that runs, the runs per job ID, names total jobs
// and each ran exactly once.
func wantEachOnce(t *testing.T, runs map[int64]int, total int) {
	t.Helper()
	if len(runs) != total {
		t.Fatalf("%d distinct jobs ran, want %d", len(runs), total)
	}
	for id, n := range runs {
		if n != 1 {
			t.Fatalf("job %d ran %d times, want exactly once", id, n)
		}
	}
}

// TestProcessesShareOneSQLiteFile: 4 worker processes work 10,000 jobs; every
// job's handler runs exactly once, on its first attempt (so no job was ever
// held by two workers, nor rescued from one), and nothing fails.
func TestProcessesShareOneSQLiteFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	b := openSQLite(t, db)
	const total = 10000
	specs := make([]jobq.JobSpec, total)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "record"}
	}
	if _, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	var children []*child
	for i := range 4 {
		children = append(children, startChild(t, db, dir, i, 8, 30*time.Second))
	}
	drained(t, b, time.Minute, "4 processes to drain 10,000 jobs")
	for _, c := range children {
		c.stop(t)
	}
	runs := map[int64]int{}
	pids := map[int]int{}
	for _, l := range readLedgers(t, children...) {
		runs[l.id]++
		pids[l.pid]++
		if l.attempt != 1 {
			t.Errorf("job %d ran as attempt %d: it was re-claimed", l.id, l.attempt)
		}
	}
	wantEachOnce(t, runs, total)
	if len(pids) < 2 {
		t.Fatalf("only %d process did any work: %v", len(pids), pids)
	}
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("%d jobs failed", len(f))
	}
	t.Logf("jobs per process: %v", pids)
}

// TestProcessKilledMidJob: SIGKILL a worker in the middle of a job; another
// worker rescues it once the lease expires and runs it again as attempt 2,
// so the crashed attempt counts and nothing is lost.
func TestProcessKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	b := openSQLite(t, db)
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "hang-first", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The victim's lease is what the rescue waits out, but it must also
	// outlast a loaded machine's late heartbeat while the victim lives: with
	// 1s, under a CPU hog, the victim's own sweep took the job back and
	// ran it to completion before the kill (the job was gone after
	// SIGKILL). 10s tolerates a heartbeat more than 6s late.
	victim := startChild(t, db, dir, 0, 1, 10*time.Second)
	eventually(t, 30*time.Second, "the victim to start the job", func() bool { return len(readLedgers(t, victim)) > 0 })
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	row, err := b.JobGet(context.Background(), id)
	if err != nil || row.Status != backend.StateReserved || row.Attempts != 1 {
		t.Fatalf("after SIGKILL the job is %+v, %v; want reserved by the dead worker", row, err)
	}
	// The rescuer's long lease keeps a loaded machine's late heartbeat from
	// expiring attempt 2 too (it was seen re-claimed as attempt 3 under
	// load). The rescue comes once the victim's 10s lease has run out: the
	// wait for it is generous, as it is a failure deadline, not a bound.
	rescuer := startChild(t, db, dir, 1, 1, 30*time.Second)
	eventually(t, 90*time.Second, "the rescuer to finish the job", func() bool { return jobGone(b, id) })
	rescuer.stop(t)
	lines := readLedgers(t, victim, rescuer)
	want := []ledgerLine{
		{id, 1, victim.cmd.Process.Pid, "started"},
		{id, 2, rescuer.cmd.Process.Pid, "started"},
		{id, 2, rescuer.cmd.Process.Pid, "ran"},
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("ledger %v, want %v", lines, want)
	}
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("failed jobs: %+v", f)
	}
}

// TestProcessSIGTERM: a worker told to stop finishes its in-flight job,
// claims nothing new and exits 0.
func TestProcessSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	b := openSQLite(t, db)
	c := mustClient(t, b, jobq.ClientConfig{})
	first, err := c.Enqueue(context.Background(), "slow", nil, jobq.Priority(1))
	if err != nil {
		t.Fatal(err)
	}
	w := startChild(t, db, dir, 0, 1, 30*time.Second)
	eventually(t, 30*time.Second, "the worker to start the first job", func() bool { return len(readLedgers(t, w)) > 0 })
	second, err := c.Enqueue(context.Background(), "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.stop(t) // asserts exit code 0
	if !jobGone(b, first) {
		t.Fatal("the in-flight job was not completed before exit")
	}
	row, err := b.JobGet(context.Background(), second)
	if err != nil || row.Status != backend.StatePending || row.Attempts != 0 {
		t.Fatalf("second job %+v, %v; want pending and never claimed", row, err)
	}
	lines := readLedgers(t, w)
	if len(lines) != 2 || lines[0].id != first || lines[1].event != "ran" {
		t.Fatalf("ledger %v, want the first job started and ran, nothing else", lines)
	}
}
