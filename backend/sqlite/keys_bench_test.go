package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// BenchmarkKeysClaimPastHeld: per op, claim and complete the job of a
// small key in an ordered queue whose other key is held with a backlog of
// held jobs at a higher priority, so that every claim meets the held
// backlog first. What a claim costs should not grow with the backlog:
// the claim walks past it key by key (see claimKeyed).
func BenchmarkKeysClaimPastHeld(b *testing.B) {
	for _, held := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			be := openBench(b)
			ctx := b.Context()
			if err := be.QueueSetKeys(ctx, "bench", backend.KeyRules{Ordered: true}); err != nil {
				b.Fatal(err)
			}
			for left := held; left > 0; left -= 1000 {
				ps := benchJobs(min(left, 1000))
				for i := range ps {
					ps[i].Key, ps[i].Priority = "hot", 1
				}
				if _, err := be.JobInsertMany(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
			rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 1, Lease: time.Hour})
			if err != nil || len(rows) != 1 {
				b.Fatalf("claim of the hot head: %v, %v", rows, err)
			}
			if _, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
				{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
				b.Fatal(err)
			}
			small := benchJobs(1)
			small[0].Key = "small"
			for b.Loop() {
				if _, err := be.JobInsertMany(ctx, small); err != nil {
					b.Fatal(err)
				}
				rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 10, Lease: time.Minute})
				if err != nil || len(rows) != 1 {
					b.Fatalf("claim: %d rows, %v; want small's job", len(rows), err)
				}
				if _, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
					{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeysClaim: BenchmarkClaimComplete's batches of 100 from a
// backlog spread over 1,000 keys, without key rules (the plain claim in
// turn order) and with a limit of 1 per key.
func BenchmarkKeysClaim(b *testing.B) {
	for _, rules := range []backend.KeyRules{{}, {Limit: 1}} {
		b.Run(fmt.Sprintf("limit=%d", rules.Limit), func(b *testing.B) { benchKeysClaim(b, rules) })
	}
}

func benchKeysClaim(b *testing.B, rules backend.KeyRules) {
	const batch = 100
	be := openBench(b)
	ctx := b.Context()
	if err := be.QueueSetKeys(ctx, "bench", rules); err != nil {
		b.Fatal(err)
	}
	chunk := benchJobs(1000)
	for i := range chunk {
		chunk[i].Key = fmt.Sprintf("k%d", i)
	}
	for left := b.N * batch; left > 0; left -= len(chunk) {
		if _, err := be.JobInsertMany(ctx, chunk[:min(left, len(chunk))]); err != nil {
			b.Fatal(err)
		}
	}
	outcomes := make([]backend.Outcome, 0, batch)
	b.ResetTimer()
	for range b.N {
		rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) == 0 {
			b.Fatal("claimed nothing")
		}
		outcomes = outcomes[:0]
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
		if _, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportJobs(b, b.N*batch)
}

// BenchmarkKeysClaimPastLimited: per op, claim and complete one job of a
// key ("low") with a backlog of its own, in a queue with a limit of 1 per
// key whose other key ("hot") runs a job and has a backlog at a higher
// priority: every claim meets the hot backlog first and turns to the keys
// one by one (see claimKeyed). What a claim costs should not grow with
// either backlog.
func BenchmarkKeysClaimPastLimited(b *testing.B) {
	for _, backlog := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			be := openBench(b)
			ctx := b.Context()
			if err := be.QueueSetKeys(ctx, "bench", backend.KeyRules{Limit: 1}); err != nil {
				b.Fatal(err)
			}
			for _, k := range []struct {
				key  string
				prio int
			}{{"hot", 1}, {"low", 0}} {
				for left := backlog; left > 0; left -= 1000 {
					ps := benchJobs(min(left, 1000))
					for i := range ps {
						ps[i].Key, ps[i].Priority = k.key, k.prio
					}
					if _, err := be.JobInsertMany(ctx, ps); err != nil {
						b.Fatal(err)
					}
				}
			}
			rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 1, Lease: time.Hour})
			if err != nil || len(rows) != 1 || rows[0].Key != "hot" {
				b.Fatalf("claim of a hot job: %v, %v", rows, err)
			}
			for b.Loop() {
				rows, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 10, Lease: time.Minute})
				if err != nil || len(rows) != 1 || rows[0].Key != "low" {
					b.Fatalf("claim: %d rows, %v; want one of low's jobs", len(rows), err)
				}
				if _, err := be.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
					{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKeysInsert: batches of 1,000 keyed jobs over 1,000 keys into a
// queue that holds the batches before them: what a job's turn costs an
// insert.
func BenchmarkKeysInsert(b *testing.B) {
	be := openBench(b)
	ctx := b.Context()
	chunk := benchJobs(1000)
	for i := range chunk {
		chunk[i].Key = fmt.Sprintf("k%d", i)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := be.JobInsertMany(ctx, chunk); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N*len(chunk))
}
