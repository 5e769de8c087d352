package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/metrics"
)

// metricsGrace is how long scrapes in progress may finish when a metrics
// server stops.
const metricsGrace = 5 * time.Second

func (a *app) newMetricsCmd() *cobra.Command {
	var (
		addr   string
		queues []string
		cache  time.Duration
		logs   logFlags
	)
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Serve the queue depths of --db to Prometheus, without running jobs (a sidecar)",
		Long: `Serve the queue depths of --db to Prometheus on --addr until SIGTERM or
Ctrl-C: jobq_queue_jobs{queue,state} (pending, scheduled, reserved, failed)
and jobq_queue_oldest_due_timestamp_seconds{queue} on /metrics (and, on
backends with workflows, jobq_workflows{state} and
jobq_workflow_tasks_waiting), with
/healthz (200 while the process runs) and /readyz (200 while --db answers).
It runs no jobs, so one such process can watch queues whose workers export
only their own counters ('jobq worker --metrics-addr … --metrics-depth=false'),
or serve a system whose workers export nothing. One read of the depths
serves every scrape within --cache. The queues named by --queues are
exported at zero when they hold no job. It never creates a store.`,
		Example: "  jobq metrics --db postgres://jobq@db:5432/app --addr 0.0.0.0:9090",
		Args:    exactArgs(0, "no arguments"),
		PreRunE: a.requireDurable,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, q := range queues {
				if err := backend.ValidateQueue(q); err != nil {
					return usagef("--queues: %v", err)
				}
			}
			if err := positive(cmd, "cache", cache); err != nil {
				return err
			}
			log, err := a.logger(cmd, logs)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withBackend(ctx, existingOnly, func(b backend.Backend) error {
				met, err := metrics.New(metrics.Options{StatsCache: cache, Logger: log})
				if err != nil {
					return err
				}
				if err := met.ObserveQueues(jobq.NewInspector(b), queues...); err != nil {
					return err
				}
				served, err := a.serveMetrics(ctx, addr, met, b, log)
				if err != nil {
					return err
				}
				<-served
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:9090", "address to serve /metrics, /healthz and /readyz on")
	fl.StringSliceVar(&queues, "queues", nil, "queues to export at zero when empty, comma-separated (all queues holding jobs are exported)")
	fl.DurationVar(&cache, "cache", 5*time.Second, "how long one read of the queue depths serves scrapes")
	logs.add(cmd)
	return cmd
}

// serveMetrics listens on addr and serves met (with readiness asking b)
// until ctx ends; served is closed once the server has stopped. A failure
// to listen is returned; one while serving is logged, and whatever the
// server was watching goes on without it.
func (a *app) serveMetrics(ctx context.Context, addr string, met *metrics.Metrics, b backend.Backend, log *slog.Logger) (served <-chan struct{}, err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: %w", err)
	}
	log.Info("serving metrics", "url", "http://"+l.Addr().String()+"/metrics")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := metrics.Serve(ctx, l, metrics.NewServeMux(met, metrics.BackendReady(b)), metricsGrace); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return done, nil
}
