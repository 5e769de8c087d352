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
		return func(ctx context.Context, job *jobq.Job) error {
			var sent trace.SpanContext
			if len(job.Metadata) > 0 {
				var b baggage.Baggage
				sent, b = c.extract(job.Metadata)
				if b.Len() > 0 {
					ctx = baggage.ContextWithBaggage(ctx, b)
				}
			}
			// WithSampleRatio: a sampled enqueue's attempts are traced;
			// the others follow the enqueuer's context WithParent, else
			// the worker's, else chance. An attempt not traced runs with
			// an unsampled context for its own spans to follow.
			if c.sampling && !sent.IsSampled() {
				if c.parent && sent.IsValid() {
					return next(trace.ContextWithRemoteSpanContext(ctx, sent), job)
				}
				if own := trace.SpanContextFromContext(ctx); !c.traced(own) {
					if !own.IsValid() {
						ctx = newUnsampled(ctx)
					}
					return next(ctx, job)
				}
			}
			// Attributes go only to a span that records, unless the
			// sampler is to see them (WithSamplingAttributes).
			d := ds.get(job.Queue, job.Type)
			start := d.start
			switch {
			case !sent.IsValid():
			case c.parent:
				ctx = trace.ContextWithRemoteSpanContext(ctx, sent)
			case sent.IsSampled():
				// A link to a span that was not sampled leads to
				// nothing an operator can open.
				start = append(start[:len(start):len(start)], trace.WithLinks(trace.Link{SpanContext: sent}))
			}
			ctx, span := tracer.Start(ctx, d.name, start...)
			if span.IsRecording() {
				span.SetAttributes(append(d.late[:len(d.late):len(d.late)],
					semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
					AttrJobAttempt.Int(job.Attempt),
					AttrJobMaxAttempts.Int(job.MaxAttempts),
				)...)
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
