package postgres

// Tests that prove the queue across real worker processes sharing one
// PostgreSQL schema: 4 processes × 25 handlers on 100,000 jobs with an
// exactly-once effect, a worker killed with SIGKILL in the middle of a job,
// and a (private) server restarted under a running pair of workers.
//
// The worker processes are this test binary re-executed with procURLEnv set
// (see TestMain). Their handlers complete their job inside their own pgx
// transaction (jobq.CompleteTx) together with an insert into a ledger table
// keyed by job id, so a duplicated effect would break the primary key.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres/pgtest"
	"github.com/jobq/jobq/internal/proctest"
	"github.com/jobq/jobq/internal/runner"
)

// The worker process's settings travel in the environment; procURLEnv being
// set is what makes the test binary a worker (see TestMain).
const (
	procURLEnv    = "JOBQ_PGTEST_WORKER_URL"
	procSchemaEnv = "JOBQ_PGTEST_WORKER_SCHEMA"
	procConcEnv   = "JOBQ_PGTEST_WORKER_CONCURRENCY"
	procLeaseEnv  = "JOBQ_PGTEST_WORKER_LEASE" // "0s": the runtime's default
	procStrictEnv = "JOBQ_PGTEST_WORKER_STRICT"
	procAsyncEnv  = "JOBQ_PGTEST_WORKER_ASYNC_COMMIT"
)

// Connections per worker process. The shared server allows 100 in all and
// other engineers' tests use it too: 4 processes × (5 + 5 + the listener)
// stays well below. Handlers beyond procHandlerConns wait for a
// connection; measured on this machine, 10 were no faster than 5, since the
// two cores are the limit.
const (
	procBackendConns = 5
	procHandlerConns = 5
)

// procSummary prefixes the line a worker prints on its way out, of
// key=value counts (see runWorkerProcess).
const procSummary = "jobq-worker-summary "

// procLeaseLost prefixes the line a worker prints for each handler
// transaction that failed under a context cancelled for a lost lease.
const procLeaseLost = "jobq-worker-lease-lost "

// Exit codes of a worker process.
const (
	procExitRun   = 1 // Worker.Run failed
	procExitSetup = 3 // could not open the backend or the handler pool
	procExitDup   = 4 // strict, and a ledger insert broke the primary key
)

// runWorkerProcess is a worker process: it works the "ledger" and
// "hang-first" types until SIGTERM, then prints its summary.
//
// "ledger" inserts (job_id, attempt, pid) into <schema>.ledger, completes
// the job with jobq.CompleteTx and commits, all in one transaction on a
// pool of its own. "hang-first" first records (job_id, attempt, pid) in
// <schema>.started (committed at once, so the test sees it), hangs until
// cancelled on attempt 1, and behaves as "ledger" on later attempts.
//
// A primary-key violation on the ledger is printed; under procStrictEnv it
// also makes the exit code procExitDup. Where no attempt can overlap another
// (no lease runs out) such a violation can only mean a job's effect was
// about to happen twice.
func runWorkerProcess() int {
	ctx, stop := proctest.ChildContext()
	defer stop()
	pid := os.Getpid()
	dbURL, schema := os.Getenv(procURLEnv), os.Getenv(procSchemaEnv)
	conc, _ := strconv.Atoi(os.Getenv(procConcEnv))
	lease, _ := time.ParseDuration(os.Getenv(procLeaseEnv))
	strict := os.Getenv(procStrictEnv) == "1"
	async := os.Getenv(procAsyncEnv) == "1"
	logs := proctest.NewLog(pid)
	log := slog.New(logs)
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "worker %d: "+format+"\n", append([]any{pid}, args...)...)
		return code
	}

	openCtx, cancelOpen := context.WithTimeout(ctx, 30*time.Second)
	defer cancelOpen()
	b, err := Open(openCtx, dbURL, Options{Schema: schema, NoMigrate: true, MaxConns: procBackendConns, Logger: log})
	if err != nil {
		return fail(procExitSetup, "open backend: %v", err)
	}
	defer b.Close()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fail(procExitSetup, "parse url: %v", err)
	}
	cfg.MaxConns = procHandlerConns
	if async {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(openCtx, cfg)
	if err != nil {
		return fail(procExitSetup, "open handler pool: %v", err)
	}
	defer pool.Close()

	ledgerSQL := "INSERT INTO " + quoteIdent(schema) + ".ledger (job_id, attempt, pid) VALUES ($1, $2, $3)"
	startedSQL := "INSERT INTO " + quoteIdent(schema) + ".started (job_id, attempt, pid) VALUES ($1, $2, $3)"
	var runs, retried, done, dups, notHeld, txErrs, leaseLost atomic.Int64

	// txErr counts a failed handler transaction and prints the first few,
	// with the cause the handler's context was cancelled for, if it was.
	// Failures under a context cancelled for a lost lease are counted
	// apart, and each is printed as "<procLeaseLost><job id> <attempt>" so
	// the test can check whether the transaction committed after all.
	txErr := func(ctx context.Context, j *jobq.Job, err error) error {
		if errors.Is(context.Cause(ctx), runner.ErrLeaseLost) {
			leaseLost.Add(1)
			fmt.Fprintf(os.Stderr, "%s%d %d\n", procLeaseLost, j.ID, j.Attempt)
			fmt.Fprintf(os.Stderr, "worker %d: job %d attempt %d: %v (handler context: %v)\n", pid, j.ID, j.Attempt, err, context.Cause(ctx))
			return err
		}
		if txErrs.Add(1) <= proctest.PrintMax {
			fmt.Fprintf(os.Stderr, "worker %d: job %d attempt %d: %v (handler context: %v)\n", pid, j.ID, j.Attempt, err, context.Cause(ctx))
		}
		return err
	}
	// ledger is the handler's effect and its completion in one transaction.
	ledger := func(ctx context.Context, j *jobq.Job) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return txErr(ctx, j, fmt.Errorf("begin: %w", err))
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx) // a no-op after Commit
		}()
		if _, err := tx.Exec(ctx, ledgerSQL, j.ID, j.Attempt, pid); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				return txErr(ctx, j, fmt.Errorf("insert ledger row: %w", err))
			}
			dups.Add(1)
			fmt.Fprintf(os.Stderr, "worker %d: DUPLICATE EFFECT: job %d attempt %d: the ledger already has it: %v\n", pid, j.ID, j.Attempt, err)
			return err
		}
		if err := jobq.CompleteTx(ctx, tx); err != nil {
			if !errors.Is(err, jobq.ErrNotFound) {
				return txErr(ctx, j, err)
			}
			notHeld.Add(1)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return txErr(ctx, j, fmt.Errorf("commit: %w", err))
		}
		done.Add(1)
		return nil
	}
	count := func(j *jobq.Job) {
		runs.Add(1)
		if j.Attempt > 1 {
			retried.Add(1)
		}
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("ledger", func(ctx context.Context, j *jobq.Job) error {
		count(j)
		return ledger(ctx, j)
	})
	reg.HandleFunc("hang-first", func(ctx context.Context, j *jobq.Job) error {
		count(j)
		if _, err := pool.Exec(ctx, startedSQL, j.ID, j.Attempt, pid); err != nil {
			return fmt.Errorf("record start: %w", err)
		}
		if j.Attempt == 1 {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return ledger(ctx, j)
	})

	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Concurrency:     conc,
		Lease:           lease,
		PollInterval:    50 * time.Millisecond,
		SweepInterval:   100 * time.Millisecond,
		Retry:           jobq.RetryPolicy{Base: 10 * time.Millisecond, Max: 200 * time.Millisecond},
		ShutdownTimeout: 5 * time.Second,
		Logger:          log,
	})
	if err != nil {
		return fail(procExitSetup, "new worker: %v", err)
	}
	if err := w.Run(ctx); err != nil {
		return fail(procExitRun, "run: %v", err)
	}
	fmt.Fprintf(os.Stderr, "%spid=%d runs=%d retried=%d done=%d dups=%d notheld=%d txerrs=%d leaselost=%d fenced_jobs=%d fenced_warnings=%d warnings=%d errors=%d\n",
		procSummary, pid, runs.Load(), retried.Load(), done.Load(), dups.Load(), notHeld.Load(), txErrs.Load(), leaseLost.Load(),
		logs.Jobs(fencedMsg), logs.Count(slog.LevelWarn, fencedMsg), logs.Total(slog.LevelWarn), logs.Total(slog.LevelError))
	logs.Report()
	if strict && dups.Load() > 0 {
		return procExitDup
	}
	return 0
}

// fencedMsg is the runtime's warning for outcomes the lease fence refused.
const fencedMsg = "job outcomes refused by the lease fence: the jobs were taken over"

// proc is a running worker process.
type proc struct{ *proctest.Proc }

// procOptions are a worker process's settings.
type procOptions struct {
	concurrency int
	lease       time.Duration // 0: the runtime's default (30s)
	strict      bool          // exit procExitDup on a ledger primary-key violation
	asyncCommit bool          // handler transactions commit without waiting for the WAL flush
}

// startProc starts a worker process on dbURL's schema. It is killed when
// the test ends, if still running, and its output is logged if the test
// failed.
func startProc(t *testing.T, dbURL, schema string, o procOptions) proc {
	t.Helper()
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return proc{proctest.StartProc(t,
		procURLEnv+"="+withoutLoopbackTLS(dbURL), procSchemaEnv+"="+schema,
		procConcEnv+"="+strconv.Itoa(o.concurrency), procLeaseEnv+"="+o.lease.String(),
		procStrictEnv+"="+flag(o.strict), procAsyncEnv+"="+flag(o.asyncCommit))}
}

// withoutLoopbackTLS turns TLS off for a server on this machine when the
// URL does not choose: pgx would otherwise negotiate it (sslmode=prefer),
// and on this two-core machine TLS cost the workers a fifth of their CPU
// while proving nothing these tests are about.
func withoutLoopbackTLS(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.Query().Has("sslmode") {
		return dbURL
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		q := u.Query()
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dbURL
}

// leaseLost returns the (job id, attempt) pairs whose handler transaction
// failed under a context cancelled for a lost lease.
func (p proc) leaseLost(t *testing.T) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for line := range strings.Lines(p.Output()) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), procLeaseLost)
		if !ok {
			continue
		}
		var id, attempt int64
		if _, err := fmt.Sscanf(rest, "%d %d", &id, &attempt); err != nil {
			t.Fatalf("worker line %q: %v", line, err)
		}
		out = append(out, [2]int64{id, attempt})
	}
	return out
}

// createProcTables makes the handlers' tables in schema: ledger (one row
// per completed job, keyed by job id) and started ("hang-first" attempts).
func createProcTables(t *testing.T, b *Backend) {
	t.Helper()
	s := quoteIdent(b.Schema())
	for _, stmt := range []string{
		"CREATE TABLE " + s + ".ledger (job_id bigint PRIMARY KEY, attempt int NOT NULL, pid int NOT NULL)",
		"CREATE TABLE " + s + ".started (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)",
	} {
		if _, err := b.Pool().Exec(t.Context(), stmt); err != nil {
			t.Fatalf("create handler tables: %v", err)
		}
	}
}

// enqueueLedgerJobs enqueues n "ledger" jobs in batches of 5,000 and
// returns their ids.
func enqueueLedgerJobs(t *testing.T, b *Backend, n int, opts ...jobq.EnqueueOption) []int64 {
	t.Helper()
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 5000
	ids := make([]int64, 0, n)
	for len(ids) < n {
		specs := make([]jobq.JobSpec, min(batch, n-len(ids)))
		for i := range specs {
			specs[i] = jobq.JobSpec{Type: "ledger", Options: opts}
		}
		res, err := c.EnqueueMany(t.Context(), specs)
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// queryInt runs a query returning one integer on b's pool.
func queryInt(ctx context.Context, b *Backend, sql string, args ...any) (int64, error) {
	var n int64
	err := b.Pool().QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// mustInt is queryInt failing the test on error.
func mustInt(t *testing.T, b *Backend, sql string, args ...any) int64 {
	t.Helper()
	n, err := queryInt(t.Context(), b, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// pollEvery is waitFor with a coarser step, for conditions that cost a
// query over many rows: it checks cond every step until it holds, failing
// the test after within.
func pollEvery(t *testing.T, step, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(step)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}

// pollProgress checks every step until count reaches target, failing the
// test only when count has not grown for stall. How long thousands of jobs
// take depends on the machine's load, so a fixed deadline assumed a quiet
// one (TestWorkersSurviveServerRestart ran out of its 90s after the
// restart under a CPU hog, its workers alive); a run that stops making
// progress is what fails. progress, if not nil, sees each count; a count
// below 0 (the server unreachable) is no progress.
func pollProgress(t *testing.T, step, stall time.Duration, what string, target int64, count func() int64, progress func(int64)) {
	t.Helper()
	tick := time.NewTicker(step)
	defer tick.Stop()
	best, since := int64(-1), time.Now()
	for {
		n := count()
		if progress != nil {
			progress(n)
		}
		if n >= target {
			return
		}
		if n > best {
			best, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("no progress for %s waiting for %s: %d of %d", stall, what, max(best, 0), target)
		}
		<-tick.C
	}
}

// progressLog returns a function to call with the number of jobs done; it
// logs the count and the rate at most every 10 seconds, so a slow run shows
// how far it got.
func progressLog(t *testing.T, start time.Time, total int) func(done int64) {
	last := start
	return func(done int64) {
		if time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		took := time.Since(start)
		t.Logf("%s: %d of %d jobs done (%.0f jobs/s)", took.Round(time.Second), done, total, float64(done)/took.Seconds())
	}
}

// ledgerCount counts ledger rows, reporting -1 while the server is
// unreachable (during a restart).
func ledgerCount(t *testing.T, b *Backend) int64 {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n, err := queryInt(ctx, b, "SELECT count(*) FROM "+quoteIdent(b.Schema())+".ledger")
	if err != nil {
		return -1
	}
	return n
}

// checkAllDone asserts that the ledger holds exactly ids, one row each,
// that no job is left in jobs nor moved to failed_jobs, and returns the
// number of ledger rows per pid.
func checkAllDone(t *testing.T, b *Backend, ids []int64) map[int]int {
	t.Helper()
	s := quoteIdent(b.Schema())
	rows := mustInt(t, b, "SELECT count(*) FROM "+s+".ledger")
	distinct := mustInt(t, b, "SELECT count(DISTINCT job_id) FROM "+s+".ledger")
	ours := mustInt(t, b, "SELECT count(*) FROM "+s+".ledger WHERE job_id = ANY($1)", ids)
	if rows != int64(len(ids)) || distinct != rows || ours != rows {
		t.Errorf("ledger has %d rows, %d distinct jobs, %d of the enqueued ids; want %d of each", rows, distinct, ours, len(ids))
	}
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".jobs"); n != 0 {
		t.Errorf("%d jobs left in the jobs table, want none", n)
	}
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".failed_jobs"); n != 0 {
		f, _ := b.FailedList(t.Context(), backend.FailedListParams{Limit: 5})
		for _, j := range f {
			t.Logf("failed job %d after %d attempts: %s", j.JobID, j.Attempts, j.Error)
		}
		t.Errorf("%d failed jobs, want none", n)
	}
	perPID := map[int]int{}
	r, err := b.Pool().Query(t.Context(), "SELECT pid, count(*) FROM "+s+".ledger GROUP BY pid")
	if err != nil {
		t.Fatal(err)
	}
	var pid, n int
	if _, err := pgx.ForEachRow(r, []any{&pid, &n}, func() error { perPID[pid] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return perPID
}

// checkEveryProcWorked asserts that the ledger's rows came from the procs
// and that each of them did some.
func checkEveryProcWorked(t *testing.T, perPID map[int]int, procs []proc) {
	t.Helper()
	started := map[int]bool{}
	for _, p := range procs {
		started[p.PID()] = true
		if perPID[p.PID()] == 0 {
			t.Errorf("worker process %d completed no job (jobs per process: %v)", p.PID(), perPID)
		}
	}
	for pid, n := range perPID {
		if !started[pid] {
			t.Errorf("%d ledger rows from process %d, which the test did not start", n, pid)
		}
	}
}

// TestProcessesExactlyOnce: 4 worker processes × 25 handlers drain 100,000
// jobs; every job's effect is recorded exactly once, on its first attempt,
// by a handler run exactly once; nothing fails or stays behind; every
// process takes part and exits 0 on SIGTERM.
//
// It does not run in parallel: it keeps both cores busy from start to end,
// and its jobs/s figure means something only when it has them alone.
func TestProcessesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	b := openTest(t, Options{})
	createProcTables(t, b)
	const total, procs, concurrency = 100_000, 4, 25
	enqStart := time.Now()
	ids := enqueueLedgerJobs(t, b, total)
	enqTook := time.Since(enqStart)
	t.Logf("enqueued %d jobs in batches of 5,000 in %s (%.0f jobs/s)", total, enqTook.Round(time.Millisecond), float64(total)/enqTook.Seconds())

	start := time.Now()
	var workers []proc
	for range procs {
		// Asynchronous commit: the handlers' durability is not what this
		// test proves, and on the shared server each WAL flush queues
		// behind other tests' flushes.
		workers = append(workers, startProc(t, testURL(t), b.Schema(),
			procOptions{concurrency: concurrency, strict: true, asyncCommit: true}))
	}
	// Took 2m42s of the 300s it was given under a CPU hog: it waits for
	// as long as the jobs keep completing (see pollProgress).
	pollProgress(t, 250*time.Millisecond, time.Minute, "4 processes to complete 100,000 jobs", total, func() int64 {
		for _, p := range workers {
			if !p.Running() {
				t.Fatalf("worker process %d exited while working: %v\n%s", p.PID(), p.Err(), p.Output())
			}
		}
		return ledgerCount(t, b)
	}, progressLog(t, start, total))
	took := time.Since(start)
	for _, p := range workers {
		p.Stop(t)
	}

	perPID := checkAllDone(t, b, ids)
	checkEveryProcWorked(t, perPID, workers)
	s := quoteIdent(b.Schema())
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".ledger WHERE attempt <> 1"); n != 0 {
		t.Errorf("%d jobs completed on a later attempt: they were claimed again", n)
	}
	var runs, fenced int64
	var lost []string
	for _, p := range workers {
		sum := p.Summary(t, procSummary)
		runs += sum["runs"]
		fenced += sum["fenced_jobs"]
		if sum["dups"] != 0 || sum["notheld"] != 0 || sum["txerrs"] != 0 || sum["retried"] != 0 {
			t.Errorf("worker process %d: %v; want no duplicate effect, lost lease, transaction error or retry", p.PID(), sum)
		}
		for _, l := range p.leaseLost(t) {
			lost = append(lost, fmt.Sprintf("job %d attempt %d", l[0], l[1]))
			// Its handler was told the transaction failed; the ledger
			// shows whether it committed.
			n := mustInt(t, b, "SELECT count(*) FROM "+s+".ledger WHERE job_id = $1 AND attempt = $2 AND pid = $3", l[0], l[1], p.PID())
			if n != 1 {
				t.Errorf("job %d attempt %d: its handler failed for a lost lease and did not commit, yet the job was not run again", l[0], l[1])
			}
		}
	}
	if runs != total {
		t.Errorf("handlers ran %d times for %d jobs, want exactly once each", runs, total)
	}
	t.Logf("%d processes × %d drained %d jobs in %s: %.0f jobs/s; jobs per process %v",
		procs, concurrency, total, took.Round(time.Millisecond), float64(total)/took.Seconds(), perPID)
	// Two runtime defects with CompleteTx, logged rather than failed since
	// the effects stay exactly-once. The worker still submits OutcomeDone
	// for a job its handler completed, which the lease fence refuses (a
	// wasted write per job, and a "jobs were taken over" warning per batch
	// although none was). And a lease-extension tick that meets the row
	// deleted by the handler's transaction waits for it, finds it gone
	// after the commit, calls the lease lost and cancels the handler's
	// context, which may still be inside tx.Commit: the handler is told
	// "commit: context canceled" for a transaction that committed.
	t.Logf("the runtime's own done outcome was refused by the lease fence for %d of %d jobs", fenced, total)
	if len(lost) > 0 {
		t.Logf("%d handlers had their context cancelled (lease lost) during or after a commit that succeeded: %v", len(lost), lost)
	}
}

// TestProcessKilledMidJob: a worker process killed with SIGKILL in the
// middle of a job leaves it reserved; another process rescues it once the
// lease (10s) runs out and completes it as attempt 2; nothing is lost or
// failed.
func TestProcessKilledMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	b := openTest(t, Options{})
	createProcTables(t, b)
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Enqueue(t.Context(), "hang-first", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := quoteIdent(b.Schema())
	// The leases were 1s: a heartbeat (every third of the lease) late by
	// more than 667ms, which a loaded machine makes, let a live worker's
	// own sweep take its job back (the victim's before the kill, the
	// rescuer's attempt 2 as an attempt 3). The victim's 10s lease
	// tolerates a heartbeat 6s late and is what the rescue waits out;
	// the rescuer's is longer still, as nothing waits for it to run out.
	opts := procOptions{concurrency: 1, lease: 10 * time.Second, strict: true}

	victim := startProc(t, testURL(t), b.Schema(), opts)
	waitFor(t, 30*time.Second, "the victim to start the job", func() bool {
		n, err := queryInt(t.Context(), b, "SELECT count(*) FROM "+s+".started")
		return err == nil && n > 0
	})
	victim.Kill(t)
	row, err := b.JobGet(t.Context(), id)
	if err != nil || row.Status != backend.StateReserved || row.Attempts != 1 {
		t.Fatalf("after SIGKILL the job is %+v, %v; want reserved by the dead worker on attempt 1", row, err)
	}

	opts.lease = 30 * time.Second
	rescuer := startProc(t, testURL(t), b.Schema(), opts)
	waitFor(t, 90*time.Second, "the rescuer to complete the job", func() bool {
		n, err := queryInt(t.Context(), b, "SELECT count(*) FROM "+s+".ledger")
		return err == nil && n > 0
	})
	rescuer.Stop(t)

	type run struct{ id, attempt, pid int64 }
	read := func(table string) []run {
		r, err := b.Pool().Query(t.Context(), "SELECT job_id, attempt, pid FROM "+s+"."+table+" ORDER BY attempt")
		if err != nil {
			t.Fatal(err)
		}
		var out []run
		var x run
		if _, err := pgx.ForEachRow(r, []any{&x.id, &x.attempt, &x.pid}, func() error { out = append(out, x); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	vpid, rpid := int64(victim.PID()), int64(rescuer.PID())
	if got, want := read("started"), []run{{id, 1, vpid}, {id, 2, rpid}}; !slices.Equal(got, want) {
		t.Errorf("attempts started %v, want %v", got, want)
	}
	if got, want := read("ledger"), []run{{id, 2, rpid}}; !slices.Equal(got, want) {
		t.Errorf("ledger %v, want %v", got, want)
	}
	checkAllDone(t, b, []int64{id})
}

// TestWorkersSurviveServerRestart: 2 worker processes × 25 handlers work
// 20,000 jobs on a private server that is restarted ("immediate", a crash)
// when about a third is done. The workers ride it out without exiting, every
// job completes exactly once in the ledger (complete-in-transaction; some
// attempts may run twice, which the fence and the primary key absorb),
// nothing fails, and both exit 0 on SIGTERM.
func TestWorkersSurviveServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private server and worker processes")
	}
	t.Parallel()
	if os.Geteuid() == 0 {
		// pgtest runs the server as the postgres user when we are root and
		// fails (rather than skips) without one.
		if _, err := user.Lookup("postgres"); err != nil {
			msg := fmt.Sprintf("running as root needs a postgres OS user for the private server: %v", err)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	srv := pgtest.StartServer(t)
	// Quiet: this backend's own complaints while the server is down are
	// expected and not what is tested.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := openSchema(t, srv.URL, Options{Schema: "jobq_restart", QueryTimeout: 5 * time.Second, Logger: quiet})
	createProcTables(t, b)
	const total = 20_000
	// Attempts cut short by the restart count; 25 leaves room for several.
	ids := enqueueLedgerJobs(t, b, total, jobq.MaxAttempts(25))

	// A short lease: claims whose reply the crash swallowed are held by no
	// one and come back only when it runs out.
	opts := procOptions{concurrency: 25, lease: 2 * time.Second}
	workers := []proc{
		startProc(t, srv.URL, b.Schema(), opts),
		startProc(t, srv.URL, b.Schema(), opts),
	}
	alive := func(when string) {
		t.Helper()
		for _, p := range workers {
			if !p.Running() {
				t.Fatalf("worker process %d exited %s: %v\n%s", p.PID(), when, p.Err(), p.Output())
			}
		}
	}
	// Both waits go on while jobs keep completing (see pollProgress): under
	// a CPU hog the second ran out of the 90s it was given.
	start := time.Now()
	pollProgress(t, 20*time.Millisecond, time.Minute, "a third of the jobs to complete", total/3, func() int64 {
		alive("before the restart")
		return ledgerCount(t, b)
	}, progressLog(t, start, total))
	before := ledgerCount(t, b)
	restartStart := time.Now()
	srv.Restart("immediate")
	down := time.Since(restartStart)
	if before >= total {
		t.Fatalf("all %d jobs were done before the restart: nothing was tested", total)
	}
	alive("during the restart")

	pollProgress(t, 100*time.Millisecond, time.Minute, "all jobs to complete after the restart", total, func() int64 {
		alive("after the restart")
		return ledgerCount(t, b)
	}, progressLog(t, start, total))
	alive("after all jobs completed")
	for _, p := range workers {
		p.Stop(t)
	}

	perPID := checkAllDone(t, b, ids)
	checkEveryProcWorked(t, perPID, workers)
	var runs, retried, dups, warnings int64
	for _, p := range workers {
		s := p.Summary(t, procSummary)
		runs += s["runs"]
		retried += s["retried"]
		dups += s["dups"] // a stale attempt meeting its successor's committed row
		warnings += s["warnings"] - s["fenced_warnings"]
	}
	if runs < total {
		t.Errorf("handlers ran %d times for %d jobs", runs, total)
	}
	t.Logf("restarted the server (down %s) after %d of %d jobs; handlers ran %d times (%d on a later attempt, %d refused by the ledger's key); workers logged %d warnings besides the fence's; jobs per process %v",
		down.Round(time.Millisecond), before, total, runs, retried, dups, warnings, perPID)
}
