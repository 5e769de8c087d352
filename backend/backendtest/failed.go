package backendtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testFailed: the dead-letter queue can be listed, paged, read, replayed and
// purged.
func testFailed(t *testing.T, h Harness) {
	typed := func(queue, typ string) backend.InsertParams { return job(queue, typ) }
	testReplayByType(t, h)

	parallel(t, h, "ListNewestFirstAndFilters", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b,
			typed("a", "x"), typed("a", "y"), typed("b", "x"),
			typed("b", "y"), typed("a", "x"), typed("b", "x"))
		all := failedList(t, b, backend.FailedListParams{})
		wantIDs := failedIDs(made)
		slices.Reverse(wantIDs)
		if got := failedIDs(all); !slices.Equal(got, wantIDs) {
			t.Fatalf("FailedList IDs %v, want newest first %v", got, wantIDs)
		}
		for i := 1; i < len(all); i++ {
			if all[i].JobID >= all[i-1].JobID {
				t.Fatalf("job IDs in FailedList are not newest first: %d then %d", all[i-1].JobID, all[i].JobID)
			}
		}
		check := func(f backend.FailedFilter, want ...int) {
			t.Helper()
			var w []int64
			for _, i := range want {
				w = append(w, made[i].ID)
			}
			got := failedIDs(failedList(t, b, backend.FailedListParams{Filter: f}))
			if !slices.Equal(got, w) {
				t.Errorf("FailedList(%+v) = %v, want %v", f, got, w)
			}
		}
		check(backend.FailedFilter{Queue: "a"}, 4, 1, 0)
		check(backend.FailedFilter{Type: "x"}, 5, 4, 2, 0)
		check(backend.FailedFilter{Queue: "b", Type: "x"}, 5, 2)
		check(backend.FailedFilter{Queue: "none"})
		check(backend.FailedFilter{FailedBefore: time.Now().Add(-time.Hour)})
		check(backend.FailedFilter{Queue: "b", FailedBefore: time.Now().Add(time.Hour)}, 5, 3, 2)
		if got := failedIDs(failedList(t, b, backend.FailedListParams{Limit: 2})); !slices.Equal(got, wantIDs[:2]) {
			t.Errorf("FailedList Limit 2 = %v, want %v", got, wantIDs[:2])
		}
	})

	parallel(t, h, "DefaultLimit", func(t *testing.T, b backend.Backend) {
		const n = 105
		ps := make([]backend.InsertParams, n)
		for i := range ps {
			ps[i] = job("q", "t")
		}
		insertIDs(t, b, ps...)
		rows := claim(t, b, n, longLease, "q")
		outs := make([]backend.Outcome, len(rows))
		for i, r := range rows {
			outs[i] = fail(r.Ref(), "boom")
		}
		completeFresh(t, b, outs...)
		if got := len(failedList(t, b, backend.FailedListParams{})); got != 100 {
			t.Fatalf("FailedList with Limit 0 returned %d rows, want 100", got)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Failed: n})
	})

	parallel(t, h, "Pagination", func(t *testing.T, b backend.Backend) {
		ps := make([]backend.InsertParams, 11)
		for i := range ps {
			ps[i] = typed("q", "t")
		}
		ps = append(ps, typed("other", "t"))
		made := makeFailed(t, b, ps...)
		var walked []int64
		var sizes []int
		before := int64(0)
		for page := 0; page < 10; page++ {
			rows := failedList(t, b, backend.FailedListParams{Filter: backend.FailedFilter{Queue: "q"}, Limit: 3, BeforeID: before})
			if len(rows) == 0 {
				break
			}
			sizes = append(sizes, len(rows))
			for _, r := range rows {
				if before > 0 && r.ID >= before {
					t.Fatalf("page %d holds ID %d, not below BeforeID %d", page, r.ID, before)
				}
				walked = append(walked, r.ID)
			}
			before = rows[len(rows)-1].ID
		}
		want := failedIDs(made[:11])
		slices.Reverse(want)
		if !slices.Equal(walked, want) {
			t.Fatalf("paged IDs %v, want %v", walked, want)
		}
		if !slices.Equal(sizes, []int{3, 3, 3, 2}) {
			t.Fatalf("page sizes %v, want [3 3 3 2]", sizes)
		}
	})

	parallel(t, h, "Get", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("a", "x"), typed("b", "y"))
		for _, m := range made {
			g, err := b.FailedGet(t.Context(), m.JobID)
			if err != nil {
				t.Fatalf("FailedGet(%d): %v", m.JobID, err)
			}
			if g.ID != m.ID || g.JobID != m.JobID || g.Queue != m.Queue || g.Type != m.Type ||
				!jsonEqual(g.Payload, m.Payload) || g.Attempts != m.Attempts || g.Error != m.Error {
				t.Errorf("FailedGet(%d) = %+v, want %+v", m.JobID, g, m)
			}
			near(t, "FailedAt", g.FailedAt, m.FailedAt, time.Millisecond)
		}
		if _, err := b.FailedGet(t.Context(), made[1].JobID+1000); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedGet(unknown) error = %v, want ErrNotFound", err)
		}
	})

	parallel(t, h, "OneIDForLife", func(t *testing.T, b backend.Backend) {
		// A failed job is named by its job ID, as it was while live and is
		// again once replayed; its failed record's own ID names nothing.
		// Four jobs, the last two failed newest first: on a fresh store
		// whose records count from 1 their IDs are those of the first two
		// jobs, which never failed, so no coincidence can pass this.
		ids := insertIDs(t, b, job("q", "t"), job("q", "t"), job("q", "t"), job("q", "t"))
		failJob(t, b, "q", ids[3])
		failJob(t, b, "q", ids[2])
		jobID := ids[2]
		f, err := b.FailedGet(t.Context(), jobID)
		if err != nil || f.JobID != jobID || f.Queue != "q" || f.Error != "boom" {
			t.Fatalf("FailedGet(job %d) = %+v, %v; want its failed row", jobID, f, err)
		}
		records := failedList(t, b, backend.FailedListParams{})
		failedJobs := map[int64]bool{}
		for _, r := range records {
			failedJobs[r.JobID] = true
		}
		var strays []int64 // records' own IDs that name no failed job
		for _, r := range records {
			if !failedJobs[r.ID] {
				strays = append(strays, r.ID)
			}
		}
		if len(strays) == 0 {
			t.Fatalf("every failed record's own ID %v is a failed job's: the test cannot tell them apart", failedIDs(records))
		}
		for _, id := range strays {
			if g, err := b.FailedGet(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("FailedGet(record ID %d, no failed job's) = %+v, %v; want ErrNotFound", id, g, err)
			}
			if _, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{id}}); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("FailedReplay(record ID %d) error = %v, want ErrNotFound", id, err)
			}
			if n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{IDs: []int64{id}}); err != nil || n != 0 {
				t.Errorf("FailedPurge(record ID %d) = %d, %v; want 0 purged", id, n, err)
			}
		}
		if got := len(failedList(t, b, backend.FailedListParams{})); got != 2 {
			t.Fatalf("%d failed rows after acting on records' own IDs, want both left", got)
		}

		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{jobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay(job %d) = %+v, %v; want 1 replayed", jobID, res, err)
		}
		wantPendingNow(t, b, jobID, 0)
		if g, err := b.FailedGet(t.Context(), jobID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedGet(job %d) once replayed = %+v, %v; want ErrNotFound", jobID, g, err)
		}

		failJob(t, b, "q", jobID)
		if g, err := b.FailedGet(t.Context(), jobID); err != nil || g.JobID != jobID {
			t.Fatalf("FailedGet(job %d) failed again = %+v, %v; want its new failed row", jobID, g, err)
		}
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{IDs: []int64{jobID}})
		if err != nil || n != 1 {
			t.Fatalf("FailedPurge(job %d) = %d, %v; want 1", jobID, n, err)
		}
		if g, err := b.FailedGet(t.Context(), jobID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedGet(job %d) once purged = %+v, %v; want ErrNotFound", jobID, g, err)
		}
		gone(t, b, jobID)
		if left := failedList(t, b, backend.FailedListParams{}); len(left) != 1 || left[0].JobID != ids[3] {
			t.Fatalf("failed rows left %+v, want job %d's alone", left, ids[3])
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2, Failed: 1})
	})

	parallel(t, h, "ReplayByIDs", func(t *testing.T, b backend.Backend) {
		p := job("mail", "email")
		p.Payload = []byte(`{"to":"y"}`)
		p.Priority = -2
		p.MaxAttempts = 9
		p.UniqueKey = "mail:y"
		made := makeFailed(t, b, p, typed("mail", "other"), typed("mail", "third"))
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[0].JobID, made[2].JobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 2}) {
			t.Fatalf("FailedReplay = %+v, %v; want 2 replayed", res, err)
		}
		for _, m := range []*backend.FailedJob{made[0], made[2]} {
			row := wantPendingNow(t, b, m.JobID, 0)
			if row.Queue != m.Queue || row.Type != m.Type || !jsonEqual(row.Payload, m.Payload) ||
				row.Priority != m.Priority || row.MaxAttempts != m.MaxAttempts || row.UniqueKey != m.UniqueKey {
				t.Errorf("replayed job %+v does not match failed row %+v", row, m)
			}
			if _, err := b.FailedGet(t.Context(), m.JobID); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("FailedGet(%d) after replay: %v, want ErrNotFound", m.JobID, err)
			}
		}
		if row := get(t, b, made[0].JobID); row.Priority != -2 || row.MaxAttempts != 9 || row.UniqueKey != "mail:y" {
			t.Errorf("replayed job priority %d max %d key %q", row.Priority, row.MaxAttempts, row.UniqueKey)
		}
		gone(t, b, made[1].JobID)
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, []int64{made[1].ID}) {
			t.Fatalf("failed rows left %v, want [%d]", left, made[1].ID)
		}
		wantStats(t, b, backend.QueueStats{Queue: "mail", Pending: 2, Failed: 1})
		// The replayed job holds its unique key again.
		dup := insert(t, b, p)
		if !dup[0].Duplicate || dup[0].ID != made[0].JobID {
			t.Fatalf("insert after replay = %+v, want Duplicate of %d", dup[0], made[0].JobID)
		}
		rows := claim(t, b, 10, longLease, "mail")
		if got, want := sortedIDs(rows), []int64{made[0].JobID, made[2].JobID}; !slices.Equal(got, want) {
			t.Fatalf("claim after replay got %v, want %v", got, want)
		}
		for _, r := range rows {
			if r.Attempts != 1 {
				t.Errorf("replayed job %d claimed with attempts %d, want 1", r.ID, r.Attempts)
			}
		}
	})

	parallel(t, h, "ReplayByFilter", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("a", "x"), typed("b", "x"), typed("a", "y"), typed("a", "x"))
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "a", Type: "x"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 2}) {
			t.Fatalf("FailedReplay(a, x) = %+v, %v; want 2 replayed", res, err)
		}
		wantPendingNow(t, b, made[0].JobID, 0)
		wantPendingNow(t, b, made[3].JobID, 0)
		gone(t, b, made[1].JobID)
		gone(t, b, made[2].JobID)
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{FailedBefore: time.Now().Add(-time.Hour)}})
		if err != nil || !sameReplay(res, backend.ReplayResult{}) {
			t.Fatalf("FailedReplay(failed before an hour ago) = %+v, %v; want nothing", res, err)
		}
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 2}) {
			t.Fatalf("FailedReplay(all) = %+v, %v; want 2 replayed", res, err)
		}
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("%d failed rows left after replaying all", len(f))
		}
		wantStats(t, b, backend.QueueStats{Queue: "a", Pending: 3})
		wantStats(t, b, backend.QueueStats{Queue: "b", Pending: 1})
	})

	parallel(t, h, "ReplayUnknown", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("q", "t"))
		_, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[0].JobID + 1000}})
		if !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedReplay(unknown) error = %v, want ErrNotFound", err)
		}
		gone(t, b, made[0].JobID)
		failedByJob(t, b, made[0].JobID)
	})

	parallel(t, h, "ReplayKnownAndUnknownMovesNothing", func(t *testing.T, b backend.Backend) {
		// A replay naming an unknown ID is refused whole: the known job
		// named with it stays in failed_jobs.
		made := makeFailed(t, b, typed("q", "t"))
		_, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[0].JobID, made[0].JobID + 1000}})
		if !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("FailedReplay(known, unknown) error = %v, want ErrNotFound", err)
		}
		gone(t, b, made[0].JobID)
		failedByJob(t, b, made[0].JobID)
	})

	parallel(t, h, "ReplaySkipsHeldUniqueKey", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.UniqueKey = "only-one"
		made := makeFailed(t, b, p)
		live := insertOne(t, b, p)
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[0].JobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Skipped: 1}) {
			t.Fatalf("FailedReplay = %+v, %v; want 1 skipped", res, err)
		}
		gone(t, b, made[0].JobID)
		failedByJob(t, b, made[0].JobID)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1, Failed: 1})

		completeFresh(t, b, done(claimOne(t, b, "q").Ref()))
		gone(t, b, live)
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay once the key is free = %+v, %v; want 1 replayed", res, err)
		}
		wantPendingNow(t, b, made[0].JobID, 0)
	})

	parallel(t, h, "PurgeByIDs", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("q", "t"), typed("q", "t"), typed("q", "t"))
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{IDs: []int64{made[0].JobID, made[2].JobID, made[2].JobID + 1000}})
		if err != nil || n != 2 {
			t.Fatalf("FailedPurge(ids) = %d, %v; want 2", n, err)
		}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, []int64{made[1].ID}) {
			t.Fatalf("failed rows left %v, want [%d]", left, made[1].ID)
		}
		gone(t, b, made[0].JobID)
		wantStats(t, b, backend.QueueStats{Queue: "q", Failed: 1})
	})

	parallel(t, h, "PurgeByFilter", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("a", "x"), typed("b", "x"), typed("a", "y"), typed("b", "y"))
		purge := func(f backend.FailedFilter, want int) {
			t.Helper()
			n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: f})
			if err != nil || n != want {
				t.Fatalf("FailedPurge(%+v) = %d, %v; want %d", f, n, err, want)
			}
		}
		purge(backend.FailedFilter{Queue: "a", Type: "y"}, 1)
		purge(backend.FailedFilter{Type: "x"}, 2)
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, []int64{made[3].ID}) {
			t.Fatalf("failed rows left %v, want [%d]", left, made[3].ID)
		}
		wantStats(t, b, backend.QueueStats{Queue: "a"})
		wantStats(t, b, backend.QueueStats{Queue: "b", Failed: 1})
	})

	parallel(t, h, "PurgeFailedBefore", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("a", "t"), typed("b", "t"), typed("a", "t"))
		earliest := made[0].FailedAt
		for _, m := range made {
			if m.FailedAt.Before(earliest) {
				earliest = m.FailedAt
			}
		}
		purge := func(f backend.FailedFilter, want int) {
			t.Helper()
			n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: f})
			if err != nil || n != want {
				t.Fatalf("FailedPurge(%+v) = %d, %v; want %d", f, n, err, want)
			}
		}
		purge(backend.FailedFilter{FailedBefore: time.Now().Add(-time.Hour)}, 0)
		purge(backend.FailedFilter{FailedBefore: earliest}, 0)
		purge(backend.FailedFilter{Queue: "a", FailedBefore: time.Now().Add(time.Hour)}, 2)
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, []int64{made[1].ID}) {
			t.Fatalf("failed rows left %v, want [%d]", left, made[1].ID)
		}
	})

	parallel(t, h, "PurgeKeepNewest", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("q", "t"), typed("q", "t"), typed("q", "t"), typed("q", "t"), typed("q", "t"))
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: 2})
		if err != nil || n != 3 {
			t.Fatalf("FailedPurge(keep 2 of 5) = %d, %v; want 3", n, err)
		}
		want := []int64{made[4].ID, made[3].ID}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want) {
			t.Fatalf("failed rows left %v, want the 2 newest %v", left, want)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Failed: 2})
		// Already at the bound: a second call deletes nothing.
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: 2})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(keep 2 of 2) = %d, %v; want 0", n, err)
		}
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: 1})
		if err != nil || n != 1 {
			t.Fatalf("FailedPurge(keep 1 of 2) = %d, %v; want 1", n, err)
		}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want[:1]) {
			t.Fatalf("failed rows left %v, want %v", left, want[:1])
		}
	})

	parallel(t, h, "PurgeKeepNewestByFilter", func(t *testing.T, b backend.Backend) {
		// a: 0 2 4 5 6, b: 1 3 (b's are older than a's newest, so a count
		// over all queues would keep different rows).
		made := makeFailed(t, b, typed("a", "x"), typed("b", "x"), typed("a", "x"), typed("b", "x"),
			typed("a", "y"), typed("a", "x"), typed("a", "y"))
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "a", Type: "x"}, KeepNewest: 1})
		if err != nil || n != 2 {
			t.Fatalf("FailedPurge(a, x, keep 1) = %d, %v; want 2", n, err)
		}
		want := []int64{made[6].ID, made[5].ID, made[4].ID, made[3].ID, made[1].ID}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want) {
			t.Fatalf("failed rows left %v, want %v", left, want)
		}
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "a"}, KeepNewest: 2})
		if err != nil || n != 1 {
			t.Fatalf("FailedPurge(a, keep 2) = %d, %v; want 1", n, err)
		}
		want = []int64{made[6].ID, made[5].ID, made[3].ID, made[1].ID}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want) {
			t.Fatalf("failed rows left %v, want %v", left, want)
		}
		wantStats(t, b, backend.QueueStats{Queue: "a", Failed: 2})
		wantStats(t, b, backend.QueueStats{Queue: "b", Failed: 2})
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "none"}, KeepNewest: 1})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(no match, keep 1) = %d, %v; want 0", n, err)
		}
		// FailedBefore narrows the counted rows too: nothing failed an hour
		// ago, so nothing is counted and nothing goes.
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{FailedBefore: time.Now().Add(-time.Hour)}, KeepNewest: 1})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(failed before an hour ago, keep 1) = %d, %v; want 0", n, err)
		}
	})

	parallel(t, h, "PurgeKeepNewestMoreThanCount", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("q", "t"), typed("q", "t"), typed("q", "t"))
		for _, keep := range []int{3, 4, 1000} {
			n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: keep})
			if err != nil || n != 0 {
				t.Fatalf("FailedPurge(keep %d of 3) = %d, %v; want 0", keep, n, err)
			}
		}
		want := failedIDs(made)
		slices.Reverse(want)
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want) {
			t.Fatalf("failed rows left %v, want all %v", left, want)
		}
	})

	parallel(t, h, "PurgeKeepNewestInvalid", func(t *testing.T, b backend.Backend) {
		made := makeFailed(t, b, typed("q", "t"), typed("q", "t"))
		for _, p := range []backend.FailedPurgeParams{
			{IDs: []int64{made[0].JobID}, KeepNewest: 1},
			{KeepNewest: -1},
			{Filter: backend.FailedFilter{Queue: "q"}, KeepNewest: -5},
		} {
			n, err := b.FailedPurge(t.Context(), p)
			var ie *backend.InputError
			if !errors.Is(err, backend.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "keep newest" {
				t.Fatalf("FailedPurge(%+v) = %d, %v; want an InputError on \"keep newest\"", p, n, err)
			}
			if n != 0 {
				t.Errorf("FailedPurge(%+v) refused but reported %d purged", p, n)
			}
		}
		want := []int64{made[1].ID, made[0].ID}
		if left := failedIDs(failedList(t, b, backend.FailedListParams{})); !slices.Equal(left, want) {
			t.Fatalf("failed rows left %v after refused purges, want %v", left, want)
		}
	})

	parallel(t, h, "PurgeAll", func(t *testing.T, b backend.Backend) {
		makeFailed(t, b, typed("a", "x"), typed("b", "y"), typed("c", "z"))
		n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{})
		if err != nil || n != 3 {
			t.Fatalf("FailedPurge(all) = %d, %v; want 3", n, err)
		}
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("%d failed rows left after purging all", len(f))
		}
		wantNoStats(t, b)
		n, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{})
		if err != nil || n != 0 {
			t.Fatalf("FailedPurge(all) on nothing = %d, %v; want 0", n, err)
		}
	})
}
