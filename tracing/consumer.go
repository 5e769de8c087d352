package tracing

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
)

// consumerKind is made once: an option is an interface, boxed per call
// otherwise.
var consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)

// Middleware returns handler middleware that runs each attempt in a
// CONSUMER span "process <queue>", linked to the span that enqueued the job
// (read from its metadata; a job enqueued without tracing gets no link), or
// its child with WithParent. The handler's context carries the span. A
// handler error is recorded on the span; a panic is recorded and panics on.
// Install it first (Registry.Use) so the other middleware runs inside the
// span.
func Middleware(opts ...Option) jobq.Middleware {
	c := newConfig(opts)
	tracer := c.tracer()
	return func(next jobq.HandlerFunc) jobq.HandlerFunc {
		return func(ctx context.Context, job *jobq.Job) error {
			// What a sampler may decide by is given at the start; the
			// rest only to a span that records.
			start := make([]trace.SpanStartOption, 2, 3)
			start[0] = consumerKind
			start[1] = trace.WithAttributes(
				systemAttr,
				semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process"),
				semconv.MessagingDestinationName(job.Queue),
				AttrJobType.String(job.Type),
			)
			if len(job.Metadata) > 0 {
				// Extracted apart from ctx: a job without a trace context
				// must not pass off the worker's context as its producer.
				sent := c.prop.Extract(context.Background(), propagation.MapCarrier(job.Metadata))
				if sc := trace.SpanContextFromContext(sent); sc.IsValid() {
					if c.parent {
						ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
					} else {
						start = append(start, trace.WithLinks(trace.Link{SpanContext: sc}))
					}
				}
				if b := baggage.FromContext(sent); b.Len() > 0 {
					ctx = baggage.ContextWithBaggage(ctx, b)
				}
			}
			ctx, span := tracer.Start(ctx, "process "+job.Queue, start...)
			if span.IsRecording() {
				span.SetAttributes(
					semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
					AttrJobAttempt.Int(job.Attempt),
					AttrJobMaxAttempts.Int(job.MaxAttempts),
				)
			}
			return runInSpan(ctx, span, next, job)
		}
	}
}

// runInSpan calls next and ends span with its outcome, however it ends.
func runInSpan(ctx context.Context, span trace.Span, next jobq.HandlerFunc, job *jobq.Job) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// The worker recovers panics outside the middleware, turning them
		// into the attempt's error: record this one and let it go on.
		// Re-panicking from here keeps the handler's frames on the stack
		// that the worker stores with the error.
		p := recover()
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
		panic(p)
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
