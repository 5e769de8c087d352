package tracing_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/tracing"
)

// TestSampleRatio: on sqlite with a real worker, under WithSampleRatio jobq
// decides what is traced before the SDK (whose sampler here keeps
// everything): at 0 an enqueue without a parent starts no span, stores no
// context and its attempt records none, but runs with a valid unsampled
// context its own spans follow; an enqueue in a sampled span is traced and
// so is its attempt, linked; one in an unsampled span is not (its attempt,
// a root, is decided afresh); at 1 every root is traced; WithParent stores the unsampled context, and the
// attempt's context is in its trace.
func TestSampleRatio(t *testing.T) {
	t.Parallel()
	unsampledCaller := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
	}))
	for _, tc := range []struct {
		name      string
		ratio     float64
		parent    bool
		caller    string // "" none, "sampled", "unsampled"
		wantMD    string // the stored traceparent's flags, "" for none
		wantSpans []string
	}{
		{"root-0", 0, false, "", "", nil},
		{"root-1", 1, false, "", "01", []string{"send default", "process default"}},
		{"sampled-caller", 0, false, "sampled", "01", []string{"send default", "request", "process default"}},
		// Its attempt, carrying no context, is a root, traced at 1.
		{"unsampled-caller", 1, false, "unsampled", "", []string{"process default"}},
		{"root-0-parent", 0, true, "", "00", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, exp := newRecorder(t) // ParentBased(AlwaysSample)
			opts := []tracing.Option{tracing.WithTracerProvider(tp), tracing.WithSampleRatio(tc.ratio)}
			if tc.parent {
				opts = append(opts, tracing.WithParent())
			}
			b := openSQLite(t)
			c := newClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{tracing.ClientHooks(opts...)}})
			ctx := context.Background()
			var req trace.Span
			switch tc.caller {
			case "sampled":
				ctx, req = tp.Tracer("app").Start(ctx, "request")
			case "unsampled":
				ctx = unsampledCaller
			}
			id, err := c.Enqueue(ctx, "t", nil)
			if req != nil {
				req.End()
			}
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			info, err := jobq.NewInspector(b).Job(context.Background(), id)
			if err != nil {
				t.Fatalf("inspect job %d: %v", id, err)
			}
			tparent := info.Live.Metadata["traceparent"]
			if tc.wantMD == "" && tparent != "" || tc.wantMD != "" && !strings.HasSuffix(tparent, "-"+tc.wantMD) {
				t.Errorf("stored traceparent %q; want flags %q", tparent, tc.wantMD)
			}

			var handlerSC trace.SpanContext
			reg := jobq.NewRegistry()
			reg.Use(tracing.Middleware(opts...))
			reg.HandleFunc("t", func(ctx context.Context, j *jobq.Job) error {
				handlerSC = trace.SpanContextFromContext(ctx)
				_, s := tp.Tracer("handler").Start(ctx, "work")
				s.End()
				return nil
			})
			work(t, b, reg, 1)

			var names []string
			spans := exp.GetSpans()
			for _, s := range spans {
				if s.Name != "work" {
					names = append(names, s.Name)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.wantSpans, ",") {
				t.Errorf("exported spans %q (and a work span each traced attempt); want %q", names, tc.wantSpans)
			}
			if !handlerSC.IsValid() {
				t.Fatalf("handler's context has no valid span context")
			}
			traced := len(tc.wantSpans) > 0
			if handlerSC.IsSampled() != traced {
				t.Errorf("handler's span context sampled %v; want %v", handlerSC.IsSampled(), traced)
			}
			if want := len(tc.wantSpans); traced && len(spans) != want+1 || !traced && len(spans) != 0 {
				t.Errorf("%d spans exported, the handler's included", len(spans))
			}
			if tc.wantMD == "01" {
				send, process := spanNamed(t, spans, "send default"), spanNamed(t, spans, "process default")
				if len(process.Links) != 1 || !sameSpan(process.Links[0].SpanContext, send.SpanContext) {
					t.Errorf("attempt's links %v; want the send span %v", process.Links, send.SpanContext)
				}
			}
			if tc.parent && !strings.Contains(tparent, handlerSC.TraceID().String()) {
				t.Errorf("handler's trace %s is not the stored one %q", handlerSC.TraceID(), tparent)
			}
		})
	}
}

// TestSampleRatioWorkerContext: under WithSampleRatio an attempt whose job
// carries no trace context follows the span of the context it runs in,
// whatever the ratio: on the sync backend, where the handler runs in the
// caller's context, an unsampled caller's attempt at ratio 1 is not traced
// and keeps the caller's trace, and a sampled caller's attempt at ratio 0
// is traced, as the caller's child. The client has no tracing hooks, so no
// stored context decides instead.
func TestSampleRatioWorkerContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ratio   float64
		sampled bool
	}{
		{"unsampled-at-1", 1, false},
		{"sampled-at-0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, exp := newRecorder(t) // ParentBased(AlwaysSample)
			var handlerSC trace.SpanContext
			reg := jobq.NewRegistry()
			reg.Use(tracing.Middleware(tracing.WithTracerProvider(tp), tracing.WithSampleRatio(tc.ratio)))
			reg.HandleFunc("inline", func(ctx context.Context, j *jobq.Job) error {
				handlerSC = trace.SpanContextFromContext(ctx)
				return nil
			})
			c := newClient(t, inline.New(), jobq.ClientConfig{Registry: reg})
			ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{7, 8, 9}, SpanID: trace.SpanID{1, 2, 3},
			}))
			var req trace.Span
			if tc.sampled {
				ctx, req = tp.Tracer("app").Start(context.Background(), "request")
			}
			caller := trace.SpanContextFromContext(ctx)
			if _, err := c.Enqueue(ctx, "inline", nil); err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			if req != nil {
				req.End()
			}
			if handlerSC.TraceID() != caller.TraceID() || handlerSC.IsSampled() != tc.sampled {
				t.Errorf("handler's span context %v (sampled %v); want in the caller's trace %v, sampled %v",
					handlerSC, handlerSC.IsSampled(), caller.TraceID(), tc.sampled)
			}
			spans := exp.GetSpans()
			if !tc.sampled {
				if len(spans) != 0 {
					t.Errorf("%d spans exported; want none", len(spans))
				}
				return
			}
			process := spanNamed(t, spans, "process default")
			if process.Parent.SpanID() != caller.SpanID() || len(process.Links) != 0 {
				t.Errorf("attempt's parent %v, links %v; want the caller's span %v and no link",
					process.Parent.SpanID(), process.Links, caller.SpanID())
			}
		})
	}
}
