package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FuzzExtract: the direct read of a traceparent gives what the W3C
// propagator gives, for well-formed and malformed headers alike.
func FuzzExtract(f *testing.F) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", // flags over 3: invalid in version 00
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace ID
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span ID
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"",
	} {
		f.Add(tp, "")
		f.Add(tp, "vendor=value,other=1")
		f.Add(tp, "not a tracestate")
	}
	direct := newConfig(nil)
	if !direct.w3c {
		f.Fatal("the default propagator is not read directly")
	}
	f.Fuzz(func(t *testing.T, tp, ts string) {
		md := map[string]string{"traceparent": tp}
		if ts != "" {
			md["tracestate"] = ts
		}
		got, gotBag := direct.extract(md)
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(md)))
		if !got.Equal(want) || got.IsRemote() != want.IsRemote() {
			t.Fatalf("traceparent %q tracestate %q: read %v (remote %v), the propagator reads %v (remote %v)",
				tp, ts, got, got.IsRemote(), want, want.IsRemote())
		}
		if gotBag.Len() != 0 {
			t.Fatalf("baggage %v from a W3C trace context alone", gotBag)
		}
	})
}
