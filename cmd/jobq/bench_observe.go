package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/bench"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/tracing"
)

// observeScrape is how often 'jobq bench --observe' scrapes its metrics:
// more often than Prometheus usually does (15s), so the cost measured is
// an upper bound.
const observeScrape = time.Second

// observe turns on what an instrumented production process runs, so that
// 'jobq bench --observe' measures its cost: with "metrics" in what, the
// Prometheus metrics (every hook, the depth gauges, a scrape every
// observeScrape, its output dropped); with "tracing", OpenTelemetry
// tracing (a producer span per enqueue, a consumer span per attempt, the
// fraction sample of traces sampled, parent-based, by the SDK's sampler or,
// with jobqSamples, by jobq before it calls the SDK, and batched to an
// exporter that drops them). stop ends the scrapes and flushes the tracer.
func observe(ctx context.Context, cfg *bench.Config, what string, sample float64, jobqSamples bool, b backend.Backend, log *slog.Logger) (stop func() error, err error) {
	cfg.Observed = what
	if strings.Contains(what, "tracing") {
		switch {
		case jobqSamples:
			cfg.Observed += fmt.Sprintf(" (sampled %g by jobq)", sample)
		case sample < 1:
			cfg.Observed += fmt.Sprintf(" (sampled %g)", sample)
		}
	}
	var (
		met *metrics.Metrics
		tp  *sdktrace.TracerProvider
	)
	if strings.Contains(what, "metrics") {
		if met, err = metrics.New(metrics.Options{Logger: log}); err != nil {
			return nil, err
		}
		if err := met.ObserveQueues(jobq.NewInspector(b)); err != nil {
			return nil, err
		}
		cfg.WorkerHooks = append(cfg.WorkerHooks, met.WorkerHooks())
		cfg.ClientHooks = append(cfg.ClientHooks, met.ClientHooks())
	}
	if strings.Contains(what, "tracing") {
		opts := []tracing.Option{}
		sampler := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sample))
		if jobqSamples {
			opts = append(opts, tracing.WithSampleRatio(sample))
			sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
		}
		tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}), sdktrace.WithSampler(sampler))
		opts = append(opts, tracing.WithTracerProvider(tp))
		cfg.ClientHooks = append(cfg.ClientHooks, tracing.ClientHooks(opts...))
		cfg.Middleware = append(cfg.Middleware, tracing.Middleware(opts...))
		cfg.Settle = tp.ForceFlush
	}

	sctx, cancel := context.WithCancel(ctx)
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		if met != nil {
			scrape(sctx, met.Handler())
		}
	}()
	return func() error {
		cancel()
		<-scraped
		if tp == nil {
			return nil
		}
		sctx, done := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer done()
		if err := tp.Shutdown(sctx); err != nil {
			return fmt.Errorf("stop tracer: %w", err)
		}
		return nil
	}, nil
}

// scrape reads h every observeScrape until ctx ends, dropping the page.
func scrape(ctx context.Context, h http.Handler) {
	t := time.NewTicker(observeScrape)
	defer t.Stop()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.ServeHTTP(discardResponse{http.Header{}}, req)
		}
	}
}

// discardSpans is a span exporter that drops every span.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// discardResponse is a response whose body is dropped.
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d discardResponse) WriteHeader(int)             {}
