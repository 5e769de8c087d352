package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// WithSampleRatio makes jobq decide which jobs are traced before it calls
// the OpenTelemetry SDK, so that a job that is not traced costs no SDK call
// at all. Give it to ClientHooks and Middleware alike, and give the
// provider a sampler that keeps what jobq hands it (the SDK's default,
// ParentBased(AlwaysSample)): the provider's sampler still sees every span
// jobq starts, and a ratio there as well would multiply the two.
//
// The decision follows the parent, as ParentBased(TraceIDRatioBased(
// fraction)) does: an enqueue inside a span is traced when that span is
// sampled; an attempt whose job was enqueued in a sampled span is traced
// (as its link or, WithParent, its child), one whose job carries an
// unsampled context WithParent is not, and otherwise it follows the
// worker's context's span if it has one. Only a span with no parent is
// decided by chance, with probability fraction (at most 0 or NaN: never; 1
// or more: always). An attempt that is not traced runs with a new span
// context that is valid but not sampled (or, WithParent, the enqueuer's),
// as under an unsampled SDK span: the handler's own spans and outgoing
// calls follow the decision, and logs can still name a trace.
//
// Why: a job jobq does not trace costs no SDK call. In a busy worker,
// where the SDK's code and data have left the CPU's caches by the time the
// next job comes round, an untraced attempt costs less than one the SDK's
// sampler decides (BenchmarkAttemptCold measures both); most of what
// remains is the context the handler gets. And every attempt of a sampled
// enqueue is traced, where the SDK's ratio sampler decides each attempt's
// new trace afresh (an attempt only links to its enqueue by default) and
// keeps the same fraction of them. What it gives up: samplers that decide
// by a span's name or attributes, or by anything but the parent and
// chance, never see the spans jobq decided against. Without this option
// the provider's sampler decides every span.
func WithSampleRatio(fraction float64) Option {
	return func(c *config) {
		c.sampling = true
		c.ratio = fraction
	}
}

// traced reports, under WithSampleRatio, whether a span whose parent would
// be parent (invalid for none) is to be started: as the parent was
// sampled, or by chance without one.
func (c *config) traced(parent trace.SpanContext) bool {
	if parent.IsValid() {
		return parent.IsSampled()
	}
	return c.ratio >= 1 || (c.ratio > 0 && rand.Float64() < c.ratio)
}

// newUnsampled returns ctx with a new span context that is valid and not
// sampled, as the SDK gives an unsampled root span.
func newUnsampled(ctx context.Context) context.Context {
	var scc trace.SpanContextConfig
	binary.BigEndian.PutUint64(scc.TraceID[:8], rand.Uint64())
	binary.BigEndian.PutUint64(scc.TraceID[8:], rand.Uint64()|1) // never all zero
	binary.BigEndian.PutUint64(scc.SpanID[:], rand.Uint64()|1)
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(scc))
}
