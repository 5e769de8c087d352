package tracing

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
)

// ClientHooks returns client hooks that start a PRODUCER span "send
// <queue>" for each enqueued job, from the caller's context, store its
// context in the job's metadata, and end it once the insert returned: with
// the job's ID, or with the error when the call failed (also when it was
// refused before the insert, for every job of the call). A duplicate (the
// job's unique key was taken) is not an error: the span gets
// jobq.job.duplicate and the live job's ID, whose own trace is the one that
// runs. For EnqueueTx the span ends at the insert, not at the commit.
func ClientHooks(opts ...Option) jobq.ClientHooks {
	p := newProducer(newConfig(opts))
	return jobq.ClientHooks{BeforeEnqueue: p.before, AfterEnqueue: p.after}
}

func newProducer(c config) *producer {
	return &producer{
		tracer: c.tracer(), prop: c.prop, fields: c.prop.Fields(),
		dests: newDests("send", semconv.MessagingOperationTypeSend, trace.SpanKindProducer),
	}
}

// producer starts each job's send span in BeforeEnqueue and hands it to
// the job's AfterEnqueue through the job's own context (EnqueueInfo.
// Context), under a key of its own, so it ends only spans it started.
type producer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	fields []string // the metadata keys prop writes
	dests  *dests
}

// sendSpanKey is the context key of a job's send span; the producer's
// address tells two producers' spans apart.
type sendSpanKey struct{ p *producer }

func (p *producer) before(ctx context.Context, info *jobq.EnqueueInfo) error {
	d := p.dests.get(info.Queue, info.Type)
	ctx, span := p.tracer.Start(ctx, d.name, d.start...)
	if !span.SpanContext().IsValid() {
		return nil // a no-op provider without a caller's span: nothing to carry
	}
	// Whatever context the caller's metadata held is replaced whole: a
	// stale tracestate must not travel with the new traceparent.
	for _, f := range p.fields {
		delete(info.Metadata, f)
	}
	p.prop.Inject(ctx, propagation.MapCarrier(info.Metadata))
	if span.IsRecording() {
		// A span that records nothing needs no End.
		info.Context = context.WithValue(ctx, sendSpanKey{p}, span)
	}
	return nil
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
