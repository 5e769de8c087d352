package tracing

import (
	"maps"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// maxDests bounds the start options kept per queue and type, so that a
// producer inventing types or queues cannot grow the cache without limit;
// past it, each span builds its own (as every span did before the cache).
const maxDests = 1024

// dest is what every span of one operation on one queue and type starts
// with: its name, its start options (its kind, and with
// WithSamplingAttributes its attributes) and the attributes a span that
// records is given after its start (all of them without that option).
// Built once, shared read-only by every span: building these per span
// (the name concatenated, the attributes' slice and its boxing into an
// option) was a noticeable part of what tracing adds to a no-op job
// (docs/performance.md, "Why the code is shaped this way").
type dest struct {
	name  string
	start []trace.SpanStartOption
	late  []attribute.KeyValue
}

// dests caches the dest of one operation ("send" or "process") by queue
// and type, in a map that is replaced, never changed, when a dest is
// added: looking one up is a plain map read, without the interface keys
// and hashing of a sync.Map.
type dests struct {
	op    string
	early bool                 // the attributes go in the start options (WithSamplingAttributes)
	attrs []attribute.KeyValue // the operation's own: system, operation type and name
	kind  trace.SpanStartOption
	m     atomic.Pointer[map[destKey]*dest]
	mu    sync.Mutex // serialises additions
}

type destKey struct{ queue, typ string }

func newDests(op string, opType attribute.KeyValue, kind trace.SpanKind, early bool) *dests {
	d := &dests{
		op:    op,
		early: early,
		attrs: []attribute.KeyValue{systemAttr, opType, semconv.MessagingOperationName(op)},
		kind:  trace.WithSpanKind(kind),
	}
	d.m.Store(&map[destKey]*dest{})
	return d
}

// get returns the dest of queue and typ, made on first use.
func (d *dests) get(queue, typ string) *dest {
	k := destKey{queue, typ}
	m := *d.m.Load()
	if ds, ok := m[k]; ok {
		return ds
	}
	if len(m) >= maxDests {
		return d.build(queue, typ)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m = *d.m.Load()
	if ds, ok := m[k]; ok {
		return ds
	}
	ds := d.build(queue, typ)
	next := make(map[destKey]*dest, len(m)+1)
	maps.Copy(next, m)
	next[k] = ds
	d.m.Store(&next)
	return ds
}

func (d *dests) build(queue, typ string) *dest {
	attrs := make([]attribute.KeyValue, 0, len(d.attrs)+2)
	attrs = append(attrs, d.attrs...)
	attrs = append(attrs, semconv.MessagingDestinationName(queue), AttrJobType.String(typ))
	// The start slice is never appended to: a span that needs more options
	// (a link) copies it.
	ds := &dest{name: d.op + " " + queue, start: []trace.SpanStartOption{d.kind}, late: attrs}
	if d.early {
		ds.start, ds.late = append(ds.start, trace.WithAttributes(attrs...)), nil
	}
	return ds
}
