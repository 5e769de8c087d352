package memory_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend { return memory.New(memory.Options{}) },
	})
}

func TestOpenURL(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"memory:", "memory://", "MEMORY:"} {
		b, err := backend.Open(t.Context(), url)
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if _, ok := b.(*memory.Backend); !ok {
			t.Fatalf("Open(%q) returned %T", url, b)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := backend.Open(t.Context(), "memory:jobs.db"); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("Open(memory:jobs.db) error = %v, want ErrInvalidInput", err)
	}
}

// TestOpenExistingRefused checks that memory: refuses OpenOptions.Existing:
// there is never an existing store to read, so a read-only command must not
// print zeros from an empty one.
func TestOpenExistingRefused(t *testing.T) {
	t.Parallel()
	b, err := backend.OpenWith(t.Context(), "memory:", backend.OpenOptions{Existing: true})
	if b != nil {
		b.Close()
	}
	var ie *backend.InputError
	if !errors.As(err, &ie) || !errors.Is(err, backend.ErrInvalidInput) || b != nil {
		t.Fatalf("OpenWith(memory:, Existing) = %v, %v; want nil and an InputError", b, err)
	}
	if !strings.Contains(err.Error(), "sqlite:") {
		t.Errorf("error %q does not say what to use instead", err)
	}
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newFakeClocked returns a backend on a fake clock, closed when the test
// ends.
func newFakeClocked(t *testing.T) (*memory.Backend, *fakeClock) {
	clock := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := memory.New(memory.Options{Now: clock.Now})
	t.Cleanup(func() { b.Close() })
	return b, clock
}

// TestFakeClock checks that every time the backend uses comes from
// Options.Now: due times, leases, backoff and failed_at.
func TestFakeClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, clock := newFakeClocked(t)

	claim := func(lease time.Duration) []*backend.JobRow {
		t.Helper()
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	res, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 2, Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].ID
	row, _ := b.JobGet(ctx, id)
	if !row.CreatedAt.Equal(clock.Now()) || !row.AvailableAt.Equal(clock.Now().Add(time.Hour)) {
		t.Fatalf("created %v available %v, want clock times", row.CreatedAt, row.AvailableAt)
	}
	if rows := claim(time.Minute); len(rows) != 0 {
		t.Fatalf("claimed a job due in an hour")
	}
	clock.Add(time.Hour)
	rows := claim(time.Minute)
	if len(rows) != 1 || !rows[0].LeaseUntil.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("claim after the delay = %+v, want one job leased for a minute", rows)
	}

	// Backoff follows the fake clock.
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeRetry, RetryDelay: 10 * time.Second}}}); err != nil {
		t.Fatal(err)
	}
	if rows := claim(time.Minute); len(rows) != 0 {
		t.Fatalf("claimed a job backing off")
	}
	clock.Add(10 * time.Second)
	rows = claim(time.Minute)
	if len(rows) != 1 || rows[0].Attempts != 2 {
		t.Fatalf("claim after backoff = %+v, want attempt 2", rows)
	}

	// The lease expires only when the fake clock passes it.
	if sw, _ := b.LeaseSweep(ctx, backend.SweepParams{}); sw.Rescued+sw.Failed != 0 || len(sw.Jobs) != 0 {
		t.Fatalf("sweep before expiry = %+v", sw)
	}
	clock.Add(time.Minute + time.Nanosecond)
	if sw, _ := b.LeaseSweep(ctx, backend.SweepParams{}); sw.Rescued != 0 || sw.Failed != 1 {
		t.Fatalf("sweep after expiry = %+v, want 1 failed (attempts spent)", sw)
	}
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(failed) != 1 || !failed[0].FailedAt.Equal(clock.Now()) {
		t.Fatalf("FailedList = %+v, %v; want one row failed at the clock's time", failed, err)
	}
}

// TestOlderThanFakeClock checks that FailedFilter.OlderThan is measured on
// Options.Now for list, replay and purge: a job that failed at the fake
// clock's time is older than an hour only once the fake clock has moved.
func TestOlderThanFakeClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, clock := newFakeClocked(t)

	// failJobs inserts and fails n jobs of queue at the clock's time.
	failJobs := func(queue string, n int) {
		t.Helper()
		ps := make([]backend.InsertParams, n)
		for i := range ps {
			ps[i] = backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
		}
		if _, err := b.JobInsertMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Minute})
		if err != nil || len(rows) != n {
			t.Fatalf("claim = %d rows, %v; want %d", len(rows), err, n)
		}
		var outs []backend.Outcome
		for _, r := range rows {
			outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"})
		}
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f backend.FailedFilter) []string {
		t.Helper()
		rows, err := b.FailedList(ctx, backend.FailedListParams{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var queues []string
		for _, r := range rows {
			queues = append(queues, r.Queue)
		}
		return queues
	}
	hour := backend.FailedFilter{OlderThan: time.Hour}

	failJobs("old", 2)
	// Exactly an hour later the old jobs are not yet "more than" an hour old.
	clock.Add(time.Hour)
	failJobs("new", 1)
	if got := list(hour); len(got) != 0 {
		t.Fatalf("older than 1h at exactly 1h = %v, want none", got)
	}
	clock.Add(time.Nanosecond)
	if got := list(hour); !slices.Equal(got, []string{"old", "old"}) {
		t.Fatalf("older than 1h = %v, want the two old jobs", got)
	}
	// FailedBefore further back wins over OlderThan.
	if got := list(backend.FailedFilter{OlderThan: time.Hour, FailedBefore: clock.Now().Add(-2 * time.Hour)}); len(got) != 0 {
		t.Fatalf("older than 1h and failed 2h before = %v, want none", got)
	}
	res, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: hour})
	if err != nil || res.Replayed != 2 || res.Skipped != 0 {
		t.Fatalf("replay older than 1h = %+v, %v; want 2 replayed", res, err)
	}
	clock.Add(time.Hour)
	n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: hour})
	if err != nil || n != 1 {
		t.Fatalf("purge older than 1h an hour later = %d, %v; want the new job", n, err)
	}
	if got := list(backend.FailedFilter{}); len(got) != 0 {
		t.Fatalf("failed jobs left: %v", got)
	}
}

// TestClaimManyPending checks that claims stay cheap with a deep queue: the
// per-queue heap makes draining 50,000 jobs linearithmic overall.
func TestClaimManyPending(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := memory.New(memory.Options{})
	defer b.Close()
	const n = 50_000
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, Priority: i % 7}
	}
	if _, err := b.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	claimed, lastPrio := 0, 1<<30
	for {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if r.Priority > lastPrio {
				t.Fatalf("job %d priority %d claimed after priority %d", r.ID, r.Priority, lastPrio)
			}
			lastPrio = r.Priority
		}
		claimed += len(rows)
	}
	if claimed != n {
		t.Fatalf("claimed %d jobs, want %d", claimed, n)
	}
	t.Logf("claimed %d jobs in %s", n, time.Since(start))
}

func BenchmarkClaimDeepQueue(b *testing.B) {
	ctx := b.Context()
	be := memory.New(memory.Options{})
	defer be.Close()
	ps := make([]backend.InsertParams, 50_000)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	if _, err := be.JobInsertMany(ctx, ps); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			b.Fatal(rows, err)
		}
		if _, err := be.JobRelease(ctx, []backend.JobRef{rows[0].Ref()}); err != nil {
			b.Fatal(err)
		}
	}
}
