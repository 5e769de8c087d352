package backendtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// opNames are the operations every backend wraps its errors with, by
// method: the words of the error a caller logs (a Get's names the ID
// too: "get job 7").
var opNames = map[string]string{
	"JobInsertMany":  "insert jobs",
	"JobClaim":       "claim jobs",
	"JobComplete":    "complete jobs",
	"JobExtendLease": "extend leases",
	"JobRelease":     "release jobs",
	"LeaseSweep":     "sweep leases",
	"JobGet":         "get job",
	"QueueStats":     "queue stats",
	"FailedList":     "list failed jobs",
	"FailedGet":      "get failed job",
	"FailedReplay":   "replay failed jobs",
	"FailedPurge":    "purge failed jobs",
}

// testClosed: after Close every call fails with ErrClosed, one with empty
// input (which before Close is a no-op that succeeds) and the Workflower's
// included, and Close is idempotent.
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
				_, err := b.FailedGet(ctx, made[0].JobID)
				return err
			},
			"FailedReplay": func() error {
				_, err := b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{made[0].JobID}})
				return err
			},
			"FailedPurge": func() error {
				_, err := b.FailedPurge(ctx, backend.FailedPurgeParams{})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			if !errors.Is(err, backend.ErrClosed) {
				t.Errorf("%s after Close: error %v, want ErrClosed", name, err)
				continue
			}
			// Every backend names the operation alike, so a log line or a
			// caller reads the same words whatever the store.
			op := opNames[name]
			switch name {
			case "JobGet":
				op = fmt.Sprintf("%s %d", op, held.ID)
			case "FailedGet":
				op = fmt.Sprintf("%s %d", op, made[0].JobID)
			}
			if !strings.HasPrefix(err.Error(), op+": ") {
				t.Errorf("%s after Close: error %q, want it to start with the operation %q", name, err, op)
			}
		}
	})

	// Empty input is answered before Close (success, nothing to do) and
	// refused after it like any other call: ErrClosed is the one answer
	// of a closed backend, so a caller never learns from a success that
	// the store is still there.
	parallel(t, h, "EmptyInputAfterClose", func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		calls := map[string]func() error{
			"JobInsertMany": func() error {
				res, err := b.JobInsertMany(ctx, []backend.InsertParams{})
				if err == nil && len(res) != 0 {
					t.Errorf("JobInsertMany(none) = %+v, want no results", res)
				}
				return err
			},
			"JobComplete": func() error {
				res, err := b.JobComplete(ctx, backend.CompleteParams{})
				if err == nil && len(res.Stale)+len(res.Cancelled) != 0 {
					t.Errorf("JobComplete(none) = %+v, want nothing", res)
				}
				return err
			},
			"JobExtendLease": func() error {
				lost, err := b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: []backend.JobRef{}, Lease: time.Minute})
				if err == nil && len(lost) != 0 {
					t.Errorf("JobExtendLease(none) = %v, want nothing lost", lost)
				}
				return err
			},
			"JobRelease": func() error {
				res, err := b.JobRelease(ctx, []backend.JobRef{})
				if err == nil && len(res.Stale)+len(res.Cancelled) != 0 {
					t.Errorf("JobRelease(none) = %+v, want nothing", res)
				}
				return err
			},
		}
		for name, call := range calls {
			if err := call(); err != nil {
				t.Errorf("%s with empty input before Close: %v, want success", name, err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("%s with empty input after Close: error %v, want ErrClosed", name, err)
			}
		}
	})

	parallel(t, h, "WorkflowCallsFailAfterClose", func(t *testing.T, b backend.Backend) {
		w := workflower(t, b)
		ctx := t.Context()
		res, err := w.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{task("a")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		calls := map[string]func() error{
			"WorkflowInsert": func() error {
				_, err := w.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{task("a")}})
				return err
			},
			"WorkflowGet":    func() error { _, err := w.WorkflowGet(ctx, res.ID); return err },
			"WorkflowList":   func() error { _, err := w.WorkflowList(ctx, backend.WorkflowListParams{}); return err },
			"WorkflowCancel": func() error { _, err := w.WorkflowCancel(ctx, res.ID); return err },
			"WorkflowDeps":   func() error { _, err := w.WorkflowDeps(ctx, res.Jobs["a"]); return err },
			"WorkflowStats":  func() error { _, err := w.WorkflowStats(ctx); return err },
			"WorkflowCheck":  func() error { _, err := w.WorkflowCheck(ctx); return err },
			"WorkflowPrune":  func() error { _, err := w.WorkflowPrune(ctx, time.Hour); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("%s after Close: error %v, want ErrClosed", name, err)
			}
		}
	})
}
