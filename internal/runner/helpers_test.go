package runner

import (
	"context"
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

// logLines is a logger whose lines a test can read.
type logLines struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// insertJobs inserts n jobs on queue "q" of b, each allowed one attempt.
func insertJobs(t *testing.T, b backend.Backend, n int) []int64 {
	t.Helper()
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}
	}
	res, err := b.JobInsertMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// newMemory returns a memory backend closed when the test ends. Inside a
// synctest bubble its clock is the bubble's.
func newMemory(t *testing.T) *memory.Backend {
	t.Helper()
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { mem.Close() })
	return mem
}

// claimed inserts n jobs into a fresh memory backend and claims them all
// with lease.
func claimed(t *testing.T, n int, lease time.Duration) (*memory.Backend, []*backend.JobRow) {
	t.Helper()
	mem := newMemory(t)
	insertJobs(t, mem, n)
	rows, err := mem.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"q"}, Max: n, Lease: lease})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	return mem, rows
}

func done(r *backend.JobRow) Item {
	return Item{Outcome: backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}, Queue: r.Queue, Type: r.Type}
}

func retryItem(r *backend.JobRow, msg string) Item {
	return Item{Outcome: backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeRetry, Error: msg}, Queue: r.Queue, Type: r.Type}
}

func release(r *backend.JobRow) Item {
	return Item{Outcome: backend.Outcome{Ref: r.Ref()}, Release: true, Queue: r.Queue, Type: r.Type}
}

// queueEmpty reports whether b holds no live job and no failed one.
func queueEmpty(t *testing.T, b backend.Backend) bool {
	t.Helper()
	s, err := b.QueueStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(s) == 0
}

// recorder wraps a backend, records the calls the runner makes and lets a
// test make them fail.
type recorder struct {
	backend.Backend
	mu sync.Mutex
	// completeErr, when set, decides the error of a JobComplete call
	// (nil lets it through); call counts from 1.
	completeErr func(call int, p backend.CompleteParams) error
	releaseErr  func(call int) error
	extendErr   func(call int) error
	completes   []backend.CompleteParams
	releases    [][]backend.JobRef
	extends     [][]backend.JobRef
}

func (r *recorder) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	r.mu.Lock()
	r.completes = append(r.completes, p)
	n, fn := len(r.completes), r.completeErr
	r.mu.Unlock()
	if fn != nil {
		if err := fn(n, p); err != nil {
			return backend.CompleteResult{}, err
		}
	}
	return r.Backend.JobComplete(ctx, p)
}

func (r *recorder) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	r.mu.Lock()
	r.releases = append(r.releases, refs)
	n, fn := len(r.releases), r.releaseErr
	r.mu.Unlock()
	if fn != nil {
		if err := fn(n); err != nil {
			return backend.CompleteResult{}, err
		}
	}
	return r.Backend.JobRelease(ctx, refs)
}

func (r *recorder) JobExtendLease(ctx context.Context, p backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	r.mu.Lock()
	r.extends = append(r.extends, p.Refs)
	n, fn := len(r.extends), r.extendErr
	r.mu.Unlock()
	if fn != nil {
		if err := fn(n); err != nil {
			return nil, err
		}
	}
	return r.Backend.JobExtendLease(ctx, p)
}

// batchSizes lists the sizes of the JobComplete calls made.
func (r *recorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int, len(r.completes))
	for i, p := range r.completes {
		out[i] = len(p.Outcomes)
	}
	return out
}

// sentTimes counts how often an outcome for ref was sent to JobComplete.
func (r *recorder) sentTimes(ref backend.JobRef) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.completes {
		for _, o := range p.Outcomes {
			if o.Ref == ref {
				n++
			}
		}
	}
	return n
}

func (r *recorder) extendCalls() [][]backend.JobRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]backend.JobRef(nil), r.extends...)
}

// start runs fn in a goroutine and returns a function that waits for it.
func start(fn func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return func() { <-done }
}
