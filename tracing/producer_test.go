package tracing

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/memory"
)

// testProducer returns an in-memory exporter and a memory-backed client
// whose first hooks are the producer's (then more).
func testProducer(t *testing.T, cfg jobq.ClientConfig, more ...jobq.ClientHooks) (*tracetest.InMemoryExporter, *jobq.Client) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	b := memory.New(memory.Options{})
	t.Cleanup(func() { b.Close() })
	cfg.Hooks = append([]jobq.ClientHooks{ClientHooks(WithTracerProvider(tp))}, more...)
	c, err := jobq.NewClient(b, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return exp, c
}

// TestRefusedEnqueueEndsSpans: a call refused before its insert (bad
// input in a batch, a later hook's refusal) ends the send spans of every
// job BeforeEnqueue saw, with the call's error, and keeps none open.
func TestRefusedEnqueueEndsSpans(t *testing.T) {
	t.Parallel()
	refuse := jobq.ClientHooks{BeforeEnqueue: func(_ context.Context, j *jobq.EnqueueInfo) error {
		if j.Type == "forbidden" {
			return errors.New("not on my watch")
		}
		return nil
	}}
	exp, c := testProducer(t, jobq.ClientConfig{MaxPayloadBytes: 16}, refuse)
	ctx := context.Background()
	_, err := c.EnqueueMany(ctx, []jobq.JobSpec{{Type: "small"}, {Type: "big", Payload: strings.Repeat("x", 32)}, {Type: "unseen"}})
	if !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("enqueue many: %v; want ErrInvalidInput", err)
	}
	_, err2 := c.Enqueue(ctx, "forbidden", nil)
	if err2 == nil {
		t.Fatal("enqueue of a forbidden type succeeded")
	}
	want := map[string]string{"small": err.Error(), "big": err.Error(), "forbidden": err2.Error()}
	got := map[string]string{}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == AttrJobType && s.Status.Code == codes.Error {
				got[kv.Value.AsString()] = s.Status.Description
			}
		}
	}
	// Only ended spans are exported: one per job BeforeEnqueue saw.
	if !maps.Equal(got, want) || len(exp.GetSpans()) != len(want) {
		t.Errorf("error spans by type %q (%d spans); want %q, each ended", got, len(exp.GetSpans()), want)
	}
}

// TestConcurrentEnqueues: spans of concurrent calls pair up, each ends
// with its own job's ID, and none stays open.
func TestConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	exp, c := testProducer(t, jobq.ClientConfig{})
	batch := make([]jobq.JobSpec, 5)
	for i := range batch {
		batch[i].Type = "t"
	}
	var wg sync.WaitGroup
	ids := make(chan int64, 200)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				res, err := c.EnqueueMany(context.Background(), batch)
				if err != nil {
					t.Errorf("enqueue many: %v", err)
					return
				}
				for _, r := range res {
					ids <- r.ID
				}
			}
		})
	}
	wg.Wait()
	close(ids)
	want := map[string]bool{}
	for id := range ids {
		want[strconv.FormatInt(id, 10)] = true
	}
	got := map[string]bool{}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == "messaging.message.id" {
				got[kv.Value.AsString()] = true
			}
		}
	}
	if len(want) != 200 || len(got) != len(want) {
		t.Errorf("%d jobs, %d ended spans with distinct message ids; want 200 and 200", len(want), len(got))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("no span for job %s", id)
		}
	}
}
