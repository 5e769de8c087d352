package jobq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestInspectorJob finds a job by ID in each state it can be in, on every
// durable backend and memory.
func TestInspectorJob(t *testing.T) {
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			ctx := context.Background()
			b, err := backend.Open(ctx, st.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			c, err := jobq.NewClient(b, jobq.ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			insp := jobq.NewInspector(b)
			enqueue := func(opts ...jobq.EnqueueOption) int64 {
				id, err := c.Enqueue(ctx, "t", map[string]int{"n": 1}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			want := func(id int64, state jobq.JobState) {
				t.Helper()
				info, err := insp.Job(ctx, id)
				if err != nil {
					t.Fatalf("Job(%d): %v", id, err)
				}
				gotID := int64(0)
				switch {
				case info.Live != nil:
					gotID = info.Live.ID
				case info.Finished != nil:
					gotID = info.Finished.ID
				case info.Failed != nil:
					gotID = info.Failed.JobID
				}
				if info.State != state || gotID != id {
					t.Fatalf("Job(%d) = %s (id %d), want %s", id, info.State, gotID, state)
				}
			}
			cancelled := enqueue(jobq.Queue("c"))
			kept := enqueue(jobq.Queue("k"))
			pending := enqueue(jobq.Queue("p"))
			scheduled := enqueue(jobq.Queue("p"), jobq.Delay(time.Hour))
			reserved := enqueue(jobq.Queue("r"))
			if _, err := insp.Cancel(ctx, cancelled); err != nil {
				t.Fatal(err)
			}
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"k"}, Max: 1, Lease: time.Minute})
			if err != nil || len(rows) != 1 {
				t.Fatalf("claim: %v %d", err, len(rows))
			}
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone, Keep: true}}}); err != nil {
				t.Fatal(err)
			}
			if rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"r"}, Max: 1, Lease: time.Minute}); err != nil || len(rows) != 1 {
				t.Fatalf("claim: %v", err)
			}
			// Two jobs failed, the later first, so that their failed
			// rows' own IDs are not their jobs': each is found by its
			// job's ID all the same.
			failed := enqueue(jobq.Queue("f"))
			failedLast := enqueue(jobq.Queue("f"))
			rows, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"f"}, Max: 2, Lease: time.Minute})
			if err != nil || len(rows) != 2 {
				t.Fatalf("claim: %v %d", err, len(rows))
			}
			for _, r := range []*backend.JobRow{rows[1], rows[0]} {
				if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
					t.Fatal(err)
				}
			}
			want(pending, jobq.StatePending)
			want(failed, jobq.StateFailed)
			want(failedLast, jobq.StateFailed)
			want(scheduled, jobq.StateScheduled)
			want(reserved, jobq.StateReserved)
			want(cancelled, jobq.StateCancelled)
			want(kept, jobq.StateCompleted)
			// A job done without keeping, whose ID lies among kept ones,
			// and an ID never used are not found.
			gone := enqueue(jobq.Queue("g"))
			enqueue(jobq.Queue("c2"))
			rows, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"g"}, Max: 1, Lease: time.Minute})
			if err != nil || len(rows) != 1 {
				t.Fatalf("claim: %v", err)
			}
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
				t.Fatal(err)
			}
			if pg, _ := insp.JobsPage(ctx, jobq.StatePending, jobq.JobFilter{Queue: "c2"}, 1, 0); len(pg) == 1 {
				if _, err := insp.Cancel(ctx, pg[0].ID); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []int64{gone, 1 << 62} {
				if _, err := insp.Job(ctx, id); !errors.Is(err, jobq.ErrNotFound) {
					t.Errorf("Job(%d) = %v, want ErrNotFound", id, err)
				}
			}
			if _, err := insp.Job(ctx, 0); !errors.Is(err, jobq.ErrInvalidInput) {
				t.Errorf("Job(0) = %v, want ErrInvalidInput", err)
			}
		})
	}
}
