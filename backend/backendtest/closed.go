package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testClosed: after Close every call fails with ErrClosed, and Close is
// idempotent.
func testClosed(t *testing.T, h Harness) {
	parallel(t, h, "CallsFailAfterClose", func(t *testing.T, b backend.Backend) {
		insertOne(t, b, job("q", "t"))
		made := makeFailed(t, b, job("q", "t"))
		held := claimOne(t, b, "q")

		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}

		ctx := t.Context()
		calls := map[string]func() error{
			"JobInsertMany": func() error {
				_, err := b.JobInsertMany(ctx, []backend.InsertParams{job("q", "t")})
				return err
			},
			"JobClaim": func() error {
				_, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
				return err
			},
			"JobComplete": func() error {
				_, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{done(held.Ref())}})
				return err
			},
			"JobExtendLease": func() error {
				_, err := b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: []backend.JobRef{held.Ref()}, Lease: time.Minute})
				return err
			},
			"JobRelease": func() error {
				_, err := b.JobRelease(ctx, []backend.JobRef{held.Ref()})
				return err
			},
			"LeaseSweep": func() error {
				_, err := b.LeaseSweep(ctx, backend.SweepParams{})
				return err
			},
			"JobGet": func() error {
				_, err := b.JobGet(ctx, held.ID)
				return err
			},
			"QueueStats": func() error {
				_, err := b.QueueStats(ctx)
				return err
			},
			"FailedList": func() error {
				_, err := b.FailedList(ctx, backend.FailedListParams{})
				return err
			},
			"FailedGet": func() error {
				_, err := b.FailedGet(ctx, made[0].ID)
				return err
			},
			"FailedReplay": func() error {
				_, err := b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{made[0].ID}})
				return err
			},
			"FailedPurge": func() error {
				_, err := b.FailedPurge(ctx, backend.FailedPurgeParams{})
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("%s after Close: error %v, want ErrClosed", name, err)
			}
		}
	})
}
