package jobq_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// failJobs puts one job per queue into failed_jobs, in order, through the
// backend's lifecycle, and returns their job IDs, which name them.
func failJobs(t *testing.T, b backend.Backend, queues ...string) []int64 {
	t.Helper()
	ctx := t.Context()
	ids := make([]int64, 0, len(queues))
	for _, q := range queues {
		if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: q, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}); err != nil {
			t.Fatal(err)
		}
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{q}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim %s: %v, %d rows", q, err, len(rows))
		}
		out := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "boom"}
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
			t.Fatal(err)
		}
		page, err := b.FailedList(ctx, backend.FailedListParams{Limit: 1})
		if err != nil || len(page) != 1 {
			t.Fatalf("list failed: %v", err)
		}
		ids = append(ids, page[0].JobID)
	}
	return ids
}

func TestFailedPurgeKeepNewest(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	ids := failJobs(t, b, "a", "b", "a", "a", "b", "a")
	in := jobq.NewInspector(b)
	left := func() []int64 {
		t.Helper()
		page, err := in.FailedPage(t.Context(), jobq.FailedFilter{}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(page))
		for i, j := range page {
			out[i] = j.JobID
		}
		return out
	}

	n, err := in.PurgeKeepNewest(t.Context(), jobq.FailedFilter{Queue: "a"}, 2)
	if err != nil || n != 2 {
		t.Fatalf("PurgeKeepNewest(a, 2) = %d, %v; want 2", n, err)
	}
	if got, want := left(), []int64{ids[5], ids[4], ids[3], ids[1]}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	n, err = in.PurgeKeepNewest(t.Context(), jobq.FailedFilter{}, 10)
	if err != nil || n != 0 {
		t.Fatalf("PurgeKeepNewest(all, 10) = %d, %v; want 0", n, err)
	}
	n, err = in.PurgeKeepNewest(t.Context(), jobq.FailedFilter{}, 1)
	if err != nil || n != 3 {
		t.Fatalf("PurgeKeepNewest(all, 1) = %d, %v; want 3", n, err)
	}
	if got, want := left(), []int64{ids[5]}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	for _, keep := range []int{0, -1} {
		if n, err := in.PurgeKeepNewest(t.Context(), jobq.FailedFilter{}, keep); !errors.Is(err, jobq.ErrInvalidInput) || n != 0 {
			t.Fatalf("PurgeKeepNewest(keep %d) = %d, %v; want ErrInvalidInput", keep, n, err)
		}
	}
	if got := left(); len(got) != 1 {
		t.Fatalf("refused purges deleted rows: left %v", got)
	}
}

// failedCount counts failed jobs through the inspector, as an operator
// would see them.
func failedCount(t *testing.T, in *jobq.Inspector) int64 {
	t.Helper()
	stats, err := in.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return jobq.Totals(stats).Failed
}

// TestPurgeIDs: the listed jobs go and no others; an empty list, the
// mistake of passing ids... from an empty slice, deletes nothing.
func TestPurgeIDs(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	ids := failJobs(t, b, "a", "b", "c", "a")
	in := jobq.NewInspector(b)

	var none []int64
	if n, err := in.PurgeIDs(t.Context(), none...); !errors.Is(err, jobq.ErrInvalidInput) || n != 0 {
		t.Fatalf("PurgeIDs(no IDs) = %d, %v; want 0 and ErrInvalidInput", n, err)
	}
	if got := failedCount(t, in); got != 4 {
		t.Fatalf("an empty ID list left %d failed jobs, want all 4", got)
	}

	n, err := in.PurgeIDs(t.Context(), ids[0], ids[2], ids[2]+1000)
	if err != nil || n != 2 {
		t.Fatalf("PurgeIDs(two known, one unknown) = %d, %v; want 2", n, err)
	}
	page, err := in.FailedPage(t.Context(), jobq.FailedFilter{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var left []int64
	for _, j := range page {
		left = append(left, j.JobID)
	}
	if want := []int64{ids[3], ids[1]}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// TestPurgeMatchingRefusesEverything: a selection that would match every
// failed job is refused with a hint naming PurgeAll, and nothing goes;
// a real filter deletes just its matches.
func TestPurgeMatchingRefusesEverything(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	failJobs(t, b, "a", "b", "a")
	in := jobq.NewInspector(b)

	for name, f := range map[string]jobq.FailedFilter{
		"zero filter": {},
		// The zero instant in another location is still "unset" to a
		// backend, so it must not count as a filter.
		"zero time elsewhere": {FailedBefore: time.Time{}.In(time.FixedZone("X", 3600))},
	} {
		n, err := in.PurgeMatching(t.Context(), f, 0)
		if !errors.Is(err, jobq.ErrInvalidInput) || n != 0 || !strings.Contains(err.Error(), "PurgeAll") {
			t.Fatalf("PurgeMatching(%s, 0) = %d, %v; want 0 and ErrInvalidInput naming PurgeAll", name, n, err)
		}
	}
	if n, err := in.PurgeMatching(t.Context(), jobq.FailedFilter{Queue: "a"}, -time.Second); !errors.Is(err, jobq.ErrInvalidInput) || n != 0 {
		t.Fatalf("PurgeMatching(a, -1s) = %d, %v; want 0 and ErrInvalidInput", n, err)
	}
	if got := failedCount(t, in); got != 3 {
		t.Fatalf("refused purges left %d failed jobs, want all 3", got)
	}

	// An age alone is a selection: none failed an hour ago.
	if n, err := in.PurgeMatching(t.Context(), jobq.FailedFilter{}, time.Hour); err != nil || n != 0 {
		t.Fatalf("PurgeMatching(older than 1h) = %d, %v; want 0", n, err)
	}
	if n, err := in.PurgeMatching(t.Context(), jobq.FailedFilter{Queue: "a"}, 0); err != nil || n != 2 {
		t.Fatalf("PurgeMatching(queue a) = %d, %v; want 2", n, err)
	}
	page, err := in.FailedPage(t.Context(), jobq.FailedFilter{}, 0, 0)
	if err != nil || len(page) != 1 || page[0].Queue != "b" {
		t.Fatalf("after purging queue a: %v, %v; want the one job of b", page, err)
	}
}

// TestPurgeAll: asked for by name, every failed job goes.
func TestPurgeAll(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	failJobs(t, b, "a", "b", "c")
	in := jobq.NewInspector(b)

	if n, err := in.PurgeAll(t.Context()); err != nil || n != 3 {
		t.Fatalf("PurgeAll = %d, %v; want 3", n, err)
	}
	if got := failedCount(t, in); got != 0 {
		t.Fatalf("PurgeAll left %d failed jobs", got)
	}
	if n, err := in.PurgeAll(t.Context()); err != nil || n != 0 {
		t.Fatalf("PurgeAll of nothing = %d, %v; want 0", n, err)
	}
}
