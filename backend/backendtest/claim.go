package backendtest

import (
	"cmp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testClaim: JobClaim hands each due job to one caller, best first, and only
// from the named queues.
func testClaim(t *testing.T, h Harness) {
	parallel(t, h, "ExclusiveUnderConcurrency", func(t *testing.T, b backend.Backend) {
		const jobs, workers, batch = 500, 8, 7
		ps := make([]backend.InsertParams, jobs)
		for i := range ps {
			ps[i] = job("q", "t")
		}
		want := insertIDs(t, b, ps...)

		var mu sync.Mutex
		seen := make(map[int64]int, jobs)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: batch, Lease: longLease})
					if err != nil {
						t.Errorf("JobClaim: %v", err)
						return
					}
					if len(rows) > batch {
						t.Errorf("JobClaim returned %d rows, Max is %d", len(rows), batch)
					}
					if len(rows) == 0 {
						return
					}
					mu.Lock()
					for _, r := range rows {
						seen[r.ID]++
						if r.Attempts != 1 || r.Status != backend.StatusReserved {
							t.Errorf("claimed job %d: attempts %d status %q, want 1 reserved", r.ID, r.Attempts, r.Status)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, id := range want {
			if seen[id] != 1 {
				t.Errorf("job %d claimed %d times, want exactly once", id, seen[id])
			}
		}
		if len(seen) != jobs {
			t.Errorf("claimed %d distinct jobs, want %d", len(seen), jobs)
		}
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: jobs})
	})

	parallel(t, h, "PriorityThenID", func(t *testing.T, b backend.Backend) {
		prios := []int{0, 5, -3, 5, 10, 0, backend.MinPriority, backend.MaxPriority}
		ps := make([]backend.InsertParams, len(prios))
		for i, p := range prios {
			ps[i] = job("q", "t")
			ps[i].Priority = p
		}
		ids := insertIDs(t, b, ps...)
		type jp struct {
			id   int64
			prio int
		}
		order := make([]jp, len(ids))
		for i := range ids {
			order[i] = jp{ids[i], prios[i]}
		}
		slices.SortFunc(order, func(x, y jp) int {
			if c := cmp.Compare(y.prio, x.prio); c != 0 {
				return c
			}
			return cmp.Compare(x.id, y.id)
		})
		for i, w := range order {
			got := claimOne(t, b, "q")
			if got.ID != w.id || got.Priority != w.prio {
				t.Fatalf("claim %d: job %d (priority %d), want job %d (priority %d)", i, got.ID, got.Priority, w.id, w.prio)
			}
		}
		claimNone(t, b, "q")
	})

	parallel(t, h, "MaxTakesTheBest", func(t *testing.T, b backend.Backend) {
		prios := []int{1, 9, 3, 9, 2}
		ps := make([]backend.InsertParams, len(prios))
		for i, p := range prios {
			ps[i] = job("q", "t")
			ps[i].Priority = p
		}
		ids := insertIDs(t, b, ps...)
		first := claim(t, b, 3, longLease, "q")
		want := []int64{ids[1], ids[2], ids[3]} // priorities 9, 3, 9
		if got := sortedIDs(first); !slices.Equal(got, want) {
			t.Fatalf("claim Max 3 got %v, want %v", got, want)
		}
		rest := claim(t, b, 10, longLease, "q")
		if got := sortedIDs(rest); !slices.Equal(got, []int64{ids[0], ids[4]}) {
			t.Fatalf("second claim got %v, want %v", got, []int64{ids[0], ids[4]})
		}
	})

	parallel(t, h, "OnlyNamedQueues", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, job("a", "t"), job("b", "t"), job("c", "t"), job("a", "t"), job("b", "t"), job("c", "t"))
		rows := claim(t, b, 10, longLease, "a", "c")
		want := []int64{ids[0], ids[2], ids[3], ids[5]}
		if got := sortedIDs(rows); !slices.Equal(got, want) {
			t.Fatalf("claim [a c] got %v, want %v", got, want)
		}
		for _, r := range rows {
			if r.Queue != "a" && r.Queue != "c" {
				t.Errorf("claimed job %d from queue %q", r.ID, r.Queue)
			}
		}
		wantStats(t, b, backend.QueueStats{Queue: "b", Pending: 2})
		claimNone(t, b, "nothing-here")
	})

	parallel(t, h, "PriorityAcrossQueues", func(t *testing.T, b backend.Backend) {
		low := job("a", "t")
		high := job("b", "t")
		high.Priority = 5
		ids := insertIDs(t, b, low, high)
		if got := claim(t, b, 1, longLease, "a", "b"); len(got) != 1 || got[0].ID != ids[1] {
			t.Fatalf("claim [a b] Max 1 got %v, want [%d] (higher priority in b)", got, ids[1])
		}
	})

	parallel(t, h, "DelayedInvisibleUntilDue", func(t *testing.T, b backend.Backend) {
		const delay = 300 * time.Millisecond
		p := job("q", "t")
		p.Delay = delay
		start := time.Now()
		id := insertOne(t, b, p)
		rows := claim(t, b, 1, longLease, "q")
		if len(rows) != 0 && time.Since(start) < delay {
			t.Fatalf("job %d with delay %s was claimable after %s", id, delay, time.Since(start))
		}
		for len(rows) == 0 {
			if time.Since(start) > delay+waitLimit {
				t.Fatalf("job with delay %s not claimable after %s", delay, time.Since(start))
			}
			time.Sleep(10 * time.Millisecond)
			rows = claim(t, b, 1, longLease, "q")
		}
		if rows[0].ID != id || rows[0].Attempts != 1 {
			t.Fatalf("claimed job %d attempts %d, want job %d attempts 1", rows[0].ID, rows[0].Attempts, id)
		}
	})

	parallel(t, h, "ClaimedRow", func(t *testing.T, b backend.Backend) {
		p := job("q", "email")
		p.Payload = []byte(`{"to":"x"}`)
		p.Priority = 3
		p.MaxAttempts = 4
		p.UniqueKey = "u"
		id := insertOne(t, b, p)
		before := time.Now()
		rows := claim(t, b, 5, time.Minute, "q")
		if len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		r := rows[0]
		if r.ID != id || r.Queue != "q" || r.Type != "email" || !jsonEqual(r.Payload, p.Payload) ||
			r.Priority != 3 || r.MaxAttempts != 4 || r.UniqueKey != "u" {
			t.Errorf("claimed row %+v does not match inserted %+v", r, p)
		}
		if r.Status != backend.StatusReserved || r.Attempts != 1 {
			t.Errorf("claimed row status %q attempts %d, want reserved 1", r.Status, r.Attempts)
		}
		if r.Ref() != (backend.JobRef{ID: id, Attempt: 1}) {
			t.Errorf("Ref() = %+v", r.Ref())
		}
		near(t, "ReservedAt", r.ReservedAt, before, skew)
		near(t, "LeaseUntil", r.LeaseUntil, before.Add(time.Minute), skew)
		near(t, "LeaseUntil - ReservedAt", r.ReservedAt.Add(time.Minute), r.LeaseUntil, time.Second)
		g := wantStatus(t, b, id, backend.StatusReserved, 1)
		near(t, "JobGet LeaseUntil", g.LeaseUntil, r.LeaseUntil, 5*time.Millisecond)
		wantStats(t, b, backend.QueueStats{Queue: "q", Reserved: 1})
		claimNone(t, b, "q")
	})

	parallel(t, h, "InvalidParams", func(t *testing.T, b backend.Backend) {
		insertOne(t, b, job("q", "t"))
		for _, tc := range []struct {
			field string
			p     backend.ClaimParams
		}{
			{"queues", backend.ClaimParams{Max: 1, Lease: time.Minute}},
			{"queue", backend.ClaimParams{Queues: []string{"q", "bad queue"}, Max: 1, Lease: time.Minute}},
			{"max", backend.ClaimParams{Queues: []string{"q"}, Max: 0, Lease: time.Minute}},
			{"max", backend.ClaimParams{Queues: []string{"q"}, Max: -1, Lease: time.Minute}},
			{"lease", backend.ClaimParams{Queues: []string{"q"}, Max: 1}},
			{"lease", backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: -time.Second}},
		} {
			rows, err := b.JobClaim(t.Context(), tc.p)
			if len(rows) != 0 {
				t.Errorf("JobClaim(%+v) returned %d jobs", tc.p, len(rows))
			}
			wantInvalid(t, err, tc.field)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
	})

	parallel(t, h, "EmptyQueue", func(t *testing.T, b backend.Backend) {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err != nil || len(rows) != 0 {
			t.Fatalf("JobClaim on an empty backend = %d rows, %v; want none, nil", len(rows), err)
		}
	})
}
