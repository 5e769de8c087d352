package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestCompleteCancelled: a cancel that arrives while a large batch of
// outcomes is being written ends the write with the context's error and
// writes none of them. The rows run under a context the driver does not
// watch (see JobComplete): the transaction's context must still decide.
// The batch sent again then applies once, and is stale after that.
func TestCompleteCancelled(t *testing.T) {
	t.Parallel()
	const n = 20000
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	params := make([]backend.InsertParams, n)
	for i := range params {
		params[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}
	}
	if _, err := b.JobInsertMany(t.Context(), params); err != nil {
		t.Fatalf("insert %d jobs: %v", n, err)
	}
	var outcomes []backend.Outcome
	for len(outcomes) < n {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1000, Lease: time.Hour})
		if err != nil || len(rows) == 0 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(2*time.Millisecond, cancel)
	_, err = b.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("JobComplete of %d outcomes cancelled after 2ms: %v; want context.Canceled", n, err)
	}
	var left int
	if err := b.w.QueryRowContext(t.Context(), `SELECT count(*) FROM jobs WHERE status = 'reserved'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != n {
		t.Fatalf("%d of %d jobs still reserved after the cancelled write; want all (none written)", left, n)
	}

	// The caller saw an error and nothing was written, so sending the
	// batch again applies it, once: a third send is all stale.
	for i, wantStale := range []int{0, n} {
		res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outcomes})
		if err != nil || len(res.Stale) != wantStale || len(res.Cancelled) != 0 {
			t.Fatalf("send %d of the batch after the cancelled one: %d stale, %d cancelled, %v; want %d stale",
				i+2, len(res.Stale), len(res.Cancelled), err, wantStale)
		}
	}
}
