package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testOlderThan: FailedFilter.OlderThan selects failed jobs by their age on
// the backend's clock, for list, replay and purge alike; with FailedBefore
// the earlier cutoff wins; a negative age is refused.
func testOlderThan(t *testing.T, h Harness) {
	// aged fails the jobs ps and waits until the backend sees them all as
	// older than a millisecond (its clock, not the test's).
	aged := func(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []*backend.FailedJob {
		t.Helper()
		made := makeFailed(t, b, ps...)
		eventually(t, waitLimit, "the failed jobs to be older than 1ms", func() bool {
			return len(failedList(t, b, backend.FailedListParams{Filter: backend.FailedFilter{OlderThan: time.Millisecond}})) == len(made)
		})
		return made
	}

	parallel(t, h, "ListReplayPurge", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, job("a", "t"), job("a", "t"), job("b", "t"))
		// Just failed: not older than an hour, for any of the three calls.
		hour := backend.FailedFilter{OlderThan: time.Hour}
		if got := failedList(t, b, backend.FailedListParams{Filter: hour}); len(got) != 0 {
			t.Fatalf("FailedList(older than 1h) right after failing = %v, want none", failedIDs(got))
		}
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: hour})
		if err != nil || !sameReplay(res, backend.ReplayResult{}) {
			t.Fatalf("FailedReplay(older than 1h) = %+v, %v; want nothing", res, err)
		}
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: hour})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(older than 1h) = %d, %v; want 0", n, err)
		}
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: hour, KeepNewest: 1})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(older than 1h, keep 1) = %d, %v; want 0", n, err)
		}
		all := failedIDs(made)
		slices.Reverse(all)
		if got := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(got, all) {
			t.Fatalf("failed rows %v after calls that matched nothing, want %v", got, all)
		}

		// A moment later they are older than a millisecond.
		eventually(t, waitLimit, "the failed jobs to be older than 1ms", func() bool {
			return len(failedList(t, b, backend.FailedListParams{Filter: backend.FailedFilter{OlderThan: time.Millisecond}})) == 3
		})
		ms := func(queue string) backend.FailedFilter {
			return backend.FailedFilter{Queue: queue, OlderThan: time.Millisecond}
		}
		if got := failedIDs(failedList(t, b, backend.FailedListParams{Filter: ms("a")})); !slices.Equal(got, []int64{made[1].ID, made[0].ID}) {
			t.Fatalf("FailedList(a, older than 1ms) = %v, want %v", got, []int64{made[1].ID, made[0].ID})
		}
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: ms("b")})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay(b, older than 1ms) = %+v, %v; want 1 replayed", res, err)
		}
		wantPendingNow(t, b, made[2].JobID, 0)
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: ms(""), KeepNewest: 1})
		if err != nil || n != 1 {
			t.Fatalf("FailedPurge(older than 1ms, keep 1) = %d, %v; want 1", n, err)
		}
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: ms("")})
		if err != nil || n != 1 {
			t.Fatalf("FailedPurge(older than 1ms) = %d, %v; want 1", n, err)
		}
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("failed rows %v left, want none", failedIDs(f))
		}
		wantStats(t, b, backend.QueueStats{Queue: "b", Pending: 1})
	})

	parallel(t, h, "EarlierCutoffWins", func(t *testing.T, b backend.Backend) {
		made := aged(t, b, job("q", "t"), job("q", "t"))
		all := []int64{made[1].ID, made[0].ID}
		soon, past := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
		for _, tc := range []struct {
			f    backend.FailedFilter
			want []int64
		}{
			// now - 1ms is earlier than an hour from now: both match.
			{backend.FailedFilter{FailedBefore: soon, OlderThan: time.Millisecond}, all},
			// now - 1h is earlier than an hour from now: none match.
			{backend.FailedFilter{FailedBefore: soon, OlderThan: time.Hour}, nil},
			// an hour ago is earlier than now - 1ms: none match.
			{backend.FailedFilter{FailedBefore: past, OlderThan: time.Millisecond}, nil},
		} {
			if got := failedIDs(failedList(t, b, backend.FailedListParams{Filter: tc.f})); !slices.Equal(got, tc.want) {
				t.Errorf("FailedList(%+v) = %v, want %v", tc.f, got, tc.want)
			}
			if tc.want != nil {
				continue
			}
			res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: tc.f})
			if err != nil || !sameReplay(res, backend.ReplayResult{}) {
				t.Errorf("FailedReplay(%+v) = %+v, %v; want nothing", tc.f, res, err)
			}
			n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: tc.f})
			if err != nil || n != 0 {
				t.Errorf("FailedPurge(%+v) = %d, %v; want 0", tc.f, n, err)
			}
		}
		if got := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(got, all) {
			t.Fatalf("failed rows %v, want %v untouched", got, all)
		}
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{FailedBefore: soon, OlderThan: time.Millisecond}})
		if err != nil || n != 2 {
			t.Fatalf("FailedPurge(before in an hour, older than 1ms) = %d, %v; want 2", n, err)
		}
	})

	parallel(t, h, "NegativeRefused", func(t *testing.T, b backend.Backend) {
		made := aged(t, b, job("q", "t"), job("q", "t"))
		neg := backend.FailedFilter{OlderThan: -time.Hour}
		rows, err := b.FailedList(t.Context(), backend.FailedListParams{Filter: neg})
		if len(rows) != 0 {
			t.Errorf("FailedList(older than -1h) returned %d rows", len(rows))
		}
		wantInvalid(t, err, "older than")
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: neg})
		if !sameReplay(res, backend.ReplayResult{}) {
			t.Errorf("refused FailedReplay reported %+v", res)
		}
		wantInvalid(t, err, "older than")
		for _, p := range []backend.FailedPurgeParams{{Filter: neg}, {Filter: neg, KeepNewest: 1}} {
			n, err := b.FailedPurge(t.Context(), p)
			if n != 0 {
				t.Errorf("refused FailedPurge(%+v) reported %d purged", p, n)
			}
			wantInvalid(t, err, "older than")
		}
		want := []int64{made[1].ID, made[0].ID}
		if got := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(got, want) {
			t.Fatalf("failed rows %v after refused calls, want %v", got, want)
		}
		gone(t, b, made[0].JobID)
		gone(t, b, made[1].JobID)
	})
}
