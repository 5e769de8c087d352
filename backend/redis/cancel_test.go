package redis

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestCancellingCounter: once a scan has found no cancelling job, polls
// run no script until a cancel request raises P:cancels; the request is
// seen at the next poll, and its job stays listed until it ends.
func TestCancellingCounter(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	for _, q := range []string{"a", "b", "c"} {
		if _, err := b.JobInsertMany(ctx, benchJobs(1, q)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a", "b", "c"}, Max: 3, Lease: time.Minute})
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	scans := func() int { return b.c.slots.called()["cancelling"] }
	poll := func(step string, want ...backend.JobRef) {
		t.Helper()
		refs, err := b.JobCancelling(ctx)
		if err != nil {
			t.Fatalf("%s: JobCancelling: %v", step, err)
		}
		if !slices.Equal(refs, want) {
			t.Fatalf("%s: JobCancelling = %v, want %v", step, refs, want)
		}
	}
	poll("first poll")
	before := scans()
	if before != 3 {
		t.Fatalf("the first poll ran %d cancelling scripts, want one per queue (3)", before)
	}
	for range 5 {
		poll("no request since")
	}
	if n := scans() - before; n != 0 {
		t.Fatalf("polls with no request since an empty scan ran %d cancelling scripts, want 0", n)
	}
	res, err := b.JobCancel(ctx, []int64{rows[1].ID})
	if err != nil || res[0].Outcome != backend.CancelRequested {
		t.Fatalf("JobCancel = %v, %v; want requested", res, err)
	}
	ref := rows[1].Ref()
	poll("after a request", ref)
	poll("while the job runs on", ref)
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	poll("after the job ended")
	before = scans()
	poll("after an empty scan again")
	if n := scans() - before; n != 0 {
		t.Fatalf("a poll after an empty scan ran %d cancelling scripts, want 0", n)
	}
}

// TestCancellingUncounted: a cancel request whose INCR never came (its
// caller died after the script) is seen by the first scan after
// cancelScanEvery, however still the counter stands.
func TestCancellingUncounted(t *testing.T) {
	b := openTest(t, Options{})
	b.cancelPoll.every = 50 * time.Millisecond
	ctx := t.Context()
	if _, err := b.JobInsertMany(ctx, benchJobs(1, "q")); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if refs, err := b.JobCancelling(ctx); err != nil || len(refs) != 0 {
		t.Fatalf("JobCancelling = %v, %v; want none", refs, err)
	}
	// The script alone, as a requester that died before its INCR left it.
	q := b.keys.queue("q")
	if _, err := scriptCancel.eval(ctx, b.c, scriptCancel.keysOf(q), []any{q.channel, b.origin, tsHex(rows[0].ID)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		refs, err := b.JobCancelling(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(refs, []backend.JobRef{rows[0].Ref()}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("an uncounted cancel request unseen after 5s (scans every %v): JobCancelling = %v", b.cancelPoll.every, refs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkCancellingPoll is a poll of a worker holding a job when no
// cancel was requested, with 50 queues registered: "counter" as polls go
// (one GET), "scan" reading every queue's set each time, as every poll did
// before the counter.
func BenchmarkCancellingPoll(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"counter", 0}, {"scan", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			be := openTest(b, Options{})
			be.cancelPoll.every = bc.every
			ctx := b.Context()
			for i := range 50 {
				if _, err := be.JobInsertMany(ctx, benchJobs(1, fmt.Sprintf("q%d", i))); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := be.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q0"}, Max: 1, Lease: time.Hour}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if refs, err := be.JobCancelling(ctx); err != nil || len(refs) != 0 {
					b.Fatalf("JobCancelling = %v, %v", refs, err)
				}
			}
		})
	}
}
