package tracing

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
)

// Middleware returns handler middleware that runs each attempt in a
// CONSUMER span "process <queue>", linked to the span that enqueued the job
// (read from its metadata; a job enqueued without tracing, or by a span that
// was not sampled, gets no link), or its child with WithParent. The handler's context carries the span. A
// handler error is recorded on the span; a panic is recorded and panics on.
// Install it first (Registry.Use) so the other middleware runs inside the
// span.
func Middleware(opts ...Option) jobq.Middleware {
	c := newConfig(opts)
	tracer := c.tracer()
	ds := newDests("process", semconv.MessagingOperationTypeProcess, trace.SpanKindConsumer, c.early)
	return func(next jobq.HandlerFunc) jobq.HandlerFunc {
		a := &attempts{config: c, tracer: tracer, dests: ds, next: next}
		return a.run
	}
}

// attempts runs a handler's attempts, each in its span when it is traced.
// run, which every attempt passes through, keeps to what an attempt that
// is not traced needs; inSpan, whose frame holds the span start's options,
// link and attributes, is on the stack only of traced attempts. The
// collector shrinks the stacks of job goroutines waiting for work, and a
// large frame under every handler made each attempt grow its stack again
// (runtime.newstack far above its share without tracing, in CPU profiles
// of Redis drain: docs/performance.md, "Why the code is shaped this
// way"). For the same reason runInSpan's deferred call, which
// runs at every return, leaves the panic's recording to endPanicked.
type attempts struct {
	config
	tracer trace.Tracer
	dests  *dests
	next   jobq.HandlerFunc
}

func (a *attempts) run(ctx context.Context, job *jobq.Job) error {
	var sent trace.SpanContext
	if len(job.Metadata) > 0 {
		ctx, sent = a.received(ctx, job.Metadata)
	}
	// WithSampleRatio: a sampled enqueue's attempts are traced; the
	// others follow the enqueuer's context WithParent, else the
	// worker's, else chance. An attempt not traced runs with an
	// unsampled context for its own spans to follow.
	if a.sampling && !sent.IsSampled() {
		if a.parent && sent.IsValid() {
			return a.next(trace.ContextWithRemoteSpanContext(ctx, sent), job)
		}
		if own := trace.SpanContextFromContext(ctx); !a.traced(own) {
			if !own.IsValid() {
				ctx = newUnsampled(ctx)
			}
			return a.next(ctx, job)
		}
	}
	return a.inSpan(ctx, job, sent)
}

// received returns ctx with the baggage the producer stored in md, and the
// producer's span context.
func (a *attempts) received(ctx context.Context, md map[string]string) (context.Context, trace.SpanContext) {
	sent, b := a.extract(md)
	if b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	return ctx, sent
}

// inSpan runs the attempt in its span, sent being the producer's span
// context (invalid for none).
func (a *attempts) inSpan(ctx context.Context, job *jobq.Job, sent trace.SpanContext) error {
	// Attributes go only to a span that records, unless the sampler is to
	// see them (WithSamplingAttributes).
	d := a.dests.get(job.Queue, job.Type)
	start := d.start
	switch {
	case !sent.IsValid():
	case a.parent:
		ctx = trace.ContextWithRemoteSpanContext(ctx, sent)
	case sent.IsSampled():
		// A link to a span that was not sampled leads to nothing an
		// operator can open.
		start = append(start[:len(start):len(start)], trace.WithLinks(trace.Link{SpanContext: sent}))
	}
	ctx, span := a.tracer.Start(ctx, d.name, start...)
	if span.IsRecording() {
		setAttemptAttributes(span, d, job)
	}
	return runInSpan(ctx, span, a.next, job)
}

// setAttemptAttributes gives a recording span its attributes. Apart from
// inSpan, whose frame stays on the stack while the handler runs.
func setAttemptAttributes(span trace.Span, d *dest, job *jobq.Job) {
	span.SetAttributes(append(d.late[:len(d.late):len(d.late)],
		semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
		AttrJobAttempt.Int(job.Attempt),
		AttrJobMaxAttempts.Int(job.MaxAttempts),
	)...)
}

// runInSpan calls next and ends span with its outcome, however it ends.
func runInSpan(ctx context.Context, span trace.Span, next jobq.HandlerFunc, job *jobq.Job) (err error) {
	returned := false
	defer func() {
		if !returned {
			endPanicked(span, recover())
		}
	}()
	err = next(ctx, job)
	returned = true
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// endPanicked ends the span of a handler that did not return: it panicked
// with p, or called runtime.Goexit (p nil). Apart from runInSpan's deferred
// call, which runs at every return, so that its frame stays small.
func endPanicked(span trace.Span, p any) {
	if p == nil { // runtime.Goexit: nothing to recover
		span.SetStatus(codes.Error, "handler exited without returning")
		span.End()
		return
	}
	msg := fmt.Sprintf("panic: %v", p)
	span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
		semconv.ExceptionType(fmt.Sprintf("%T", p)),
		semconv.ExceptionMessage(msg),
		semconv.ExceptionStacktrace(string(debug.Stack())),
	))
	span.SetAttributes(semconv.ErrorTypeKey.String("panic"))
	span.SetStatus(codes.Error, msg)
	span.End()
	// The worker recovers panics outside the middleware, turning them into
	// the attempt's error: this one is recorded, and goes on. Panicking
	// again from within the deferred call keeps the handler's frames on the
	// stack that the worker stores with the error.
	panic(p)
}
