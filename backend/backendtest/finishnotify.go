package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testFinishNotify: a backend.FinishNotifier wakes its subscribers after
// each call that finished jobs: a done outcome (kept or not), a fail, a
// cancel of a pending job, a cancelling job's outcome, and a job's
// deadline passing unclaimed (by the claim that passed it over or the
// sweep that moved it, whichever ends it). Backends
// without the capability skip it. A hint may come without a job
// finishing (it is only a hint), so nothing asserts its absence.
func testFinishNotify(t *testing.T, h Harness) {
	subscribe := func(t *testing.T, b backend.Backend) <-chan struct{} {
		t.Helper()
		n, ok := b.(backend.FinishNotifier)
		if !ok {
			t.Skip("backend does not implement backend.FinishNotifier")
		}
		ch, cancel := n.SubscribeFinished()
		t.Cleanup(cancel)
		// A backend may wake every subscription once when its listener
		// (re)connects: settle that first, so the wake-ups below are the
		// calls' own.
		insertOne(t, b, job("settle", "t"))
		return ch
	}
	settled := func(t *testing.T, b backend.Backend, ch <-chan struct{}) *backend.JobRow {
		t.Helper()
		row := claimOne(t, b, "settle")
		completeFresh(t, b, done(row.Ref()))
		wantWake(t, ch, "settling done")
		drain(ch)
		insertOne(t, b, job("f", "t"))
		return claimOne(t, b, "f")
	}

	parallel(t, h, "WakesOnDone", func(t *testing.T, b backend.Backend) {
		ch := subscribe(t, b)
		row := settled(t, b, ch)
		completeFresh(t, b, done(row.Ref()))
		wantWake(t, ch, "a done outcome")
	})

	parallel(t, h, "WakesOnDoneKept", func(t *testing.T, b backend.Backend) {
		ch := subscribe(t, b)
		row := settled(t, b, ch)
		o := done(row.Ref())
		o.Keep, o.Result = true, []byte(`{"n":1}`)
		completeFresh(t, b, o)
		wantWake(t, ch, "a kept done outcome")
	})

	parallel(t, h, "WakesOnFail", func(t *testing.T, b backend.Backend) {
		ch := subscribe(t, b)
		row := settled(t, b, ch)
		completeFresh(t, b, fail(row.Ref(), "boom"))
		wantWake(t, ch, "a fail outcome")
	})

	parallel(t, h, "WakesOnCancel", func(t *testing.T, b backend.Backend) {
		ch := subscribe(t, b)
		if _, ok := b.(backend.Canceller); !ok {
			t.Skip("backend does not implement backend.Canceller")
		}
		c, _ := canceller(t, b)
		row := settled(t, b, ch)
		id := insertOne(t, b, job("f", "t"))
		drain(ch)
		wantCancel(t, c, []int64{id}, backend.CancelCancelled)
		wantWake(t, ch, "a cancel of a pending job")

		drain(ch)
		wantCancel(t, c, []int64{row.ID}, backend.CancelRequested)
		res := complete(t, b, done(row.Ref()))
		if len(res.Cancelled) != 1 {
			t.Fatalf("JobComplete of a cancelling job: Cancelled = %v, want its ref", res.Cancelled)
		}
		wantWake(t, ch, "the outcome of a cancelling job")
	})
	parallel(t, h, "WakesOnExpiry", func(t *testing.T, b backend.Backend) {
		ch := subscribe(t, b)
		row := settled(t, b, ch)
		completeFresh(t, b, done(row.Ref()))
		p := job("e", "t")
		p.Deadline = time.Now().Add(deadlineWait)
		if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p}); err != nil {
			t.Fatalf("insert a job with a deadline: %v", err)
		}
		eventually(t, 5*time.Second, "the deadline to pass", func() bool { return time.Now().After(p.Deadline.Add(20 * time.Millisecond)) })
		drain(ch)
		claimNone(t, b, "e")
		if _, err := b.LeaseSweep(t.Context(), backend.SweepParams{}); err != nil {
			t.Fatalf("LeaseSweep: %v", err)
		}
		wantWake(t, ch, "a job expired by its deadline")
	})
}
