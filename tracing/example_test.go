package tracing_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/tracing"
)

// Trace a job from its enqueue to its handler: the client's hooks start the
// send span and store its context in the job; the middleware starts the
// attempt's span, linked to it.
func Example() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()                     // a program exports with OTLP, say
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) // and batches: sdktrace.WithBatcher
	defer tp.Shutdown(ctx)

	b := memory.New(memory.Options{})
	defer b.Close()
	reg := jobq.NewRegistry()
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))
	reg.HandleFunc("email.welcome", func(ctx context.Context, j *jobq.Job) error {
		return nil // spans started from ctx nest under the attempt's
	})
	client, err := jobq.NewClient(b, jobq.ClientConfig{
		Hooks: []jobq.ClientHooks{tracing.ClientHooks(tracing.WithTracerProvider(tp))},
	})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "email.welcome", nil); err != nil {
		panic(err)
	}

	finished := make(chan jobq.Event, 1)
	worker, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks:  []jobq.WorkerHooks{{Finished: func(e jobq.Event) { finished <- e }}},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- worker.Run(runCtx) }()
	<-finished
	stop()
	<-ran

	spans := exp.GetSpans()
	for _, s := range spans {
		fmt.Println(s.Name, s.SpanKind, "links:", len(s.Links))
	}
	send, process := spans[0].SpanContext, spans[1].Links[0].SpanContext
	fmt.Println("linked to the send span:", process.SpanID() == send.SpanID())
	// Output:
	// send default producer links: 0
	// process default consumer links: 1
	// linked to the send span: true
}
