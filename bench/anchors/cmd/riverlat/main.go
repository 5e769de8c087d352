// Command riverlat measures River's pickup latency on PostgreSQL the way
// `jobq bench --workload latency --worker-process` measures jobq's, so the
// two lines compare field by field: an insert-only client in this process
// inserts jobs one at a time at -rate per second on a fixed schedule, each
// carrying the wall clock read just before its Insert call; a worker
// client in a child process (this binary again, with -worker) records, as
// each handler starts, the time since then. It prints one JSON line with
// jobq's latency field names (p50_ms, p90_ms, p99_ms, max_ms, jobs,
// jobs_per_sec, ...).
//
// River's tables go into a schema of their own (-schema), migrated with
// rivermigrate at the start and dropped at the end unless -keep-schema.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/jobq/jobq/bench/anchors/internal/anchor"
)

// config is the command line; the child gets the same one plus -worker.
type config struct {
	db            string
	schema        string
	rate          int
	duration      time.Duration
	maxJobs       int
	workers       int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	stall         time.Duration
	keepSchema    bool
	worker        bool
	jobs          int // set for the child: how many measured jobs to expect
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("riverlat", flag.ContinueOnError)
	fs.StringVar(&c.db, "db", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL URL (pool_max_conns may be given; default as jobq's pool)")
	fs.StringVar(&c.schema, "schema", "anchors_river", "schema of River's tables, created, migrated and (unless -keep-schema) dropped")
	fs.IntVar(&c.rate, "rate", 200, "jobs inserted per second")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to insert")
	fs.IntVar(&c.maxJobs, "n", 50000, "the most jobs to insert (as jobq bench's -n)")
	fs.IntVar(&c.workers, "workers", 100, "the worker client's MaxWorkers")
	fs.DurationVar(&c.fetchCooldown, "fetch-cooldown", time.Millisecond, "River's FetchCooldown (both clients: the inserter's paces its insert notifications)")
	fs.DurationVar(&c.fetchPoll, "fetch-poll-interval", 50*time.Millisecond, "River's FetchPollInterval (both clients)")
	fs.DurationVar(&c.stall, "stall", 30*time.Second, "give up when no job starts for this long")
	fs.BoolVar(&c.keepSchema, "keep-schema", false, "leave the schema and its jobs in place at the end")
	fs.BoolVar(&c.worker, "worker", false, "internal: run as the worker process")
	fs.IntVar(&c.jobs, "worker-jobs", 0, "internal: the measured jobs the worker process waits for")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.rate < 1 || c.workers < 1 || c.maxJobs < 1 || c.duration <= 0 {
		return c, errors.New("-rate, -workers, -n and -duration must be positive")
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if c.worker {
		err = runWorker(ctx, c)
	} else {
		err = runInserter(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverlat:", err)
		os.Exit(1)
	}
}

// latencyArgs carries the inserter's clock into the handler; both
// processes run on one host, so the wall clocks are one clock.
type latencyArgs struct {
	T      int64 `json:"t"`                // UnixNano just before Insert
	Warmup bool  `json:"warmup,omitempty"` // not measured
}

// Kind names River's job kind.
func (latencyArgs) Kind() string { return "anchors_noop" }

// result is the printed line: jobq bench's latency field names, and what
// was measured.
type result struct {
	System        string  `json:"system"`
	Version       string  `json:"version"`
	Workload      string  `json:"workload"`
	Backend       string  `json:"backend"`
	WorkerProcess bool    `json:"worker_process"`
	Jobs          int64   `json:"jobs"`
	Workers       int     `json:"workers"`
	Rate          int     `json:"rate"`
	Seconds       float64 `json:"seconds"`
	JobsPerSec    float64 `json:"jobs_per_sec"`
	anchor.Percentiles
	FetchCooldownMs     float64 `json:"fetch_cooldown_ms"`
	FetchPollIntervalMs float64 `json:"fetch_poll_interval_ms"`
	PoolMaxConns        int32   `json:"pool_max_conns"`
}

// openPool opens the database with jobq's default pool size unless the
// URL names one: pgx's own default (4 on 2 cores) would starve River's
// 100 workers and make the comparison unfair to it.
func openPool(ctx context.Context, c config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(c.db)
	if err != nil {
		return nil, fmt.Errorf("parse -db: %w", err)
	}
	if !strings.Contains(c.db, "pool_max_conns=") {
		pc.MaxConns = int32(max(16, 4*runtime.GOMAXPROCS(0)))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to -db: %w", err)
	}
	return pool, nil
}

func riverConfig(c config) *river.Config {
	return &river.Config{
		Schema:            c.schema,
		FetchCooldown:     c.fetchCooldown,
		FetchPollInterval: c.fetchPoll,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// runInserter is the parent: it migrates River's schema, starts the worker
// process, inserts the paced jobs and prints the result.
func runInserter(ctx context.Context, c config) (err error) {
	pool, err := openPool(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrate(ctx, pool, c.schema); err != nil {
		return err
	}
	if !c.keepSchema {
		defer func() {
			// A fresh context: the run's may have ended, and the schema
			// must go all the same.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, derr := pool.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{c.schema}.Sanitize()+" CASCADE"); derr != nil && err == nil {
				err = fmt.Errorf("drop schema %s: %w", c.schema, derr)
			}
		}()
	}
	client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(c)) // insert-only: no Queues, never started
	if err != nil {
		return fmt.Errorf("make the insert-only client: %w", err)
	}
	n := int64(min(float64(c.maxJobs), math.Ceil(float64(c.rate)*c.duration.Seconds())))
	w, err := startWorker(ctx, c, n)
	if err != nil {
		return err
	}
	defer w.kill()

	insert := func(warm bool) error {
		_, err := client.Insert(ctx, latencyArgs{T: time.Now().UnixNano(), Warmup: warm}, nil)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return nil
	}
	// One job first, as jobq bench does, so the first sample does not pay
	// for the worker's start.
	if err := insert(true); err != nil {
		return err
	}
	if _, err := w.expect(ctx, "warm", c.stall); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	period := time.Second / time.Duration(c.rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * period)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		if err := insert(false); err != nil {
			return err
		}
	}
	took := time.Since(start)
	line, err := w.expect(ctx, "lat ", c.stall+time.Duration(n)*time.Millisecond)
	if err != nil {
		return err
	}
	var us []int64
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "lat ")), &us); err != nil {
		return fmt.Errorf("read the worker process's latencies: %w", err)
	}
	if int64(len(us)) != n {
		return fmt.Errorf("worker process measured %d latencies for %d jobs", len(us), n)
	}
	if err := w.wait(); err != nil {
		return err
	}
	lats := make([]time.Duration, len(us))
	for i, u := range us {
		lats[i] = time.Duration(u) * time.Microsecond
	}
	return anchor.PrintJSON(result{
		System: "river", Version: anchor.ModuleVersion("github.com/riverqueue/river"),
		Workload: "latency", Backend: "postgres", WorkerProcess: true,
		Jobs: n, Workers: c.workers, Rate: c.rate,
		Seconds: anchor.Round(took.Seconds()), JobsPerSec: anchor.Round(float64(n) / took.Seconds()),
		Percentiles:     anchor.PercentilesOf(lats),
		FetchCooldownMs: ms(c.fetchCooldown), FetchPollIntervalMs: ms(c.fetchPoll),
		PoolMaxConns: pool.Config().MaxConns,
	})
}

// migrate creates schema (anew: a stale one from an interrupted run
// would hold its jobs) and applies River's migrations to it.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	id := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE; CREATE SCHEMA "+id); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return fmt.Errorf("make River's migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's schema %s: %w", schema, err)
	}
	return nil
}

// child is the worker process seen from the inserter: its stdout lines.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

func startWorker(ctx context.Context, c config, n int64) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	args := append([]string{"-worker", "-worker-jobs", fmt.Sprint(n)}, os.Args[1:]...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("worker process stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the worker process: %w", err)
	}
	ch := &child{cmd: cmd, lines: make(chan string, 4), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20) // the latency line holds every sample
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		close(ch.lines)
	}()
	if _, err := ch.expect(ctx, "ready", c.stall); err != nil {
		ch.kill()
		return nil, fmt.Errorf("worker process start: %w", err)
	}
	return ch, nil
}

// expect waits up to d for the worker process's next line, which must
// start with prefix.
func (ch *child) expect(ctx context.Context, prefix string, d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", fmt.Errorf("no %q from the worker process in %s", strings.TrimSpace(prefix), d)
	case l, ok := <-ch.lines:
		if !ok {
			return "", fmt.Errorf("worker process ended before %q: %w", strings.TrimSpace(prefix), ch.cmd.Wait())
		}
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("worker process said %.80q, want %q", l, strings.TrimSpace(prefix))
		}
		return l, nil
	}
}

func (ch *child) wait() error {
	if err := ch.cmd.Wait(); err != nil {
		return fmt.Errorf("worker process: %w", err)
	}
	return nil
}

func (ch *child) kill() {
	if ch.cmd.ProcessState == nil {
		_ = ch.cmd.Process.Kill()
		_ = ch.cmd.Wait()
	}
}

// noopWorker records each measured job's pickup latency as its handler
// starts, and says when the warm-up job and the last job have started.
type noopWorker struct {
	river.WorkerDefaults[latencyArgs]
	lats    []int64 // µs, one slot per measured job
	next    atomic.Int64
	warm    chan struct{}
	warmed  atomic.Bool
	allDone chan struct{}
	started atomic.Int64 // UnixNano of the latest start, for the stall check
}

// Work runs at the handler's start: what pickup latency ends at.
func (w *noopWorker) Work(_ context.Context, job *river.Job[latencyArgs]) error {
	now := time.Now().UnixNano()
	w.started.Store(now)
	if job.Args.Warmup {
		if w.warmed.CompareAndSwap(false, true) {
			close(w.warm)
		}
		return nil
	}
	i := w.next.Add(1) - 1
	if i < int64(len(w.lats)) {
		w.lats[i] = (now - job.Args.T) / 1000
	}
	if i == int64(len(w.lats))-1 {
		close(w.allDone)
	}
	return nil
}

// runWorker is the child: a River client working the default queue with
// c.workers workers, which reports on stdout "ready", "warm" and finally
// "lat [µs, ...]".
func runWorker(ctx context.Context, c config) error {
	if c.jobs < 1 {
		return errors.New("-worker needs -worker-jobs")
	}
	pool, err := openPool(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	w := &noopWorker{lats: make([]int64, c.jobs), warm: make(chan struct{}), allDone: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	cfg := riverConfig(c)
	cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.workers}}
	cfg.Workers = workers
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return fmt.Errorf("make the worker client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start the worker client: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) error {
		if _, err := io.WriteString(out, s+"\n"); err != nil {
			return err
		}
		return out.Flush()
	}
	if err := say("ready"); err != nil {
		return err
	}
	if err := waitStall(ctx, w, w.warm, c.stall); err != nil {
		return fmt.Errorf("warm-up job: %w", err)
	}
	if err := say("warm"); err != nil {
		return err
	}
	if err := waitStall(ctx, w, w.allDone, c.stall); err != nil {
		return fmt.Errorf("after %d of %d jobs: %w", w.next.Load(), c.jobs, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Stop(sctx); err != nil { // completions written, as jobq's worker process reports them
		return fmt.Errorf("stop the worker client: %w", err)
	}
	b, _ := json.Marshal(w.lats) // a slice of ints always marshals
	return say("lat " + string(b))
}

// waitStall waits for done, giving up once no job has started for stall.
func waitStall(ctx context.Context, w *noopWorker, done <-chan struct{}, stall time.Duration) error {
	w.started.Store(time.Now().UnixNano())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case <-tick.C:
			if time.Since(time.Unix(0, w.started.Load())) > stall {
				return fmt.Errorf("no job started for %s", stall)
			}
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
