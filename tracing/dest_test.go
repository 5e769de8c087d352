package tracing

import (
	"fmt"
	"maps"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TestDests: a queue and type's start options are made once and shared,
// carry the queue and type, and the cache stops growing at maxDests while
// further queues and types still get theirs.
func TestDests(t *testing.T) {
	t.Parallel()
	d := newDests("send", semconv.MessagingOperationTypeSend, trace.SpanKindProducer, true)
	check := func(ds *dest, queue, typ string) {
		t.Helper()
		if ds.name != "send "+queue {
			t.Fatalf("name %q, want %q", ds.name, "send "+queue)
		}
		cfg := trace.NewSpanStartConfig(ds.start...)
		// Compared as typed values: a number or a list that happened to
		// print like the string wanted is still wrong.
		got := map[string]attribute.Value{}
		for _, a := range cfg.Attributes() {
			got[string(a.Key)] = a.Value
		}
		want := map[string]attribute.Value{}
		for k, v := range map[string]string{"messaging.system": "jobq", "messaging.operation.type": "send", "messaging.operation.name": "send",
			"messaging.destination.name": queue, "jobq.job.type": typ} {
			want[k] = attribute.StringValue(v)
		}
		if !maps.Equal(got, want) || cfg.SpanKind() != trace.SpanKindProducer {
			t.Fatalf("%s/%s: attributes %v kind %v, want %v and producer", queue, typ, got, cfg.SpanKind(), want)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxDests + 100 {
				q, typ := fmt.Sprintf("q%d", i%7), fmt.Sprintf("t%d", i)
				ds := d.get(q, typ)
				if g == 0 {
					check(ds, q, typ)
				}
			}
		})
	}
	wg.Wait()
	if n := len(*d.m.Load()); n != maxDests {
		t.Fatalf("%d dests cached, want the bound %d", n, maxDests)
	}
	if a, b := d.get("q1", "t1"), d.get("q1", "t1"); a != b {
		t.Fatal("a cached queue and type gets new start options")
	}
	check(d.get("late", "type"), "late", "type")
}
