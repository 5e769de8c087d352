package tracing

import (
	"context"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
)

// ClientHooks returns client hooks that start a PRODUCER span "send
// <queue>" for each enqueued job, from the caller's context, store its
// context in the job's metadata when a consumer can use it (see below), and
// end it once the insert returned: with
// the job's ID, or with the error when the call failed (also when it was
// refused before the insert, for every job of the call). A duplicate (the
// job's unique key was taken) is not an error: the span gets
// jobq.job.duplicate and the live job's ID, whose own trace is the one that
// runs. For EnqueueTx the span ends at the insert, not at the commit.
//
// The context of a span that is not sampled is stored only when an attempt
// can use it: with WithParent (given here as well as to Middleware), where
// the attempt's span is its child and a ParentBased sampler follows the
// enqueuer's decision, or when the context carries baggage that the
// propagator writes. By default an attempt's span only links to the send
// span, and a link to a span that was never recorded leads nowhere, while
// the stored context is written into, and read back from, every job's row:
// under a 1 % sampler that was most of what tracing cost a job.
func ClientHooks(opts ...Option) jobq.ClientHooks {
	p := newProducer(newConfig(opts))
	return jobq.ClientHooks{BeforeEnqueue: p.before, AfterEnqueue: p.after}
}

func newProducer(c config) *producer {
	return &producer{
		config: c, tracer: c.tracer(), fields: c.prop.Fields(),
		baggage: slices.Contains(c.prop.Fields(), "baggage"),
		dests:   newDests("send", semconv.MessagingOperationTypeSend, trace.SpanKindProducer, c.early),
	}
}

// producer starts each job's send span in BeforeEnqueue and hands it to
// the job's AfterEnqueue through the job's own context (EnqueueInfo.
// Context), under a key of its own, so it ends only spans it started.
type producer struct {
	config
	tracer trace.Tracer
	fields []string // the metadata keys prop writes
	// baggage: prop writes baggage, which travels whether or not the span
	// is sampled.
	baggage bool
	dests   *dests
}

// sendSpanKey is the context key of a job's send span; the producer's
// address tells two producers' spans apart.
type sendSpanKey struct{ p *producer }

func (p *producer) before(ctx context.Context, info *jobq.EnqueueInfo) error {
	if p.sampling && !p.traced(trace.SpanContextFromContext(ctx)) {
		// No span: the job carries only what an attempt can use, as
		// below for an unsampled span.
		p.store(ctx, info, false)
		return nil
	}
	d := p.dests.get(info.Queue, info.Type)
	ctx, span := p.tracer.Start(ctx, d.name, d.start...)
	if !span.SpanContext().IsValid() {
		return nil // a no-op provider without a caller's span: nothing to carry
	}
	p.store(ctx, info, span.SpanContext().IsSampled())
	if span.IsRecording() {
		span.SetAttributes(d.late...)
		// A span that records nothing needs no End.
		info.Context = context.WithValue(ctx, sendSpanKey{p}, span)
	}
	return nil
}

// store writes the trace context of ctx into the job's metadata when an
// attempt can use it: when it is sampled, WithParent, or with baggage that
// the propagator writes. Whatever context the caller's metadata held goes,
// stored again or not: a stale tracestate must not travel with the new
// traceparent, nor a job point at another job's trace.
func (p *producer) store(ctx context.Context, info *jobq.EnqueueInfo, sampled bool) {
	for _, f := range p.fields {
		delete(info.Metadata, f)
	}
	if sampled || p.parent || (p.baggage && baggage.FromContext(ctx).Len() > 0) {
		// Without a span (WithSampleRatio decided against one) and
		// without a caller's, an unsampled context of its own, for the
		// attempts to follow.
		if !trace.SpanContextFromContext(ctx).IsValid() {
			ctx = newUnsampled(ctx)
		}
		p.prop.Inject(ctx, propagation.MapCarrier(info.Metadata))
	}
}

func (p *producer) after(ctx context.Context, _ jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
	span, ok := ctx.Value(sendSpanKey{p}).(trace.Span)
	if !ok {
		return // not sampled, or not ours
	}
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(semconv.MessagingMessageID(strconv.FormatInt(res.ID, 10)))
		if res.Duplicate {
			span.SetAttributes(AttrJobDuplicate.Bool(true))
		}
	}
	span.End()
}
