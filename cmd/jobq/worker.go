package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/netguard"
	"github.com/jobq/jobq/metrics"
)

type workerFlags struct {
	queues          []string
	concurrency     int
	shutdownTimeout time.Duration
	lease           time.Duration
	poll            time.Duration
	retryBase       time.Duration
	retryMax        time.Duration
	log             logFlags
	metricsAddr     string
	metricsDepth    bool
	metricsCache    time.Duration
	retention       retentionFlags   // jobs.go
	http            httpFlags        // httpjob.go
	guard           *netguard.Policy // from http, set by config
}

func (a *app) newWorkerCmd() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker for the built-in http job type until SIGTERM or Ctrl-C",
		Long: `Run a worker that claims jobs from the given queues and runs the built-in
"http" job type (see 'jobq enqueue --help'). On SIGTERM or Ctrl-C it stops
claiming, lets running jobs finish for up to --shutdown-timeout, cancels the
rest and gives them back to pending at once, and exits 0 (a job's first three
give-backs do not count as attempts; later ones do, so a job that always
outlives the grace period ends in failed jobs). A second SIGTERM or Ctrl-C exits at once
(code 143 or 130) without waiting: jobs still running stay reserved until
their --lease expires, then another worker runs them again. It creates and
migrates the --db store if needed, and logs it with any password shown as
***. Your own job types run in your own Go program with the jobq library:
a job of another type on these queues is never run nor failed here, but
given back untouched (no attempt counted) for a worker that has its handler,
with a warning naming the type (an error once such a job is 10 minutes old).

http jobs never connect to loopback, private, link-local, carrier-grade NAT,
multicast or cloud metadata addresses (checked on the address dialled, after
DNS, for every redirect too) unless --http-allow opens them, e.g.
--http-allow 10.0.0.0/8,internal.example:8443; such a job fails at once,
without retries. HTTP_PROXY and HTTPS_PROXY are not used.

With --metrics-addr it serves Prometheus metrics on /metrics (counters and
histograms of this worker's jobs and, with --metrics-depth, the default,
the queue depths of --db, read at most once per --metrics-cache), /healthz
(200 while the process runs) and /readyz (200 while --db answers), until
the worker has stopped. Every job's outcome is logged: done at debug,
retries at warn, jobs moved to failed jobs at error; payloads never.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd)
			if err != nil {
				return err
			}
			log, err := a.logger(cmd, f.log)
			if err != nil {
				return err
			}
			cfg.Logger = log
			return a.runWorker(cmd, cfg, f)
		},
	}
	f.add(cmd)
	return cmd
}

// add registers the worker's flags on cmd ('jobq worker', and 'jobq
// serve' for its --worker), the log and retention flags with them.
func (f *workerFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.queues, "queues", []string{jobq.DefaultQueue}, "queues to work, comma-separated")
	fl.IntVar(&f.concurrency, "concurrency", jobq.DefaultConcurrency, fmt.Sprintf("jobs run at once (1..%d)", jobq.MaxConcurrency))
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", jobq.DefaultShutdownTimeout, "how long running jobs may finish after SIGTERM")
	fl.DurationVar(&f.lease, "lease", jobq.DefaultLease, "how long a claimed job is held without a heartbeat before others may rescue it")
	fl.DurationVar(&f.poll, "poll", jobq.DefaultPollInterval, "how often an idle worker looks for due jobs")
	fl.DurationVar(&f.retryBase, "retry-base", jobq.DefaultRetryBase, "delay after the first failed attempt, doubling each time")
	fl.DurationVar(&f.retryMax, "retry-max", jobq.DefaultRetryMax, "longest delay between attempts")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9090")
	fl.BoolVar(&f.metricsDepth, "metrics-depth", true, "export the queue depths too (turn off when a 'jobq metrics' sidecar does)")
	fl.DurationVar(&f.metricsCache, "metrics-cache", 5*time.Second, "how long one read of the queue depths serves scrapes")
	f.log.add(cmd)
	f.retention.add(cmd)
	f.http.add(cmd)
}

// config checks the flags and turns them into a WorkerConfig, so a bad
// value is reported by its flag name rather than its config field, before
// anything opens. It also sets f.guard, the http jobs' address policy,
// which no WorkerConfig field holds.
func (f *workerFlags) config(cmd *cobra.Command) (jobq.WorkerConfig, error) {
	guard, err := f.http.policy()
	if err != nil {
		return jobq.WorkerConfig{}, err
	}
	f.guard = guard
	for _, q := range f.queues {
		if err := backend.ValidateQueue(q); err != nil {
			return jobq.WorkerConfig{}, usagef("--queues: %v", err)
		}
	}
	if f.concurrency < 1 || f.concurrency > jobq.MaxConcurrency {
		return jobq.WorkerConfig{}, usagef("--concurrency %d: use 1 to %d", f.concurrency, jobq.MaxConcurrency)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"shutdown-timeout", f.shutdownTimeout}, {"lease", f.lease}, {"poll", f.poll},
		{"retry-base", f.retryBase}, {"retry-max", f.retryMax}, {"metrics-cache", f.metricsCache},
	} {
		if err := positive(cmd, d.name, d.v); err != nil {
			return jobq.WorkerConfig{}, err
		}
	}
	for _, name := range []string{"metrics-depth", "metrics-cache"} {
		if cmd.Flags().Changed(name) && f.metricsAddr == "" {
			return jobq.WorkerConfig{}, usagef("--%s only applies with --metrics-addr", name)
		}
	}
	if f.retryMax < f.retryBase {
		return jobq.WorkerConfig{}, usagef("--retry-max %s is shorter than --retry-base %s", f.retryMax, f.retryBase)
	}
	ret, err := f.retention.retention(cmd)
	if err != nil {
		return jobq.WorkerConfig{}, err
	}
	return jobq.WorkerConfig{
		Queues: f.queues, Concurrency: f.concurrency, ShutdownTimeout: f.shutdownTimeout,
		Lease: f.lease, PollInterval: f.poll,
		Retry:     jobq.RetryPolicy{Base: f.retryBase, Max: f.retryMax},
		Retention: ret,
	}, nil
}

// runWorker runs until the command's context is cancelled (main maps
// SIGTERM and SIGINT to that), then returns after the graceful shutdown.
func (a *app) runWorker(cmd *cobra.Command, cfg jobq.WorkerConfig, f workerFlags) error {
	ctx := cmd.Context()
	return a.withBackend(ctx, mayCreate, func(b backend.Backend) error {
		return a.workOn(ctx, b, cfg, f)
	})
}

// workOn runs the worker of cfg and f (after f.config) on b until ctx is
// cancelled, then returns after the graceful shutdown: what 'jobq worker'
// and 'jobq serve --worker' share.
func (a *app) workOn(ctx context.Context, b backend.Backend, cfg jobq.WorkerConfig, f workerFlags) error {
	// A client of its own, so its idle connections close with the worker.
	client, closeIdle := newHTTPClient(f.guard)
	defer closeIdle()
	reg := jobq.NewRegistry()
	registerHTTP(reg, client)

	var met *metrics.Metrics
	if f.metricsAddr != "" {
		var err error
		if met, err = metrics.New(metrics.Options{StatsCache: f.metricsCache, Logger: cfg.Logger}); err != nil {
			return err
		}
		cfg.Hooks = append(cfg.Hooks, met.WorkerHooks())
	}
	w, err := jobq.NewWorker(b, reg, cfg)
	if err != nil {
		return err
	}
	if met != nil {
		met.AddWorker(w, reg)
		if f.metricsDepth {
			if err := met.ObserveQueues(jobq.NewInspector(b)); err != nil {
				return err
			}
		}
		// The server outlives the signal: it answers while the worker
		// drains and stops once Run has returned.
		srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
		served, err := a.serveMetrics(srvCtx, f.metricsAddr, met, b, cfg.Logger)
		if err != nil {
			stopServer()
			return err
		}
		defer func() {
			stopServer()
			<-served
		}()
	}
	cfg.Logger.Info("jobq worker", "db", backend.RedactURL(a.db), "types", reg.Types(), "http_allow", f.guard.Entries())
	// The worker hears of the signal only once its line is written, so
	// the line comes before the worker's own "stopped".
	runCtx, stopRun := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRun(nil)
	logged := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(logged)
		cfg.Logger.Info("shutting down: running jobs may finish; send SIGTERM or Ctrl-C again to exit at once", "shutdown_timeout", cfg.ShutdownTimeout)
		stopRun(context.Cause(ctx))
	})
	defer func() {
		if !stop() {
			<-logged // no line written after the command returns
		}
	}()
	return w.Run(runCtx)
}
