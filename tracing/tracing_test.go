package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newRecorder returns a provider that hands every span to an in-memory
// exporter as it ends.
func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

func openSQLite(t *testing.T) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newClient(t *testing.T, b backend.Backend, cfg jobq.ClientConfig) *jobq.Client {
	t.Helper()
	c, err := jobq.NewClient(b, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// work runs a worker on queues until attempts attempts have finished, then
// stops it.
func work(t *testing.T, b backend.Backend, reg *jobq.Registry, attempts int, queues ...string) {
	t.Helper()
	var mu sync.Mutex
	finished := 0
	enough := make(chan struct{})
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Queues:       queues,
		Concurrency:  2,
		PollInterval: 5 * time.Millisecond,
		Retry:        jobq.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: []jobq.WorkerHooks{{Finished: func(jobq.Event) {
			mu.Lock()
			defer mu.Unlock()
			if finished++; finished == attempts {
				close(enough)
			}
		}}},
	})
	if err != nil {
		t.Fatalf("new worker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-enough:
	case <-time.After(20 * time.Second):
		t.Errorf("timed out waiting for %d attempts", attempts)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker run: %v", err)
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// hasAttr reports whether s carries the attribute key, whatever its value.
func hasAttr(s tracetest.SpanStub, key attribute.Key) bool {
	_, ok := attrs(s)[key]
	return ok
}

// checkAttrs reports the attributes of s that differ from want.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(s)
	for _, kv := range want {
		if v, ok := got[kv.Key]; !ok {
			t.Errorf("span %q: no %s; want %s", s.Name, kv.Key, show(kv.Value))
		} else if v != kv.Value {
			t.Errorf("span %q: %s = %s; want %s", s.Name, kv.Key, show(v), show(kv.Value))
		}
	}
}

// show renders an attribute value with its type: values of two types can
// print alike (the string "5" and the number 5).
func show(v attribute.Value) string {
	return fmt.Sprintf("%s %q", v.Type(), v.String())
}

// byMessage groups spans of the kind by messaging.message.id.
func byMessage(spans tracetest.SpanStubs, kind trace.SpanKind) map[string][]tracetest.SpanStub {
	out := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanKind == kind {
			id := attrs(s)["messaging.message.id"].AsString()
			out[id] = append(out[id], s)
		}
	}
	return out
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return tracetest.SpanStub{}
}

func hasEvent(s tracetest.SpanStub, name, attrKey, contains string) bool {
	for _, e := range s.Events {
		if e.Name != name {
			continue
		}
		for _, kv := range e.Attributes {
			if string(kv.Key) == attrKey && strings.Contains(kv.Value.AsString(), contains) {
				return true
			}
		}
	}
	return false
}

// sameSpan compares span identities: a link's context is remote, the
// span's own is not.
func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

// TestTraceAcrossWorker enqueues through a traced client on sqlite and runs
// the jobs in a real worker: each job has its own trace (the producer
// span's), each attempt one consumer span linked to (or, WithParent, child
// of) its job's producer span, with the messaging attributes; a failed
// attempt carries its error; handlers' spans nest under the attempt's; a
// job enqueued without tracing still gets its consumer span, unlinked.
func TestTraceAcrossWorker(t *testing.T) {
	for _, parent := range []bool{false, true} {
		name := "link"
		if parent {
			name = "parent"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tp, exp := newRecorder(t)
			opts := []tracing.Option{tracing.WithTracerProvider(tp)}
			if parent {
				opts = append(opts, tracing.WithParent())
			}
			b := openSQLite(t)
			reg := jobq.NewRegistry()
			reg.Use(tracing.Middleware(opts...))
			reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error {
				_, s := tp.Tracer("handler").Start(ctx, "work "+id(j.ID))
				s.End()
				return nil
			})
			reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
				if j.Attempt == 1 {
					return errors.New("try again")
				}
				return nil
			})
			traced := newClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{tracing.ClientHooks(opts...)}})
			plain := newClient(t, b, jobq.ClientConfig{})
			bg := context.Background()

			reqCtx, req := tp.Tracer("app").Start(bg, "request")
			okID, err := traced.Enqueue(reqCtx, "ok", nil)
			req.End()
			if err != nil {
				t.Fatalf("enqueue ok: %v", err)
			}
			flakyID, err := traced.Enqueue(bg, "flaky", nil, jobq.Queue("slow"))
			if err != nil {
				t.Fatalf("enqueue flaky: %v", err)
			}
			bulk, err := traced.EnqueueMany(bg, []jobq.JobSpec{
				{Type: "ok", Options: []jobq.EnqueueOption{jobq.Queue("bulk")}},
				{Type: "ok", Options: []jobq.EnqueueOption{jobq.Queue("bulk")}},
				{Type: "ok", Options: []jobq.EnqueueOption{jobq.Queue("bulk")}},
			})
			if err != nil {
				t.Fatalf("enqueue many: %v", err)
			}
			plainID, err := plain.Enqueue(bg, "ok", nil)
			if err != nil {
				t.Fatalf("enqueue untraced: %v", err)
			}
			// ok 1, flaky 2, bulk 3, untraced 1
			work(t, b, reg, 7, "default", "slow", "bulk")

			spans := exp.GetSpans()
			producers := byMessage(spans, trace.SpanKindProducer)
			consumers := byMessage(spans, trace.SpanKindConsumer)
			type job struct {
				id       int64
				queue    string
				typ      string
				attempts int
			}
			jobs := []job{{okID, "default", "ok", 1}, {flakyID, "slow", "flaky", 2}}
			for _, r := range bulk {
				jobs = append(jobs, job{r.ID, "bulk", "ok", 1})
			}
			if len(producers) != len(jobs) {
				t.Errorf("producer spans for jobs %v; want one for each of the %d traced jobs", slices.Sorted(maps.Keys(producers)), len(jobs))
			}
			traces := map[trace.TraceID]bool{}
			for _, j := range jobs {
				ps := producers[id(j.id)]
				if len(ps) != 1 {
					t.Errorf("job %d: %d producer spans; want 1", j.id, len(ps))
					continue
				}
				p := ps[0]
				traces[p.SpanContext.TraceID()] = true
				if p.Name != "send "+j.queue || p.Status.Code != codes.Unset {
					t.Errorf("job %d: producer span %q status %v; want %q, unset", j.id, p.Name, p.Status, "send "+j.queue)
				}
				checkAttrs(t, p, attribute.String("messaging.system", "jobq"),
					attribute.String("messaging.operation.type", "send"),
					attribute.String("messaging.operation.name", "send"),
					attribute.String("messaging.destination.name", j.queue),
					attribute.String("jobq.job.type", j.typ))

				cs := consumers[id(j.id)]
				if len(cs) != j.attempts {
					t.Errorf("job %d: %d consumer spans; want %d (one per attempt)", j.id, len(cs), j.attempts)
					continue
				}
				slices.SortFunc(cs, func(a, b tracetest.SpanStub) int {
					return int(attrs(a)["jobq.job.attempt"].AsInt64() - attrs(b)["jobq.job.attempt"].AsInt64())
				})
				for n, c := range cs {
					if c.Name != "process "+j.queue {
						t.Errorf("job %d: consumer span %q; want %q", j.id, c.Name, "process "+j.queue)
					}
					checkAttrs(t, c, attribute.String("messaging.system", "jobq"),
						attribute.String("messaging.operation.type", "process"),
						attribute.String("messaging.operation.name", "process"),
						attribute.String("messaging.destination.name", j.queue),
						attribute.String("jobq.job.type", j.typ),
						attribute.Int("jobq.job.attempt", n+1),
						attribute.Int("jobq.job.max_attempts", 3))
					if parent {
						if c.Parent.SpanID() != p.SpanContext.SpanID() || c.SpanContext.TraceID() != p.SpanContext.TraceID() || len(c.Links) != 0 {
							t.Errorf("job %d attempt %d: parent %v, trace %v, %d links; want the producer span %v as parent, its trace, no link",
								j.id, n+1, c.Parent.SpanID(), c.SpanContext.TraceID(), len(c.Links), p.SpanContext.SpanID())
						}
					} else {
						if len(c.Links) != 1 || !sameSpan(c.Links[0].SpanContext, p.SpanContext) || c.Parent.IsValid() ||
							c.SpanContext.TraceID() == p.SpanContext.TraceID() {
							t.Errorf("job %d attempt %d: links %v, parent %v; want one link to the producer span %v, a new trace",
								j.id, n+1, c.Links, c.Parent, p.SpanContext)
						}
					}
				}
				if j.typ == "ok" {
					work := spanNamed(t, spans, "work "+id(j.id))
					if work.Parent.SpanID() != cs[0].SpanContext.SpanID() {
						t.Errorf("job %d: handler's span has parent %v; want the attempt's span %v", j.id, work.Parent.SpanID(), cs[0].SpanContext.SpanID())
					}
				}
			}
			if len(traces) != len(jobs) {
				t.Errorf("%d distinct traces for %d jobs' producer spans; want one trace per job", len(traces), len(jobs))
			}
			reqSpan := spanNamed(t, spans, "request")
			if p := producers[id(okID)]; len(p) == 1 && p[0].Parent.SpanID() != reqSpan.SpanContext.SpanID() {
				t.Errorf("producer span of the job enqueued in a request has parent %v; want the request's span", p[0].Parent.SpanID())
			}
			if cs := consumers[id(flakyID)]; len(cs) == 2 {
				failed, ok := cs[0], cs[1]
				if failed.Status.Code != codes.Error || failed.Status.Description != "try again" ||
					!hasEvent(failed, "exception", "exception.message", "try again") || attrs(failed)["error.type"].AsString() == "" {
					t.Errorf("failed attempt: status %v, events %v, error.type %q; want the error recorded", failed.Status, failed.Events, attrs(failed)["error.type"].String())
				}
				if ok.Status.Code != codes.Unset || len(ok.Events) != 0 {
					t.Errorf("second attempt: status %v, events %v; want no error", ok.Status, ok.Events)
				}
			}
			if cs := consumers[id(plainID)]; len(cs) != 1 || len(cs[0].Links) != 0 || cs[0].Parent.IsValid() || !cs[0].SpanContext.IsValid() {
				t.Errorf("untraced job: consumer spans %+v; want one, no link, no parent", cs)
			}
		})
	}
}

// TestSendSpanOutcomes: a duplicate enqueue is not an error but says which
// job holds the key; an insert that fails records the error.
func TestSendSpanOutcomes(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	b := openSQLite(t)
	hooks := tracing.ClientHooks(tracing.WithTracerProvider(tp))
	c := newClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{hooks}})
	ctx := context.Background()
	first, err := c.Enqueue(ctx, "once", nil, jobq.UniqueKey("k"))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if _, err := c.Enqueue(ctx, "once", nil, jobq.UniqueKey("k")); !errors.Is(err, jobq.ErrDuplicate) {
		t.Fatalf("second enqueue: %v; want ErrDuplicate", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans; want 2", len(spans))
	}
	for i, s := range spans {
		checkAttrs(t, s, attribute.String("messaging.message.id", id(first)))
		if dup := attrs(s)["jobq.job.duplicate"]; dup.AsBool() != (i == 1) || s.Status.Code != codes.Unset {
			t.Errorf("span %d: duplicate %s, status %v; want duplicate only on the second, no error", i, show(dup), s.Status)
		}
	}

	exp.Reset()
	closed := openSQLite(t)
	closed.Close()
	c = newClient(t, closed, jobq.ClientConfig{Hooks: []jobq.ClientHooks{hooks}})
	_, err = c.Enqueue(ctx, "lost", nil)
	if err == nil {
		t.Fatal("enqueue into a closed backend succeeded")
	}
	spans = exp.GetSpans()
	// No message id: the attribute is absent (an empty value, which
	// OpenTelemetry counts as a value, would be one).
	if len(spans) != 1 || spans[0].Status.Code != codes.Error || spans[0].Status.Description != err.Error() ||
		!hasEvent(spans[0], "exception", "exception.message", err.Error()) || hasAttr(spans[0], "messaging.message.id") {
		t.Errorf("spans %+v; want one send span with the error %q recorded and no message id", spans, err)
	}
}

// TestPanicIsRecorded: a panicking handler's attempt span records the
// panic with its stack, and the panic still reaches the worker, which
// stores it, with the handler's frames, as the job's error.
func TestPanicIsRecorded(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	b := openSQLite(t)
	reg := jobq.NewRegistry()
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))
	reg.HandleFunc("boom", func(ctx context.Context, j *jobq.Job) error { explode(); return nil })
	c := newClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{tracing.ClientHooks(tracing.WithTracerProvider(tp))}})
	if _, err := c.Enqueue(context.Background(), "boom", nil, jobq.MaxAttempts(1)); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	work(t, b, reg, 1, "default")

	s := spanNamed(t, exp.GetSpans(), "process default")
	if s.Status.Code != codes.Error || s.Status.Description != "panic: kaboom" || attrs(s)["error.type"].AsString() != "panic" ||
		!hasEvent(s, "exception", "exception.stacktrace", "tracing_test.explode") {
		t.Errorf("span status %v, error.type %q, events %v; want the panic recorded with the stack of explode", s.Status, attrs(s)["error.type"].String(), s.Events)
	}
	f, err := b.FailedList(context.Background(), backend.FailedListParams{Limit: 10})
	if err != nil {
		t.Fatalf("list failed: %v", err)
	}
	if len(f) != 1 || !strings.HasPrefix(f[0].Error, "panic: kaboom") || !strings.Contains(f[0].Error, "tracing_test.explode") {
		t.Errorf("failed jobs %+v; want the panic with explode's frame", f)
	}
}

func explode() { panic("kaboom") }

// TestSyncBackend: on the sync backend the handler runs inside Enqueue,
// while the send span is still open: the attempt's span links to it and
// nests under the caller's span, the context the handler runs in.
func TestSyncBackend(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	reg := jobq.NewRegistry()
	reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp)))
	reg.HandleFunc("inline", func(ctx context.Context, j *jobq.Job) error { return nil })
	c := newClient(t, inline.New(), jobq.ClientConfig{Registry: reg, Hooks: []jobq.ClientHooks{tracing.ClientHooks(tracing.WithTracerProvider(tp))}})
	ctx, req := tp.Tracer("app").Start(context.Background(), "request")
	if _, err := c.Enqueue(ctx, "inline", nil); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	req.End()
	spans := exp.GetSpans()
	send, process, r := spanNamed(t, spans, "send default"), spanNamed(t, spans, "process default"), spanNamed(t, spans, "request")
	if len(process.Links) != 1 || !sameSpan(process.Links[0].SpanContext, send.SpanContext) ||
		process.Parent.SpanID() != r.SpanContext.SpanID() || send.Parent.SpanID() != r.SpanContext.SpanID() {
		t.Errorf("send %v (parent %v), process links %v parent %v; want both under the request %v, process linked to send",
			send.SpanContext.SpanID(), send.Parent.SpanID(), process.Links, process.Parent.SpanID(), r.SpanContext.SpanID())
	}
}

// seeing is a sampler that samples everything and keeps the attribute
// keys each span's start gave it, by span name.
type seeing struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (s *seeing) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range p.Attributes {
		s.seen[p.Name] = append(s.seen[p.Name], string(kv.Key))
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *seeing) Description() string { return "seeing" }

// TestSamplingAttributes: a sampler sees a span's attributes at its start
// only with WithSamplingAttributes; a sampled span carries them either way.
func TestSamplingAttributes(t *testing.T) {
	t.Parallel()
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			t.Parallel()
			sampler := &seeing{seen: map[string][]string{}}
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(exp))
			t.Cleanup(func() { tp.Shutdown(context.Background()) })
			opts := []tracing.Option{tracing.WithTracerProvider(tp)}
			if early {
				opts = append(opts, tracing.WithSamplingAttributes())
			}
			reg := jobq.NewRegistry()
			reg.Use(tracing.Middleware(opts...))
			reg.HandleFunc("mail", func(context.Context, *jobq.Job) error { return nil })
			c := newClient(t, inline.New(), jobq.ClientConfig{Registry: reg, Hooks: []jobq.ClientHooks{tracing.ClientHooks(opts...)}})
			if _, err := c.Enqueue(context.Background(), "mail", nil); err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			want := []string{"messaging.system", "messaging.operation.type", "messaging.operation.name", "messaging.destination.name", "jobq.job.type"}
			spans := exp.GetSpans()
			for _, op := range []string{"send", "process"} {
				s := spanNamed(t, spans, op+" default")
				checkAttrs(t, s, attribute.String("messaging.system", "jobq"), attribute.String("messaging.operation.type", op),
					attribute.String("messaging.operation.name", op), attribute.String("messaging.destination.name", "default"),
					attribute.String("jobq.job.type", "mail"))
				got := sampler.seen[s.Name]
				if early && !slices.Equal(got, want) || !early && len(got) > 0 {
					t.Errorf("the sampler saw %v at the start of %q; want %v", got, s.Name, map[bool][]string{true: want}[early])
				}
			}
		})
	}
}

// tenantBag is baggage with one member, tenant=acme.
func tenantBag(t *testing.T) baggage.Baggage {
	t.Helper()
	tenant, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return bag
}

// TestBaggage: the default propagator stores no baggage in the job; one
// that carries baggage hands the enqueuer's to the handler, which runs in
// a context of its own.
func TestBaggage(t *testing.T) {
	t.Parallel()
	bag := tenantBag(t)
	withBaggage := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	for _, prop := range []propagation.TextMapPropagator{nil, withBaggage} {
		tp, _ := newRecorder(t)
		opts := []tracing.Option{tracing.WithTracerProvider(tp)}
		if prop != nil {
			opts = append(opts, tracing.WithPropagator(prop))
		}
		hooks := tracing.ClientHooks(opts...)
		info := jobq.EnqueueInfo{Type: "t", Queue: "default", Metadata: map[string]string{}}
		if err := hooks.BeforeEnqueue(baggage.ContextWithBaggage(context.Background(), bag), &info); err != nil {
			t.Fatalf("before enqueue: %v", err)
		}
		hooks.AfterEnqueue(info.Context, info, jobq.EnqueueResult{ID: 1}, nil) // as the client does: the job's context
		var seen string
		handler := tracing.Middleware(opts...)(func(ctx context.Context, j *jobq.Job) error {
			seen = baggage.FromContext(ctx).Member("tenant").Value()
			return nil
		})
		if err := handler(context.Background(), &jobq.Job{ID: 1, Queue: "default", Type: "t", Attempt: 1, Metadata: info.Metadata}); err != nil {
			t.Fatalf("handler: %v", err)
		}
		stored := info.Metadata["baggage"]
		if prop == nil && (stored != "" || seen != "" || info.Metadata["traceparent"] == "") {
			t.Errorf("default propagator: metadata %q, handler saw tenant %q; want a traceparent and no baggage", info.Metadata, seen)
		}
		if prop != nil && (stored != "tenant=acme" || seen != "acme") {
			t.Errorf("baggage propagator: stored %q, handler saw tenant %q; want tenant=acme, acme", stored, seen)
		}
	}
}

// TestStaleContextReplaced: a trace context already in the caller's
// metadata (copied from another job, say) is replaced whole, and the
// caller's other keys are kept.
func TestStaleContextReplaced(t *testing.T) {
	t.Parallel()
	tp, exp := newRecorder(t)
	hooks := tracing.ClientHooks(tracing.WithTracerProvider(tp))
	const old = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	info := jobq.EnqueueInfo{Type: "t", Queue: "default", Metadata: map[string]string{"traceparent": old, "tracestate": "old=1", "keep": "x"}}
	if err := hooks.BeforeEnqueue(context.Background(), &info); err != nil {
		t.Fatalf("before enqueue: %v", err)
	}
	hooks.AfterEnqueue(info.Context, info, jobq.EnqueueResult{ID: 1}, nil) // as the client does: the job's context
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans; want 1", len(spans))
	}
	sc := spans[0].SpanContext
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if md := info.Metadata; md["traceparent"] != want || md["tracestate"] != "" || md["keep"] != "x" || len(md) != 2 {
		t.Errorf("metadata %q; want traceparent %s, no tracestate, keep=x", md, want)
	}
}

// TestUnsampledContext: on sqlite, a send span that is not sampled leaves
// no trace context in the job's row by default (and removes one the caller
// copied in), so its attempt starts a trace the consumer's sampler decides;
// WithParent on both sides stores it, and the attempt then follows the
// enqueuer's decision and records nothing; baggage the propagator carries
// is stored whether or not the span is sampled.
func TestUnsampledContext(t *testing.T) {
	t.Parallel()
	bag := tenantBag(t)
	withBaggage := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	const stale = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name      string
		sampler   sdktrace.Sampler // the enqueuer's
		opts      []tracing.Option // both sides'
		ctx       context.Context
		wantMD    func(md map[string]string) bool
		wantSpans int // the consumer's exported spans
	}{
		{"unsampled", sdktrace.NeverSample(), nil, context.Background(),
			func(md map[string]string) bool { return len(md) == 1 && md["keep"] == "x" }, 1},
		{"unsampled-parent", sdktrace.NeverSample(), []tracing.Option{tracing.WithParent()}, context.Background(),
			func(md map[string]string) bool {
				return len(md) == 2 && md["keep"] == "x" && strings.HasSuffix(md["traceparent"], "-00") && md["traceparent"] != stale
			}, 0},
		{"unsampled-baggage", sdktrace.NeverSample(), []tracing.Option{tracing.WithPropagator(withBaggage)}, baggage.ContextWithBaggage(context.Background(), bag),
			func(md map[string]string) bool {
				return md["baggage"] == "tenant=acme" && strings.HasSuffix(md["traceparent"], "-00") && md["keep"] == "x"
			}, 1},
		{"sampled", sdktrace.AlwaysSample(), nil, context.Background(),
			func(md map[string]string) bool {
				return len(md) == 2 && strings.HasSuffix(md["traceparent"], "-01") && md["traceparent"] != stale
			}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			producerTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler))
			t.Cleanup(func() { producerTP.Shutdown(context.Background()) })
			consumerTP, exp := newRecorder(t) // the SDK's default: ParentBased(AlwaysSample)
			b := openSQLite(t)
			c := newClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{
				tracing.ClientHooks(append([]tracing.Option{tracing.WithTracerProvider(producerTP)}, tc.opts...)...),
			}})
			id, err := c.Enqueue(tc.ctx, "t", nil, jobq.Metadata(map[string]string{"traceparent": stale, "keep": "x"}))
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			info, err := jobq.NewInspector(b).Job(context.Background(), id)
			if err != nil {
				t.Fatalf("inspect job %d: %v", id, err)
			}
			if md := info.Live.Metadata; !tc.wantMD(md) {
				t.Errorf("stored metadata %q", md)
			}
			reg := jobq.NewRegistry()
			reg.Use(tracing.Middleware(append([]tracing.Option{tracing.WithTracerProvider(consumerTP)}, tc.opts...)...))
			reg.HandleFunc("t", func(context.Context, *jobq.Job) error { return nil })
			work(t, b, reg, 1)
			spans := exp.GetSpans()
			if len(spans) != tc.wantSpans {
				t.Fatalf("consumer exported %d spans; want %d", len(spans), tc.wantSpans)
			}
			// Only a sampled send span is worth a link.
			wantLinks := 0
			if tc.name == "sampled" {
				wantLinks = 1
			}
			for _, s := range spans {
				if s.Parent.IsValid() || len(s.Links) != wantLinks {
					t.Errorf("attempt span has parent %v and %d links; want a root with %d", s.Parent, len(s.Links), wantLinks)
				}
			}
		})
	}
}
