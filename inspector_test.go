package jobq_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// failJobs puts one job per queue into failed_jobs, in order, through the
// backend's lifecycle, and returns their failed-jobs IDs.
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
		ids = append(ids, page[0].ID)
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
			out[i] = j.ID
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
