package tracing

import (
	"context"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// extract reads the span context (and baggage) the producer stored in a
// job's metadata. Extracted apart from the handler's context: a job without
// a trace context must not pass off the worker's context as its producer.
// With the default propagator a well-formed version-00 traceparent is read
// directly, without the context the propagator returns it in (an
// allocation and a context walk per attempt); anything else goes through
// the propagator.
func (c *config) extract(md map[string]string) (trace.SpanContext, baggage.Baggage) {
	if c.w3c {
		if sc, ok := parseTraceparent(md["traceparent"]); ok {
			if ts := md["tracestate"]; ts != "" {
				// An invalid tracestate is dropped, as the propagator
				// does, keeping the traceparent.
				state, _ := trace.ParseTraceState(ts)
				sc = sc.WithTraceState(state)
			}
			return sc, baggage.Baggage{}
		}
	}
	sent := c.prop.Extract(context.Background(), propagation.MapCarrier(md))
	return trace.SpanContextFromContext(sent), baggage.FromContext(sent)
}

// parseTraceparent reads "00-<32 hex trace ID>-<16 hex span ID>-<2 hex
// flags>" as propagation.TraceContext does; ok is false for anything else
// (another version, upper case, malformed), which the propagator then
// judges itself.
func parseTraceparent(h string) (sc trace.SpanContext, ok bool) {
	if len(h) != 55 || h[0] != '0' || h[1] != '0' || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return sc, false
	}
	var scc trace.SpanContextConfig
	if !unhex(scc.TraceID[:], h[3:35]) || !unhex(scc.SpanID[:], h[36:52]) {
		return sc, false
	}
	var flags [1]byte
	if !unhex(flags[:], h[53:55]) || flags[0] > 3 {
		return sc, false
	}
	scc.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	scc.Remote = true
	sc = trace.NewSpanContext(scc)
	return sc, sc.IsValid()
}

// unhex decodes lower-case hex s into dst (len(s) == 2*len(dst)).
func unhex(dst []byte, s string) bool {
	bad := byte(0)
	for i := range dst {
		hi, lo := hexValue[s[2*i]], hexValue[s[2*i+1]]
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad&0xf0 == 0
}

// hexValue maps a lower-case hex digit to its value and any other byte to
// 0xff, so decoding needs no branch per digit.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()
