package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// BenchClaimControl measures what queue control costs a claim: claim a
// batch of 10 due jobs (a worker's default) and complete them, per op,
// from a backlog refilled untimed, on a fresh backend from open per case:
//
//	none          no queue is paused or limited (the path every store
//	              takes that does not use queue control)
//	other-paused  another queue is paused: the settings are not empty
//	concurrency   the queue has a concurrency limit that never binds
//	rate          the queue has a rate limit that never binds
//
// Each reports jobs/s. Backends call it from a benchmark of their own.
func BenchClaimControl(b *testing.B, open func(b *testing.B) backend.Backend) {
	cases := []struct {
		name  string
		setup func(b *testing.B, c backend.QueueController)
	}{
		{"none", nil},
		{"other-paused", func(b *testing.B, c backend.QueueController) {
			if err := c.QueuePause(b.Context(), "other", true); err != nil {
				b.Fatal(err)
			}
		}},
		{"concurrency", func(b *testing.B, c backend.QueueController) {
			if err := c.QueueSetLimits(b.Context(), "bench", backend.QueueLimits{Concurrency: 1000}); err != nil {
				b.Fatal(err)
			}
		}},
		{"rate", func(b *testing.B, c backend.QueueController) {
			if err := c.QueueSetLimits(b.Context(), "bench", backend.QueueLimits{Rate: 1_000_000_000, RatePeriod: time.Second}); err != nil {
				b.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			be := open(b)
			if tc.setup != nil {
				c, ok := be.(backend.QueueController)
				if !ok {
					b.Skip("no backend.QueueController")
				}
				tc.setup(b, c)
			}
			benchClaim(b, be)
		})
	}
}

func benchClaim(b *testing.B, be backend.Backend) {
	const batch, refill = 10, 5000
	ctx := b.Context()
	chunk := make([]backend.InsertParams, 1000)
	for i := range chunk {
		chunk[i] = backend.InsertParams{Queue: "bench", Type: "noop", Payload: []byte(`{"user_id":12345}`), MaxAttempts: 3}
	}
	fill := func() {
		b.StopTimer()
		for range refill / len(chunk) {
			if _, err := be.JobInsertMany(ctx, chunk); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	fill()
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) < batch {
			fill()
			if len(rows) == 0 {
				i--
				continue
			}
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		if res, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes}); err != nil || len(res.Stale) != 0 {
			b.Fatalf("JobComplete: %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
