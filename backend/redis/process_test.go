package redis

// Tests that prove the queue across real worker processes sharing one key
// prefix: 4 processes × 25 handlers on 100,000 jobs with every effect
// recorded once, a worker killed with SIGKILL in the middle of a job, and
// a private server crashed and restarted under running workers.
//
// The worker processes are this test binary run again with workerEnv set
// (see init below). Their handlers record their effect in a ledger hash
// under the test's key prefix, one field per job, with HSETNX: a second
// effect for a job finds the field taken and is recorded in a list of
// duplicates, where the test sees it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/redis/redistest"
	"github.com/jobq/jobq/internal/proctest"
)

// workerEnv carries a worker process's settings (workerSettings as JSON);
// its presence is what makes the test binary a worker.
const workerEnv = "JOBQ_REDISTEST_WORKER"

// workerSettings configures a worker process.
type workerSettings struct {
	URL         string        // the server
	Prefix      string        // the key prefix of the jobs and the ledger
	Concurrency int           // handlers
	Lease       time.Duration // 0: the runtime's default (30s)
	Timeout     time.Duration // the backend's call timeout; 0: its default
	Strict      bool          // exit workerExitDup after a duplicate effect
}

// Exit codes of a worker process.
const (
	workerExitRun   = 1 // Worker.Run failed
	workerExitSetup = 3 // bad settings, or the backend did not open
	workerExitDup   = 4 // strict, and an effect was recorded twice
)

// workerSummary starts the line of counts a worker prints on its way out.
const workerSummary = "jobq-worker-summary "

// The handlers' keys under the key prefix, beside the backend's own (which
// all start prefix:{queue}, prefix:queues, prefix:unique or prefix:schema).
func ledgerKey(prefix string) string  { return prefix + ":ledger" }
func dupsKey(prefix string) string    { return prefix + ":dups" }
func startedKey(prefix string) string { return prefix + ":started" }

// recordStart appends "<job id> <attempt> <pid> <µs>" to the started list,
// the time being the Redis clock's, so that a test can compare it with
// lease deadlines.
var recordStart = rueidis.NewLuaScript(`
local t = redis.call('TIME')
return redis.call('RPUSH', KEYS[1], ARGV[1] .. ' ' .. t[1] .. string.format('%06d', tonumber(t[2])))`)

// runWorkerProcess is a worker process: it works the "ledger" and
// "hang-first" types until SIGTERM, then prints its summary.
//
// "ledger" records its effect: HSETNX prefix:ledger <job id> "<attempt>
// <pid> <run>" (run numbers the handler calls of this process, so a
// command the client sent twice is told from a second effect). A field
// found taken by another run is a duplicate effect: it is pushed to
// prefix:dups and printed. "hang-first" pushes "<job id> <attempt> <pid>
// <µs>" to prefix:started, hangs until cancelled on attempt 1, and acts as
// "ledger" on later attempts.
func runWorkerProcess(raw string) int {
	ctx, stop := proctest.ChildContext()
	defer stop()
	pid := os.Getpid()
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "worker %d: "+format+"\n", append([]any{pid}, args...)...)
		return code
	}
	var s workerSettings
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fail(workerExitSetup, "settings %s: %v", raw, err)
	}
	logs := proctest.NewLog(pid)
	log := slog.New(logs)

	openCtx, cancelOpen := context.WithTimeout(ctx, 30*time.Second)
	defer cancelOpen()
	b, err := Open(openCtx, s.URL, Options{KeyPrefix: s.Prefix, Timeout: s.Timeout, Logger: log, Existing: true})
	if err != nil {
		return fail(workerExitSetup, "open backend: %v", err)
	}
	defer b.Close()
	rdb, err := redistest.Client(s.URL)
	if err != nil {
		return fail(workerExitSetup, "ledger client: %v", err)
	}
	defer rdb.Close()

	var runs, retried, dups, stale, rescued, leaseLost, seq atomic.Int64
	ledger, dupList := ledgerKey(s.Prefix), dupsKey(s.Prefix)
	record := func(ctx context.Context, j *jobq.Job) error {
		id := strconv.FormatInt(j.ID, 10)
		mine := fmt.Sprintf("%d %d %d", j.Attempt, pid, seq.Add(1))
		set, err := hsetnxResend(ctx, rdb, ledger, id, mine)
		if err != nil {
			return fmt.Errorf("record effect: %w", err)
		}
		if set {
			return nil
		}
		first, err := rdb.Do(ctx, rdb.B().Hget().Key(ledger).Field(id).Build()).ToString()
		if err != nil {
			return fmt.Errorf("read recorded effect: %w", err)
		}
		if first == mine {
			return nil // the client sent our HSETNX again after a lost reply
		}
		dups.Add(1)
		fmt.Fprintf(os.Stderr, "worker %d: DUPLICATE EFFECT: job %s: recorded as %q, again as %q\n", pid, id, first, mine)
		return rdb.Do(ctx, rdb.B().Rpush().Key(dupList).Element(fmt.Sprintf("job %s: recorded as %q, again as %q", id, first, mine)).Build()).Error()
	}
	count := func(ctx context.Context, j *jobq.Job) {
		runs.Add(1)
		if j.Attempt > 1 {
			retried.Add(1)
		}
		context.AfterFunc(ctx, func() {
			if errors.Is(context.Cause(ctx), jobq.ErrLeaseLost) {
				leaseLost.Add(1)
			}
		})
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("ledger", func(ctx context.Context, j *jobq.Job) error {
		count(ctx, j)
		return record(ctx, j)
	})
	reg.HandleFunc("hang-first", func(ctx context.Context, j *jobq.Job) error {
		count(ctx, j)
		entry := fmt.Sprintf("%d %d %d", j.ID, j.Attempt, pid)
		if err := recordStart.Exec(ctx, rdb, []string{startedKey(s.Prefix)}, []string{entry}).Error(); err != nil {
			return fmt.Errorf("record start: %w", err)
		}
		if j.Attempt == 1 {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return record(ctx, j)
	})

	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Concurrency:     s.Concurrency,
		Lease:           s.Lease,
		PollInterval:    200 * time.Millisecond,
		SweepInterval:   100 * time.Millisecond,
		Retry:           jobq.RetryPolicy{Base: 10 * time.Millisecond, Max: 200 * time.Millisecond},
		ShutdownTimeout: 5 * time.Second,
		Logger:          log,
		Hooks: []jobq.WorkerHooks{{
			Stale:   func(jobq.StaleEvent) { stale.Add(1) },
			Rescued: func(jobq.RescuedEvent) { rescued.Add(1) },
		}},
	})
	if err != nil {
		return fail(workerExitSetup, "new worker: %v", err)
	}
	if err := w.Run(ctx); err != nil {
		return fail(workerExitRun, "run: %v", err)
	}
	warnings, errs := logs.Total(slog.LevelWarn), logs.Total(slog.LevelError)
	fmt.Fprintf(os.Stderr, "%spid=%d runs=%d retried=%d dups=%d stale=%d rescued=%d leaselost=%d warnings=%d errors=%d\n",
		workerSummary, pid, runs.Load(), retried.Load(), dups.Load(), stale.Load(), rescued.Load(), leaseLost.Load(), warnings, errs)
	if s.Strict && dups.Load() > 0 {
		return workerExitDup
	}
	return 0
}

// startWorker starts a worker process with settings s.
func startWorker(t *testing.T, s workerSettings) *proctest.Proc {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return proctest.StartProc(t, workerEnv+"="+string(raw))
}

// enqueueJobs enqueues n jobs of type typ in batches of 5,000 and returns
// their IDs.
func enqueueJobs(t *testing.T, b backend.Backend, typ string, n int, opts ...jobq.EnqueueOption) []int64 {
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
			specs[i] = jobq.JobSpec{Type: typ, Options: opts}
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

// effect is one ledger entry: the attempt that recorded a job's effect.
type effect struct {
	attempt int
	pid     int
}

// hsetnxResend is HSETNX sent again, up to three times, after a
// connection failure: the reply of one that ran may be what was lost, so
// the caller must recognise its own value.
func hsetnxResend(ctx context.Context, rdb rueidis.Client, key, field, value string) (bool, error) {
	for attempt := 0; ; attempt++ {
		set, err := rdb.Do(ctx, rdb.B().Hsetnx().Key(key).Field(field).Value(value).Build()).AsBool()
		rerr, isRedis := rueidis.IsRedisErr(err)
		if err == nil || attempt == 3 || ctx.Err() != nil || (isRedis && !rerr.IsLoading()) {
			return set, err
		}
		time.Sleep(time.Duration(8<<attempt) * time.Millisecond)
	}
}

// ledger reads the whole ledger of prefix.
func ledger(t *testing.T, rdb rueidis.Client, prefix string) map[int64]effect {
	t.Helper()
	m, err := rdb.Do(t.Context(), rdb.B().Hgetall().Key(ledgerKey(prefix)).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	out := make(map[int64]effect, len(m))
	for k, v := range m {
		var e effect
		var run int64
		id, err := strconv.ParseInt(k, 10, 64)
		if err == nil {
			_, err = fmt.Sscanf(v, "%d %d %d", &e.attempt, &e.pid, &run)
		}
		if err != nil {
			t.Fatalf("ledger entry %q = %q: %v", k, v, err)
		}
		out[id] = e
	}
	return out
}

// ledgerLen counts the ledger's entries, -1 while the server does not
// answer.
func ledgerLen(ctx context.Context, rdb rueidis.Client, prefix string) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := rdb.Do(ctx, rdb.B().Hlen().Key(ledgerKey(prefix)).Build()).AsInt64()
	if err != nil {
		return -1
	}
	return n
}

// testClient returns a plain rueidis client for url, closed when t ends.
func testClient(t *testing.T, url string) rueidis.Client {
	t.Helper()
	rdb, err := redistest.Client(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	return rdb
}

// checkAllDone asserts that the ledger holds exactly ids, that no job is
// left live or failed and that no job's hash stayed behind; it returns
// the ledger.
func checkAllDone(t *testing.T, b *Backend, url string, ids []int64) map[int64]effect {
	t.Helper()
	rdb := testClient(t, url)
	prefix := b.KeyPrefix()
	got := ledger(t, rdb, prefix)
	missing := 0
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			if missing++; missing <= 5 {
				t.Errorf("job %d has no effect in the ledger", id)
			}
		}
	}
	if missing > 0 || len(got) != len(ids) {
		t.Errorf("ledger has %d entries, %d of the %d enqueued jobs missing", len(got), missing, len(ids))
	}
	stats, err := b.QueueStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Pending+s.Scheduled+s.Reserved+s.Failed != 0 {
			t.Errorf("queue %s: %+v, want nothing left", s.Queue, s)
		}
		if s.Failed > 0 {
			f, _ := b.FailedList(t.Context(), backend.FailedListParams{Limit: 5})
			for _, j := range f {
				t.Logf("failed job %d after %d attempts: %s", j.JobID, j.Attempts, j.Error)
			}
		}
	}
	keys, err := redistest.Keys(t.Context(), url, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		if strings.Contains(k, "}:j:") || strings.Contains(k, "}:x:") {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d job hashes left behind, e.g. %q", len(left), left[:min(5, len(left))])
	}
	return got
}

// noDuplicates asserts that no handler found its job's effect recorded
// already.
func noDuplicates(t *testing.T, url, prefix string) {
	t.Helper()
	rdb := testClient(t, url)
	d, err := rdb.Do(t.Context(), rdb.B().Lrange().Key(dupsKey(prefix)).Start(0).Stop(9).Build()).AsStrSlice()
	if err != nil || len(d) > 0 {
		t.Errorf("duplicate effects: %q (%v)", d, err)
	}
}

// perProcess counts ledger entries per pid and asserts that every worker
// did some and that no other process did any.
func perProcess(t *testing.T, got map[int64]effect, workers []*proctest.Proc) map[int]int {
	t.Helper()
	per := map[int]int{}
	for _, e := range got {
		per[e.pid]++
	}
	started := map[int]bool{}
	for _, p := range workers {
		started[p.PID()] = true
		if per[p.PID()] == 0 {
			t.Errorf("worker process %d completed no job (jobs per process: %v)", p.PID(), per)
		}
	}
	for pid, n := range per {
		if !started[pid] {
			t.Errorf("%d ledger entries from process %d, which the test did not start", n, pid)
		}
	}
	return per
}

// pollAlive checks cond every step until it holds, failing the test after
// within or as soon as a worker exits.
func pollAlive(t *testing.T, workers []*proctest.Proc, step, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(step)
	defer tick.Stop()
	for {
		for _, p := range workers {
			if !p.Running() {
				t.Fatalf("worker process %d exited while waiting for %s: %v\n%s", p.PID(), what, p.Err(), p.Output())
			}
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}

// processJobs is the size of TestProcessesExactlyOnce: the 100,000,
// or 20,000 under -short.
func processJobs() int {
	if testing.Short() {
		return 20_000
	}
	return 100_000
}

// TestProcessesExactlyOnce: 4 worker processes × 25 handlers drain 100,000
// jobs on the shared server. Every job's effect is in the ledger exactly
// once, from its first attempt; no handler ran twice (no double claim: the
// handler runs add up to the jobs); no outcome was refused by the fence,
// no lease was rescued or lost; nothing fails or stays behind, not even a
// job's hash; every process takes part and exits 0 on SIGTERM.
//
// It does not run in parallel with the package's other tests: it keeps
// both cores busy, and its jobs/s figure means something only alone.
func TestProcessesExactlyOnce(t *testing.T) {
	b := openTest(t, Options{})
	url := testURL(t)
	rdb := testClient(t, url)
	total := processJobs()
	const procs, concurrency = 4, 25
	enqStart := time.Now()
	ids := enqueueJobs(t, b, "ledger", total)
	t.Logf("enqueued %d jobs in %s", total, time.Since(enqStart).Round(time.Millisecond))

	start := time.Now()
	var workers []*proctest.Proc
	for range procs {
		workers = append(workers, startWorker(t, workerSettings{URL: url, Prefix: b.KeyPrefix(), Concurrency: concurrency, Strict: true}))
	}
	logged := start
	pollAlive(t, workers, 250*time.Millisecond, 10*time.Minute, fmt.Sprintf("%d processes to complete %d jobs", procs, total), func() bool {
		n := ledgerLen(t.Context(), rdb, b.KeyPrefix())
		if time.Since(logged) >= 10*time.Second { // so that a slow run shows how far it got
			logged = time.Now()
			t.Logf("%s: %d of %d jobs done", logged.Sub(start).Round(time.Second), n, total)
		}
		return n >= int64(total)
	})
	took := time.Since(start)
	proctest.StopAll(t, workers...)
	got := checkAllDone(t, b, url, ids)
	noDuplicates(t, url, b.KeyPrefix())
	per := perProcess(t, got, workers)
	later := 0
	for _, e := range got {
		if e.attempt != 1 {
			later++
		}
	}
	if later > 0 {
		t.Errorf("%d jobs recorded their effect on a later attempt: they were claimed again", later)
	}
	var runs int64
	for _, p := range workers {
		s := p.Summary(t, workerSummary)
		runs += s["runs"]
		if s["dups"] != 0 || s["retried"] != 0 || s["stale"] != 0 || s["rescued"] != 0 || s["leaselost"] != 0 || s["errors"] != 0 {
			t.Errorf("worker process %d: %v; want no duplicate, retry, refused outcome, rescue, lost lease or error", p.PID(), s)
		}
	}
	if runs != int64(total) {
		t.Errorf("handlers ran %d times for %d jobs, want exactly once each", runs, total)
	}
	t.Logf("%d processes × %d drained %d jobs in %s: %.0f jobs/s; jobs per process %v",
		procs, concurrency, total, took.Round(time.Millisecond), float64(total)/took.Seconds(), per)
}

// started is one entry of the started list.
type started struct {
	id      int64
	attempt int
	pid     int
	at      int64 // µs, Redis clock
}

// startedList reads the started list of prefix.
func startedList(t *testing.T, rdb rueidis.Client, prefix string) []started {
	t.Helper()
	l, err := rdb.Do(t.Context(), rdb.B().Lrange().Key(startedKey(prefix)).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("read started list: %v", err)
	}
	out := make([]started, len(l))
	for i, v := range l {
		if _, err := fmt.Sscanf(v, "%d %d %d %d", &out[i].id, &out[i].attempt, &out[i].pid, &out[i].at); err != nil {
			t.Fatalf("started entry %q: %v", v, err)
		}
	}
	return out
}

// TestProcessKilledMidJob: a worker process killed with SIGKILL in the
// middle of a job leaves it reserved on attempt 1; another process claims
// it again once the lease (10s, by the Redis clock) has run out, not
// before, and completes it as attempt 2; nothing is lost or failed.
func TestProcessKilledMidJob(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	url := testURL(t)
	rdb := testClient(t, url)
	ids := enqueueJobs(t, b, "hang-first", 1)
	id := ids[0]
	// The leases were 1s: a heartbeat (every third of the lease) late by
	// more than 667ms, which a loaded machine makes, let a live worker's
	// own sweep take its job back (the victim's before the kill, the
	// rescuer's attempt 2 as an attempt 3). The victim's 10s lease
	// tolerates a heartbeat 6s late and is what the rescue waits out;
	// the rescuer's is longer still, as nothing waits for it to run out.
	s := workerSettings{URL: url, Prefix: b.KeyPrefix(), Concurrency: 1, Lease: 10 * time.Second, Strict: true}

	victim := startWorker(t, s)
	pollAlive(t, []*proctest.Proc{victim}, 20*time.Millisecond, 30*time.Second, "the victim to start the job", func() bool {
		n, _ := rdb.Do(t.Context(), rdb.B().Llen().Key(startedKey(b.KeyPrefix())).Build()).AsInt64()
		return n > 0
	})
	victim.Kill(t)
	row, err := b.JobGet(t.Context(), id)
	if err != nil || row.Status != backend.StateReserved || row.Attempts != 1 {
		t.Fatalf("after SIGKILL the job is %+v, %v; want reserved by the dead worker on attempt 1", row, err)
	}

	s.Lease = 30 * time.Second
	rescuer := startWorker(t, s)
	pollAlive(t, []*proctest.Proc{rescuer}, 20*time.Millisecond, 90*time.Second, "the rescuer to complete the job", func() bool {
		return ledgerLen(t.Context(), rdb, b.KeyPrefix()) > 0
	})
	rescuer.Stop(t)

	runs := startedList(t, rdb, b.KeyPrefix())
	vpid, rpid := victim.PID(), rescuer.PID()
	if len(runs) != 2 || runs[0].id != id || runs[0].attempt != 1 || runs[0].pid != vpid ||
		runs[1].id != id || runs[1].attempt != 2 || runs[1].pid != rpid {
		t.Fatalf("attempts started %+v; want job %d attempt 1 by the victim %d, then attempt 2 by the rescuer %d", runs, id, vpid, rpid)
	}
	if lease := row.LeaseUntil.UnixMicro(); runs[1].at < lease {
		t.Errorf("attempt 2 started at %d µs, %d µs before the dead worker's lease ran out", runs[1].at, lease-runs[1].at)
	}
	got := checkAllDone(t, b, url, ids)
	noDuplicates(t, url, b.KeyPrefix())
	if e := got[id]; e.attempt != 2 || e.pid != rpid {
		t.Errorf("ledger has job %d as %+v, want attempt 2 by the rescuer %d", id, e, rpid)
	}
	if s := rescuer.Summary(t, workerSummary); s["rescued"] != 1 {
		t.Errorf("rescuer: %v; want it to have rescued the job", s)
	}
}

// TestWorkersSurviveServerRestart: 2 worker processes × 25 handlers work
// 20,000 jobs on a private redis-server with AOF and appendfsync always.
// When about a third is done the server is killed (SIGKILL), kept down
// until every worker has logged the outage, and started again on the same
// files. The workers never exit: they log, back off, reconnect and carry
// on. Every job's effect is in the ledger (some may be there from an
// earlier attempt whose outcome the crash swallowed: at-least-once, so
// duplicates are counted, not failed), nothing fails or stays behind, and
// both exit 0 on SIGTERM.
func TestWorkersSurviveServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private server and worker processes")
	}
	t.Parallel()
	srv := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	b := openURL(t, srv.URL, Options{KeyPrefix: "restart", Logger: quiet, Timeout: 2 * time.Second})
	rdb := testClient(t, srv.URL)
	const total = 20_000
	// Attempts cut short by the outage count; 25 leave room for many.
	ids := enqueueJobs(t, b, "ledger", total, jobq.MaxAttempts(25))

	// A short lease: claims whose reply the crash swallowed are held by no
	// one and come back only when it runs out.
	s := workerSettings{URL: srv.URL, Prefix: b.KeyPrefix(), Concurrency: 25, Lease: 2 * time.Second, Timeout: 2 * time.Second}
	workers := []*proctest.Proc{startWorker(t, s), startWorker(t, s)}
	pollAlive(t, workers, 20*time.Millisecond, 2*time.Minute, "a third of the jobs to complete", func() bool {
		return ledgerLen(t.Context(), rdb, b.KeyPrefix()) >= total/3
	})
	before := ledgerLen(t.Context(), rdb, b.KeyPrefix())
	outputs := make([]int, len(workers))
	for i, p := range workers {
		outputs[i] = len(p.Output())
	}
	downAt := time.Now()
	srv.Stop()
	pollAlive(t, workers, 20*time.Millisecond, time.Minute, "every worker to log the outage", func() bool {
		for i, p := range workers {
			if out := p.Output()[outputs[i]:]; !strings.Contains(out, " WARN ") && !strings.Contains(out, " ERROR ") {
				return false
			}
		}
		return true
	})
	srv.Start()
	down := time.Since(downAt)
	if before >= total {
		t.Fatalf("all %d jobs were done before the restart: nothing was tested", total)
	}
	pollAlive(t, workers, 100*time.Millisecond, 3*time.Minute, "all jobs to complete after the restart", func() bool {
		return ledgerLen(t.Context(), rdb, b.KeyPrefix()) >= total
	})
	proctest.StopAll(t, workers...)

	got := checkAllDone(t, b, srv.URL, ids)
	per := perProcess(t, got, workers)
	var runs, retried, dups, warnings int64
	for _, p := range workers {
		s := p.Summary(t, workerSummary)
		runs += s["runs"]
		retried += s["retried"]
		dups += s["dups"]
		warnings += s["warnings"]
	}
	if runs < total {
		t.Errorf("handlers ran %d times for %d jobs", runs, total)
	}
	t.Logf("killed the server after %d of %d jobs, down %s; handlers ran %d times (%d on a later attempt, %d effects found already recorded); workers logged %d warnings; jobs per process %v",
		before, total, down.Round(time.Millisecond), runs, retried, dups, warnings, per)
}
