package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/bench"
)

// benchFlags are the bench command's knobs; zero-value meanings live in
// bench.Config.
type benchFlags struct {
	workload   string
	cfg        bench.Config
	cpuProfile string
	memProfile string
	observe    string
	sample     float64
	sampler    string
	// workerProcess runs the worker side in a 'jobq bench-worker' process.
	workerProcess bool
}

func (a *app) newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure enqueue, drain, latency and steady throughput on --db",
		Long: `Run the standard workloads against the backend named by --db and print one
JSON line per workload, so figures can be compared run to run:

  enqueue-single  N jobs, one Enqueue (one transaction) at a time: jobs/s
  enqueue-batch   N jobs through EnqueueMany in batches of --batch: jobs/s
  drain           N no-op jobs already queued, one worker with --workers slots:
                  jobs/s until all are done
  latency         jobs enqueued at --rate per second into an idle worker (in
                  the same process unless --worker-process), min(N, rate x
                  duration) of them: enqueue-to-start p50/p90/p99/max in ms
  steady          --producers goroutines enqueuing and one worker running
                  together for --duration: completed jobs/s
  fairness        (not in all) --hot jobs queued on one key, then 10 jobs on
                  each of 100 small keys; from one worker's start, when the
                  small keys' jobs start: p50/p90/p99/max in ms (--hot 0 is
                  the baseline)

--keys K spreads drain's jobs over K keys, and --key-limit N lets at most N
jobs of a key run at once: what keys cost a drain.

--unique gives every job of enqueue-batch a unique key, and --duplicates F
makes that share of each batch repeat keys of the previous batch's jobs,
still waiting, which the store answers as duplicates: what uniqueness costs
an insert. Its line gives the jobs sent and those inserted.

--worker-process runs the worker in a second jobq process (this binary, as
the hidden 'jobq bench-worker') on the same --db, as deployments do:
producers here, the worker there, the jobs reaching it through the store
(its notifications; on SQLite the worker's watcher of the file's commits,
with ?wake_interval=off its next poll, which latency and steady then
show). This process enqueues and keeps the clock; drain's
clock starts once the worker process has opened the store and stops when
it reports the last job's outcome written. CPU, allocations and GCs are
both processes' added up. memory: and sync: cannot be shared by two
processes and are refused; so is --observe.

Each workload runs on a fresh queue (bench-<workload>-<nanos>) and leaves it
empty. Without --db (and JOBQ_DB) the runs go to a temporary SQLite file that
is removed afterwards. On Redis a queue keeps one of its key prefix's 4,095
queue indexes for good, so give bench a prefix of its own
(redis://host:6379/0?key_prefix=jobq-bench), not your application's. A progress
bar is drawn on stderr when it is a terminal.

--observe measures what observability costs: it runs the workloads with
Prometheus metrics (every hook, the queue depths, a scrape every second)
and OpenTelemetry tracing (a span per enqueue and per attempt, sampled at
--observe-sample, 1 = all, batched to an exporter that drops them) turned
on; --observe-sampler says who samples: the SDK's parent-based ratio
sampler (sdk), or jobq before it calls the SDK (jobq, as
tracing.WithSampleRatio). Drain flushes the spans of its untimed enqueues
before it starts the clock: a worker process would not hold them. Compare
runs with and without it, interleaved; each result names what was on
("observe"). One alone: --observe=metrics or --observe=tracing.`,
		Example: "  jobq bench --db sqlite:/tmp/b.db\n  jobq bench --workload drain -n 100000 --workers 200",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := f.check()
			if err != nil {
				return err
			}
			return a.runBench(cmd, f, names)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workload, "workload", "all", "all, or one of "+strings.Join(bench.All, ", ")+", "+bench.Fairness)
	fl.IntVarP(&f.cfg.N, "jobs", "n", 50000, "jobs per enqueue and drain workload; the most latency enqueues")
	fl.IntVar(&f.cfg.Batch, "batch", 1000, "enqueue-batch batch size (also used to queue drain's jobs)")
	fl.IntVar(&f.cfg.Workers, "workers", 100, "worker concurrency for drain, latency and steady")
	fl.IntVar(&f.cfg.Rate, "rate", 200, "latency: jobs enqueued per second")
	fl.DurationVar(&f.cfg.Duration, "duration", 10*time.Second, "how long steady runs (and latency at most)")
	fl.IntVar(&f.cfg.Producers, "producers", 8, "steady: goroutines enqueuing one job per transaction")
	fl.StringVar(&f.observe, "observe", "", "turn on metrics and tracing (or one: --observe=metrics), to measure what they cost")
	fl.Lookup("observe").NoOptDefVal = "metrics,tracing"
	fl.Float64Var(&f.sample, "observe-sample", 1, "with --observe tracing: the fraction of traces sampled (0..1; a parent-based ratio sampler)")
	fl.StringVar(&f.sampler, "observe-sampler", "sdk", "with --observe tracing: who samples, sdk (the provider's sampler) or jobq (tracing.WithSampleRatio)")
	fl.IntVar(&f.cfg.Keys, "keys", 0, "drain: spread the jobs over this many keys")
	fl.IntVar(&f.cfg.KeyLimit, "key-limit", 0, "drain with --keys: at most this many jobs of a key running at once")
	fl.IntVar(&f.cfg.Hot, "hot", 100000, "fairness: jobs queued on one key before the 100 small keys' 10 each (0: the baseline)")
	fl.BoolVar(&f.cfg.Unique, "unique", false, "enqueue-batch: give every job a unique key, to measure what enforcing uniqueness costs")
	fl.Float64Var(&f.cfg.Duplicates, "duplicates", 0, "enqueue-batch with --unique: this share of each batch (0 to 0.9) repeats keys of the previous batch's waiting jobs")
	fl.DurationVar(&f.cfg.KeepCompleted, "keep-completed", 0, "workers keep completed jobs this long (retention), to measure what keeping them costs")
	fl.BoolVar(&f.workerProcess, "worker-process", false, "run the workers in a separate jobq process, as deployed: its jobs reach it through the store")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&f.memProfile, "memprofile", "", "write a profile of the whole run's allocations to this file")
	_ = fl.MarkHidden("memprofile")
	return cmd
}

// check refuses out-of-range flags and returns the workloads to run.
func (f *benchFlags) check() ([]string, error) {
	for _, v := range []struct {
		name string
		v    int
	}{{"jobs", f.cfg.N}, {"batch", f.cfg.Batch}, {"workers", f.cfg.Workers}, {"rate", f.cfg.Rate}, {"producers", f.cfg.Producers}} {
		if v.v <= 0 {
			return nil, usagef("--%s %d must be greater than zero", v.name, v.v)
		}
	}
	if f.cfg.Workers > jobq.MaxConcurrency {
		return nil, usagef("--workers %d is over the worker's limit of %d", f.cfg.Workers, jobq.MaxConcurrency)
	}
	if f.cfg.Keys < 0 || f.cfg.KeyLimit < 0 || f.cfg.Hot < 0 {
		return nil, usagef("--keys, --key-limit and --hot must not be negative")
	}
	if f.cfg.KeyLimit > 0 && f.cfg.Keys == 0 {
		return nil, usagef("--key-limit %d needs --keys: the jobs have no key to limit", f.cfg.KeyLimit)
	}
	if f.cfg.KeyLimit > backend.MaxKeyLimit {
		return nil, usagef("--key-limit %d: use 1..%d", f.cfg.KeyLimit, backend.MaxKeyLimit)
	}
	if f.cfg.Duplicates < 0 || f.cfg.Duplicates > 0.9 || math.IsNaN(f.cfg.Duplicates) {
		return nil, usagef("--duplicates %v: use a share from 0 to 0.9", f.cfg.Duplicates)
	}
	if f.cfg.Duplicates > 0 && !f.cfg.Unique {
		return nil, usagef("--duplicates needs --unique: only jobs with a unique key can be duplicates")
	}
	if f.cfg.KeepCompleted < 0 {
		return nil, usagef("--keep-completed %s is negative", f.cfg.KeepCompleted)
	}
	if f.cfg.Duration <= 0 {
		return nil, usagef("--duration %s must be greater than zero", f.cfg.Duration)
	}
	if f.sample < 0 || f.sample > 1 || math.IsNaN(f.sample) {
		return nil, usagef("--observe-sample %v: use a fraction from 0 to 1", f.sample)
	}
	if f.sampler != "sdk" && f.sampler != "jobq" {
		return nil, usagef("--observe-sampler %q: use sdk or jobq", f.sampler)
	}
	if f.workerProcess && f.observe != "" {
		return nil, usagef("--observe measures hooks in this process: not with --worker-process")
	}
	for _, o := range strings.Split(f.observe, ",") {
		if o != "" && o != "metrics" && o != "tracing" {
			return nil, usagef("--observe %q: use metrics, tracing or both (metrics,tracing)", f.observe)
		}
	}
	if f.workload == "all" {
		return bench.All, nil
	}
	for _, w := range append(slices.Clip(bench.All), bench.Fairness) {
		if f.workload == w {
			return []string{w}, nil
		}
	}
	return nil, usagef("unknown --workload %q; use all or one of %s, %s", f.workload, strings.Join(bench.All, ", "), bench.Fairness)
}

func (a *app) runBench(cmd *cobra.Command, f benchFlags, names []string) (err error) {
	ctx := cmd.Context()
	url, cleanup, err := a.benchURL(cmd)
	if err != nil {
		return err
	}
	defer cleanup()
	if s := schemeOf(url); f.workerProcess && (s == "memory" || s == "sync") {
		return usagef("--worker-process: --db %s: keeps jobs inside one process, so a worker process cannot share them; use sqlite:PATH, postgres://… or redis://…", s)
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.memProfile != "" {
		defer func() {
			if werr := writeAllocProfile(f.memProfile); err == nil {
				err = werr
			}
		}()
	}
	b, err := backend.Open(ctx, url)
	if err != nil {
		return err // it names the store and the step
	}
	defer b.Close()

	cfg := f.cfg
	cfg.Backend = b
	cfg.BackendName = schemeOf(url)
	cfg.Log = slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if isTerminal(a.errOut) {
		cfg.Progress = a.errOut
	}
	if f.workerProcess {
		if cfg.WorkerProcess, err = benchWorkerProcess(url, cfg); err != nil {
			return err
		}
		cfg.WorkerStderr = a.errOut
	}
	if f.observe != "" {
		var stop func() error
		if stop, err = observe(ctx, &cfg, f.observe, f.sample, f.sampler == "jobq", b, cfg.Log); err != nil {
			return err
		}
		defer func() {
			if serr := stop(); err == nil {
				err = serr
			}
		}()
	}
	return bench.Run(ctx, cfg, names, func(r bench.Result) error {
		_, err := fmt.Fprintln(a.out, r.JSON())
		return err
	})
}

// benchWorkerProcess returns how bench --worker-process starts its worker
// process: this executable again as 'jobq bench-worker', with the store's
// URL in JOBQ_DB (not in its arguments, where ps would show a password).
func benchWorkerProcess(url string, cfg bench.Config) (func(queue, workload string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--worker-process: find this executable: %w", err)
	}
	return func(queue, workload string) *exec.Cmd {
		cmd := exec.Command(exe, "bench-worker", "--queue", queue, "--workload", workload,
			"--workers", strconv.Itoa(cfg.Workers), "--keep-completed", cfg.KeepCompleted.String())
		cmd.Env = append(os.Environ(), "JOBQ_DB="+url)
		return cmd
	}, nil
}

// newBenchWorkerCmd is the hidden worker side of 'jobq bench
// --worker-process' (bench.ServeWorker): it speaks the bench's protocol on
// its standard input and output, and stops on SIGTERM or when its input
// ends.
func (a *app) newBenchWorkerCmd() *cobra.Command {
	var (
		queue, workload string
		cfg             bench.Config
	)
	cmd := &cobra.Command{
		Use:    "bench-worker",
		Short:  "The worker process of 'jobq bench --worker-process' (not for direct use)",
		Args:   exactArgs(0, "no arguments"),
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := backend.Open(ctx, a.db)
			if err != nil {
				return err
			}
			defer b.Close()
			cfg.Backend, cfg.BackendName = b, schemeOf(a.db)
			cfg.Log = slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
			return bench.ServeWorker(ctx, cfg, queue, workload, cmd.InOrStdin(), a.out)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&queue, "queue", "", "the workload's queue")
	fl.StringVar(&workload, "workload", "", "the workload")
	fl.IntVar(&cfg.Workers, "workers", 100, "worker concurrency")
	fl.DurationVar(&cfg.KeepCompleted, "keep-completed", 0, "keep completed jobs this long")
	return cmd
}

// benchURL is --db, except that with neither --db nor JOBQ_DB the bench
// gets a temporary SQLite file rather than filling ./jobq.db with its jobs.
func (a *app) benchURL(cmd *cobra.Command) (url string, cleanup func(), err error) {
	if cmd.Flags().Changed("db") || os.Getenv("JOBQ_DB") != "" {
		return a.db, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "jobq-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("create temporary directory: %w", err)
	}
	fmt.Fprintf(a.errOut, "jobq bench: no --db given, using a temporary SQLite file in %s\n", dir)
	return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
}

// startCPUProfile profiles until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("start cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}, nil
}

// writeAllocProfile writes the allocations sampled since the process
// started (pprof's "allocs" profile) to path.
func writeAllocProfile(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(out, 0); err != nil {
		out.Close()
		return fmt.Errorf("write memory profile: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write memory profile: %w", err)
	}
	return nil
}

// schemeOf names the backend of url for the results: "sqlite", "memory",
// "postgres".
func schemeOf(url string) string {
	s, _, _ := strings.Cut(url, ":")
	s = strings.ToLower(s)
	if s == "postgresql" {
		return "postgres"
	}
	return s
}
