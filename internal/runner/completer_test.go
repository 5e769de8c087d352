package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// flaky wraps a backend: its first JobComplete fails, and it records the
// size of every batch it is given.
type flaky struct {
	backend.Backend
	mu      sync.Mutex
	calls   int
	batches []int
}

func (f *flaky) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	f.batches = append(f.batches, len(p.Outcomes))
	f.mu.Unlock()
	if first {
		return backend.CompleteResult{}, errors.New("connection reset")
	}
	return f.Backend.JobComplete(ctx, p)
}

// TestCompleterBatchesAndRetries: outcomes are written in batches no larger
// than maxBatch, a failed write is retried, every job ends done, and Run
// returns once Close was called and the buffer is flushed.
func TestCompleterBatchesAndRetries(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	defer mem.Close()
	ps := make([]backend.InsertParams, 250)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}
	}
	if _, err := mem.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	rows, err := mem.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 250, Lease: time.Minute})
	if err != nil || len(rows) != 250 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	f := &flaky{Backend: mem}
	c := NewCompleter(f, 300, 100, quiet, nil)
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	for _, r := range rows {
		c.Submit(Item{Outcome: backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}})
	}
	c.Close()
	<-done
	if s, _ := mem.QueueStats(ctx); len(s) != 0 {
		t.Fatalf("jobs left after the completer flushed: %+v", s)
	}
	if f.calls < 4 { // one failed write of the first batch, then at least 3 batches of <= 100
		t.Fatalf("%d writes %v; want the failed one retried and batches of at most 100", f.calls, f.batches)
	}
	for _, n := range f.batches {
		if n > 100 {
			t.Fatalf("a batch of %d outcomes, above maxBatch 100: %v", n, f.batches)
		}
	}
}
