// Package tracing traces jobs with OpenTelemetry from the enqueue to every
// attempt of their handler. It is the only jobq package that imports
// go.opentelemetry.io/otel.
//
// ClientHooks starts a PRODUCER span "send <queue>" for each job a client
// enqueues and stores the span's context in the job's metadata (W3C
// traceparent and tracestate by default) when the span is sampled, or when
// WithParent or baggage makes even an unsampled context matter. Middleware starts a CONSUMER span
// "process <queue>" for each attempt, linked to the producer's span (or its
// child, with WithParent), and runs the handler with that span in its
// context, so the handler's own spans nest under it:
//
//	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
//	defer tp.Shutdown(ctx)
//
//	client, _ := jobq.NewClient(b, jobq.ClientConfig{
//		Hooks: []jobq.ClientHooks{tracing.ClientHooks(tracing.WithTracerProvider(tp))},
//	})
//	reg := jobq.NewRegistry()
//	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp))) // first, so it wraps the other middleware
//
// Both default to the global provider (otel.GetTracerProvider). Spans carry
// the OpenTelemetry messaging attributes (messaging.system "jobq",
// messaging.operation.type and .name, messaging.destination.name the queue,
// messaging.message.id the job ID) and jobq's own: jobq.job.type,
// jobq.job.attempt and jobq.job.max_attempts on attempts, jobq.job.duplicate
// on an enqueue that found the job's unique key taken.
//
// A failed attempt records the handler's error (status Error, an exception
// event and error.type); a panic is recorded the same way (error.type
// "panic") and panics on, for the worker to recover and count as the
// attempt's error as usual.
//
// Link or parent: by default an attempt's span starts from the worker's own
// context (usually a new trace) and links to the producer's span, as the
// messaging conventions advise, since a job may run long after the request
// that enqueued it and several times over. WithParent makes the producer's
// span the parent instead, so the whole life of a job shows as one trace.
//
// Sampling: by default the provider's sampler decides every span, and a
// span it drops still costs the SDK's call (BenchmarkAttemptCold measures
// it in a busy worker). At high job rates WithSampleRatio has jobq decide
// first, as a parent-based ratio sampler would, and call the SDK only for
// the jobs it traces.
package tracing

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of jobq's spans.
const ScopeName = "github.com/jobq/jobq/tracing"

// jobq's own attributes: the messaging conventions have none for a job's
// type or attempts.
const (
	// AttrJobType is the job's type, on send and process spans.
	AttrJobType = attribute.Key("jobq.job.type")
	// AttrJobAttempt is the attempt's number, 1 on the first try.
	AttrJobAttempt = attribute.Key("jobq.job.attempt")
	// AttrJobMaxAttempts is how many attempts the job has in all.
	AttrJobMaxAttempts = attribute.Key("jobq.job.max_attempts")
	// AttrJobDuplicate is set on a send span whose job was not inserted
	// because a live job held its unique key (messaging.message.id is then
	// that job's ID).
	AttrJobDuplicate = attribute.Key("jobq.job.duplicate")
)

// systemAttr names jobq as the messaging system (the conventions' list of
// systems is open: "any other value" is allowed).
var systemAttr = semconv.MessagingSystemKey.String("jobq")

// Option configures ClientHooks and Middleware.
type Option func(*config)

type config struct {
	tp     trace.TracerProvider
	prop   propagation.TextMapPropagator
	parent bool
	early  bool // attributes at the start, for the sampler (WithSamplingAttributes)
	w3c    bool // prop is TraceContext alone: extract reads the metadata directly
	// sampling: jobq decides which spans to start (WithSampleRatio),
	// starting one with no parent with probability ratio.
	sampling bool
	ratio    float64
}

// WithTracerProvider sets the provider spans are created with. Defaults to
// the global one (otel.GetTracerProvider), which is a no-op until the
// program sets one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithPropagator sets how a span's context is written into a job's
// metadata and read back; ClientHooks and Middleware must agree, and the
// propagator must carry the span context. Defaults to W3C TraceContext alone: baggage is
// left out on purpose, because it would store the caller's baggage in every
// job row, and a large baggage would push the metadata over its limits and
// refuse the enqueue. To carry it, pass
//
//	propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
//
// and the handler's context has the enqueuer's baggage.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// WithParent makes the producer's span the parent of each attempt's span,
// instead of only a link to it: all attempts of a job then belong to the
// trace that enqueued it. Give it to ClientHooks as well as to Middleware:
// the producer then stores the context of unsampled spans too, so that an
// attempt follows its enqueuer's sampling decision under a ParentBased
// sampler; without it an attempt of an unsampled enqueue starts a trace of
// its own, which the sampler decides afresh.
func WithParent() Option {
	return func(c *config) { c.parent = true }
}

// WithSamplingAttributes gives a span's attributes (messaging.system,
// messaging.operation.type and .name, messaging.destination.name and
// jobq.job.type) to the sampler, at the span's start, as the messaging
// conventions advise for samplers that decide by attributes. Without it a
// span gets them after its start, and only when it records: the SDK's own
// samplers (always, never, ratio, parent-based) read no attribute, and
// the start's copy of them was most of what an unsampled span allocates
// (docs/performance.md, "Why the code is shaped this way"), which the
// garbage collector pays for on every job. Use it when your sampler reads
// attributes.
func WithSamplingAttributes() Option {
	return func(c *config) { c.early = true }
}

func newConfig(opts []Option) config {
	c := config{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = propagation.TraceContext{}
	}
	_, c.w3c = c.prop.(propagation.TraceContext)
	return c
}

func (c config) tracer() trace.Tracer {
	return c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
}
