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

// flaky wraps a backend: it records the size of every batch it is given
// and, with failFirst, its first JobComplete fails.
type flaky struct {
	backend.Backend
	failFirst bool
	mu        sync.Mutex
	calls     int
	batches   []int
}

func (f *flaky) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	f.batches = append(f.batches, len(p.Outcomes))
	f.mu.Unlock()
	if first && f.failFirst {
		return backend.CompleteResult{}, errors.New("connection reset")
	}
	return f.Backend.JobComplete(ctx, p)
}

func (f *flaky) written() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}

// insertJobs inserts n jobs on queue "q" of b, each allowed one attempt.
func insertJobs(t *testing.T, b backend.Backend, n int) {
	t.Helper()
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}
	}
	if _, err := b.JobInsertMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
}

// claimed inserts n jobs into a fresh memory backend and claims them all.
func claimed(t *testing.T, n int) (*memory.Backend, []*backend.JobRow) {
	t.Helper()
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { mem.Close() })
	insertJobs(t, mem, n)
	rows, err := mem.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: n, Lease: time.Minute})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	return mem, rows
}

func done(r *backend.JobRow) Item {
	return Item{Outcome: backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}}
}

// TestCompleterBatchesAndRetries: outcomes are written in batches no larger
// than maxBatch, a failed write is retried, every job ends done, and Run
// returns once Close was called and the buffer is flushed.
func TestCompleterBatchesAndRetries(t *testing.T) {
	ctx := context.Background()
	mem, rows := claimed(t, 250)
	f := &flaky{Backend: mem, failFirst: true}
	c := NewCompleter(f, 300, 100, 0, quiet, nil)
	finished := make(chan struct{})
	go func() { c.Run(ctx); close(finished) }()
	for _, r := range rows {
		c.Submit(done(r))
	}
	c.Close()
	<-finished
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

// TestCompleterLingersWhenBusy: with two outcomes already waiting, the
// completer waits (up to its linger) for the three that follow 20 ms later
// and writes all five at once, instead of two writes.
func TestCompleterLingersWhenBusy(t *testing.T) {
	ctx := context.Background()
	mem, rows := claimed(t, 5)
	f := &flaky{Backend: mem}
	c := NewCompleter(f, 10, 100, time.Second, quiet, nil)
	c.Submit(done(rows[0]))
	c.Submit(done(rows[1]))
	finished := make(chan struct{})
	go func() { c.Run(ctx); close(finished) }()
	time.Sleep(20 * time.Millisecond)
	for _, r := range rows[2:] {
		c.Submit(done(r))
	}
	c.Close()
	<-finished
	if got := f.written(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("batches written %v; want one batch of 5", got)
	}
	if s, _ := mem.QueueStats(ctx); len(s) != 0 {
		t.Fatalf("jobs left after the completer flushed: %+v", s)
	}
}

// TestCompleterWritesLoneOutcomeAtOnce: a single outcome (an idle worker)
// is written without waiting out the linger.
func TestCompleterWritesLoneOutcomeAtOnce(t *testing.T) {
	ctx := context.Background()
	mem, rows := claimed(t, 1)
	f := &flaky{Backend: mem}
	c := NewCompleter(f, 10, 100, time.Hour, quiet, nil)
	finished := make(chan struct{})
	go func() { c.Run(ctx); close(finished) }()
	defer func() { c.Close(); <-finished }()
	c.Submit(done(rows[0]))
	deadline := time.Now().Add(5 * time.Second)
	for len(f.written()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a lone outcome was not written within 5s (linger is 1h)")
		}
		time.Sleep(time.Millisecond)
	}
	if s, _ := mem.QueueStats(ctx); len(s) != 0 {
		t.Fatalf("the job is still there after its outcome was written: %+v", s)
	}
}
