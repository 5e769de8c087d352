package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/tracing"
)

// discard is an exporter that drops what it is given, so a benchmark
// measures the spans' making and batching, not an export.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkPerJob is what tracing adds to one job of one attempt: the send
// span (BeforeEnqueue, AfterEnqueue) and the attempt's span (Middleware
// around a handler that does nothing), with a real SDK provider whose
// batcher blocks rather than drops, exporting to nowhere. "sampled-out"
// samples no trace; "noop" is the default global provider of a program that
// sets none.
func BenchmarkPerJob(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: the noop provider
	}{
		{"sampled", sdktrace.AlwaysSample()},
		{"sampled-out", sdktrace.NeverSample()},
		{"noop", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var tp trace.TracerProvider = noop.NewTracerProvider()
			if bc.sampler != nil {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler),
					sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
				defer sdk.Shutdown(context.Background())
				tp = sdk
			}
			hooks := tracing.ClientHooks(tracing.WithTracerProvider(tp))
			handler := tracing.Middleware(tracing.WithTracerProvider(tp))(func(context.Context, *jobq.Job) error { return nil })
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				// The client makes the metadata map only because a hook
				// is installed: its cost is tracing's.
				info := jobq.EnqueueInfo{Type: "email", Queue: "default", Metadata: map[string]string{}}
				if err := hooks.BeforeEnqueue(ctx, &info); err != nil {
					b.Fatal(err)
				}
				hooks.AfterEnqueue(ctx, info, jobq.EnqueueResult{ID: int64(i)}, nil)
				job := &jobq.Job{ID: int64(i), Queue: "default", Type: "email", Attempt: 1, MaxAttempts: 3, Metadata: info.Metadata}
				if err := handler(ctx, job); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time counts the batcher's goroutine and the
			// garbage collector too, and says more than wall time on a
			// shared machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkAttemptCold is one attempt's span as a busy worker pays for
// it: the middleware around a handler that does nothing, 1 % of traces
// sampled by the SDK's sampler or by jobq (WithSampleRatio), with
// a sweep over 4 MiB (twice the L2 cache here) before each attempt, which
// stands for the backend's work and the hundred other jobs that run
// between two attempts of one goroutine and leave tracing's data cold.
// Only the attempt is timed (ns/attempt).
func BenchmarkAttemptCold(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
		opts    []tracing.Option
	}{
		// The SDK's sampler decides each attempt.
		{"sdk-1pct", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)), nil},
		// jobq decides, and calls the SDK for the 1 % it traces.
		{"jobq-1pct", sdktrace.ParentBased(sdktrace.AlwaysSample()), []tracing.Option{tracing.WithSampleRatio(0.01)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler),
				sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
			defer sdk.Shutdown(context.Background())
			opts := append([]tracing.Option{tracing.WithTracerProvider(sdk)}, bc.opts...)
			handler := tracing.Middleware(opts...)(func(context.Context, *jobq.Job) error { return nil })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			jobs := make([]*jobq.Job, 100)
			for i := range jobs {
				jobs[i] = &jobq.Job{ID: int64(i), Queue: "default", Type: "email", Attempt: 1, MaxAttempts: 3}
			}
			sweep := make([]byte, 4<<20)
			var took time.Duration
			for i := 0; b.Loop(); i++ {
				for k := 0; k < len(sweep); k += 64 {
					sweep[k]++
				}
				start := time.Now()
				if err := handler(ctx, jobs[i%len(jobs)]); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "ns/attempt")
		})
	}
}

// BenchmarkSDKFloor is the least two SDK spans cost, whatever jobq does
// around them: Start and End of a send and a process span, batched to an
// exporter that drops them; "bare" with no attribute or link, "attributes"
// with what jobq's spans carry (five attributes at the start of each,
// message ID, attempts and a link; made once, as jobq does) but no
// propagation. BenchmarkPerJob/sampled minus "attributes" is jobq's own
// share.
func BenchmarkSDKFloor(b *testing.B) {
	for _, attrs := range []bool{false, true} {
		name := "bare"
		if attrs {
			name = "attributes"
		}
		b.Run(name, func(b *testing.B) {
			sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
			defer sdk.Shutdown(context.Background())
			tr := sdk.Tracer("floor")
			start := func(op string) []trace.SpanStartOption {
				if !attrs {
					return nil
				}
				return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
					attribute.String("messaging.system", "jobq"), attribute.String("messaging.operation.type", op),
					attribute.String("messaging.operation.name", op), attribute.String("messaging.destination.name", "default"),
					attribute.String("jobq.job.type", "email"))}
			}
			send, process := start("send"), start("process")
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				_, s := tr.Start(ctx, "send default", send...)
				if attrs {
					s.SetAttributes(attribute.String("messaging.message.id", strconv.Itoa(i)))
				}
				s.End()
				opts := process
				if attrs {
					opts = append(process[:len(process):len(process)], trace.WithLinks(trace.Link{SpanContext: s.SpanContext()}))
				}
				_, s = tr.Start(ctx, "process default", opts...)
				if attrs {
					s.SetAttributes(attribute.String("messaging.message.id", strconv.Itoa(i)),
						attribute.Int("jobq.job.attempt", 1), attribute.Int("jobq.job.max_attempts", 3))
				}
				s.End()
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSQLiteJob is the whole life of a no-op job on SQLite, enqueued
// in batches of 500 and run by a worker with 10 slots: without tracing;
// untraced but carrying a traceparent ("metadata", the larger row's share);
// traced with 1% of traces sampled; and with every job traced (batched,
// exported to nowhere).
func BenchmarkSQLiteJob(b *testing.B) {
	const jobs, batch = 2000, 500
	for _, bc := range []struct {
		name     string
		sampler  sdktrace.Sampler // nil: no tracing
		metadata bool
	}{
		{"off", nil, false},
		{"metadata", nil, true},
		{"sampled-1pct", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)), false},
		{"sampled", sdktrace.AlwaysSample(), false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "jobq.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			reg := jobq.NewRegistry()
			reg.HandleFunc("noop", func(context.Context, *jobq.Job) error { return nil })
			var cfg jobq.ClientConfig
			if bc.sampler != nil {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler),
					sdktrace.WithBatcher(discard{}, sdktrace.WithBlocking()))
				defer sdk.Shutdown(ctx)
				reg.Use(tracing.Middleware(tracing.WithTracerProvider(sdk)))
				cfg.Hooks = []jobq.ClientHooks{tracing.ClientHooks(tracing.WithTracerProvider(sdk))}
			}
			client, err := jobq.NewClient(st, cfg)
			if err != nil {
				b.Fatal(err)
			}
			specs := make([]jobq.JobSpec, batch)
			for i := range specs {
				specs[i].Type = "noop"
				if bc.metadata {
					specs[i].Options = []jobq.EnqueueOption{jobq.Metadata(map[string]string{
						"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					})}
				}
			}
			// A round's jobs all succeed, so the count of finished attempts
			// reaches a multiple of jobs exactly when the round is done.
			var finished atomic.Int64
			drained := make(chan struct{}, 1)
			w, err := jobq.NewWorker(st, reg, jobq.WorkerConfig{
				Concurrency: 10, PollInterval: time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Hooks: []jobq.WorkerHooks{{Finished: func(jobq.Event) {
					if finished.Add(1)%jobs == 0 {
						drained <- struct{}{}
					}
				}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- w.Run(runCtx) }()
			defer func() {
				stop()
				if err := <-ran; err != nil {
					b.Error(err)
				}
			}()
			rounds, cpu0 := 0, cpuTime()
			for b.Loop() {
				for range jobs / batch {
					if _, err := client.EnqueueMany(ctx, specs); err != nil {
						b.Fatal(err)
					}
				}
				<-drained
				rounds++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*jobs), "ns/job")
			// CPU time says more than wall time on a shared machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(rounds*jobs), "cpu-ns/job")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
