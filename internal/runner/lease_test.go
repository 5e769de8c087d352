package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq/backend"
)

// cancelRecorder is a handler's cancel function that remembers its cause.
type cancelRecorder struct {
	mu  sync.Mutex
	err error
}

func (c *cancelRecorder) cancel(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *cancelRecorder) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// TestLeaseExtenderKeysByAttempt: two attempts of one job held at once
// (the job was lost and claimed again while the old attempt still ran)
// each keep their own heartbeat: removing the old one leaves the new one
// extended.
func TestLeaseExtenderKeysByAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		ctx0 := context.Background()
		if _, err := mem.JobInsertMany(ctx0, []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 3}}); err != nil {
			t.Fatal(err)
		}
		rows, err := mem.JobClaim(ctx0, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: 3 * time.Second})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		oldRef := rows[0].Ref()
		// The attempt loses its lease; the same job is claimed again.
		time.Sleep(4 * time.Second)
		if _, err := mem.LeaseSweep(context.Background(), backend.SweepParams{}); err != nil {
			t.Fatal(err)
		}
		again, err := mem.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: 3 * time.Second})
		if err != nil || len(again) != 1 {
			t.Fatalf("second claim: %d rows, %v", len(again), err)
		}
		newRef := again[0].Ref()
		if newRef.ID != oldRef.ID || newRef.Attempt == oldRef.Attempt {
			t.Fatalf("the job was not claimed again with a new attempt: %v then %v", oldRef, newRef)
		}
		rec := &recorder{Backend: mem}
		e := NewLeaseExtender(rec, 3*time.Second, time.Second, quiet)
		var oldC, newC cancelRecorder
		e.Add(oldRef, time.Now(), oldC.cancel)
		e.Add(newRef, time.Now().Add(3*time.Second), newC.cancel)
		e.Remove(oldRef) // the old attempt ends
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { e.Run(ctx) })
		time.Sleep(10 * time.Second)
		cancel()
		wait()
		if e.Held() != 1 {
			t.Fatalf("the new attempt %v is no longer heartbeated after the old one %v ended", newRef, oldRef)
		}
		for _, refs := range rec.extendCalls() {
			if !slices.Equal(refs, []backend.JobRef{newRef}) {
				t.Fatalf("extended %v; want only the new attempt %v", refs, newRef)
			}
		}
		if newC.cause() != nil {
			t.Fatalf("the new attempt was cancelled: %v", newC.cause())
		}
		row, err := mem.JobGet(context.Background(), newRef.ID)
		if err != nil || row.Status != backend.StateReserved {
			t.Fatalf("job after 10s of heartbeats with a 3s lease = %+v, %v; want still reserved", row, err)
		}
	})
}

// TestLeaseExtenderCancelsLostLease: an attempt the backend says is no
// longer held is cancelled with ErrLeaseLost and dropped; the others are
// extended.
func TestLeaseExtenderCancelsLostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		e := NewLeaseExtender(mem, time.Minute, 20*time.Second, quiet)
		var kept, lost cancelRecorder
		e.Add(rows[0].Ref(), time.Now().Add(time.Minute), kept.cancel)
		gone := rows[1].Ref()
		gone.Token++ // a claim that no longer holds the job
		e.Add(gone, time.Now().Add(time.Minute), lost.cancel)
		e.RunOnce(context.Background())
		if !errors.Is(lost.cause(), ErrLeaseLost) || kept.cause() != nil {
			t.Fatalf("causes: lost %v, kept %v; want ErrLeaseLost for the lost attempt only", lost.cause(), kept.cause())
		}
		if e.Held() != 1 {
			t.Fatalf("%d attempts held; want 1", e.Held())
		}
	})
}

// TestLeaseExtenderCancelsWhenHeartbeatsFail: a worker cut off from its
// backend keeps its handlers running while the lease lasts, and cancels
// them with ErrLeaseLost once it has run out; a successful heartbeat moves
// the deadline.
func TestLeaseExtenderCancelsWhenHeartbeatsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 1, 3*time.Second)
		var failing atomic.Bool
		rec := &recorder{Backend: mem, extendErr: func(int) error {
			if failing.Load() {
				return backend.ErrUnavailable
			}
			return nil
		}}
		var log logLines
		e := NewLeaseExtender(rec, 3*time.Second, time.Second, log.logger())
		var c cancelRecorder
		e.Add(rows[0].Ref(), time.Now().Add(3*time.Second), c.cancel)
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { e.Run(ctx) })
		defer func() { cancel(); wait() }()

		time.Sleep(5500 * time.Millisecond) // five good heartbeats: deadline now 5s + 3s
		failing.Store(true)
		time.Sleep(2 * time.Second) // 7.5s: failing, but the lease lasts until 8s
		if c.cause() != nil {
			t.Fatalf("cancelled at 7.5s with the lease extended to 8s: %v", c.cause())
		}
		time.Sleep(time.Second) // the tick at 8s finds the deadline passed
		if !errors.Is(c.cause(), ErrLeaseLost) {
			t.Fatalf("cause at 8.5s = %v; want ErrLeaseLost once the lease ran out", c.cause())
		}
		if e.Held() != 0 || !strings.Contains(log.String(), "lease ran out") {
			t.Fatalf("held %d, log %s; want the attempt dropped and the loss logged", e.Held(), log.String())
		}
	})
}

// hangingExtend never answers a heartbeat until its context ends.
type hangingExtend struct{ backend.Backend }

func (hangingExtend) JobExtendLease(ctx context.Context, _ backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLeaseExtenderBoundsHangingCalls: a backend that never answers cannot
// keep the extender from noticing that the lease ran out.
func TestLeaseExtenderBoundsHangingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 1, 3*time.Second)
		e := NewLeaseExtender(hangingExtend{mem}, 3*time.Second, time.Second, quiet)
		var c cancelRecorder
		e.Add(rows[0].Ref(), time.Now().Add(3*time.Second), c.cancel)
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { e.Run(ctx) })
		time.Sleep(5 * time.Second)
		cancel()
		wait()
		if !errors.Is(c.cause(), ErrLeaseLost) {
			t.Fatalf("cause after 5s of a hanging backend with a 3s lease = %v; want ErrLeaseLost", c.cause())
		}
	})
}

// TestLeaseSweeperRescuesInPages: the sweep returns expired jobs in pages
// until none is left, and reports every job it moved.
func TestLeaseSweeperRescuesInPages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = sweepPage + 5
		mem, _ := claimed(t, n, time.Second)
		time.Sleep(2 * time.Second)
		var moved []backend.SweptJob
		s := NewLeaseSweeper(mem, time.Hour, quiet, func(r backend.SweepResult) { moved = append(moved, r.Jobs...) })
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { s.Run(ctx) })
		synctest.Wait()
		cancel()
		wait()
		if len(moved) != n {
			t.Fatalf("sweep reported %d jobs; want %d in two pages", len(moved), n)
		}
		for _, j := range moved {
			if !j.Failed || j.Queue != "q" || j.Type != "t" {
				t.Fatalf("swept %+v; want failed (one attempt allowed) with queue q and type t", j)
			}
		}
		if f, _ := mem.FailedList(context.Background(), backend.FailedListParams{Limit: 2000}); len(f) != n {
			t.Fatalf("%d failed jobs; want %d", len(f), n)
		}
	})
}

// TestLeaseSweeperReportsExpired: a sweep that only expires jobs (their
// deadline passed before any claim) reports them, a page at a time, so
// the expired metric and the rescued hooks hear of every one.
func TestLeaseSweeperReportsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = sweepPage + 5
		mem := newMemory(t)
		params := make([]backend.InsertParams, n)
		for i := range params {
			params[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 3, Deadline: time.Now().Add(time.Second)}
		}
		if _, err := mem.JobInsertMany(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) //nolint:forbidigo // synctest: fake time, past the deadlines
		var moved []backend.SweptJob
		s := NewLeaseSweeper(mem, time.Hour, quiet, func(r backend.SweepResult) { moved = append(moved, r.Jobs...) })
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { s.Run(ctx) })
		synctest.Wait()
		cancel()
		wait()
		if len(moved) != n {
			t.Fatalf("sweep reported %d jobs; want %d expired in two pages", len(moved), n)
		}
		for _, j := range moved {
			if !j.Expired {
				t.Fatalf("swept %+v; want expired", j)
			}
		}
		if f, _ := mem.FailedList(context.Background(), backend.FailedListParams{Limit: 2000}); len(f) != n {
			t.Fatalf("%d failed jobs; want %d", len(f), n)
		}
	})
}

// failingSweep fails every sweep.
type failingSweep struct{ backend.Backend }

func (failingSweep) LeaseSweep(context.Context, backend.SweepParams) (backend.SweepResult, error) {
	return backend.SweepResult{}, backend.ErrUnavailable
}

// TestLeaseSweeperLogsErrors: a failed sweep is logged and tried again on
// the next tick.
func TestLeaseSweeperLogsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logLines
		s := NewLeaseSweeper(failingSweep{newMemory(t)}, time.Second, log.logger(), nil)
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { s.Run(ctx) })
		time.Sleep(2500 * time.Millisecond)
		cancel()
		wait()
		if got := strings.Count(log.String(), "sweep expired leases"); got != 3 {
			t.Fatalf("%d sweep errors logged in 2.5s; want 3 (at start, 1s, 2s): %s", got, log.String())
		}
	})
}

// TestLeaseExtenderInTx: an attempt completing in its handler's own
// transaction is heartbeated on, by a call of its own (a row that
// transaction locks must delay no other job's heartbeat); once the
// backend says it no longer holds the job (the transaction committed) it
// is dropped without cancelling its handler, while a lost attempt that is
// not in a transaction is cancelled as ever.
func TestLeaseExtenderInTx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 3, time.Minute)
		rec := &recorder{Backend: mem}
		e := NewLeaseExtender(rec, time.Minute, 20*time.Second, quiet)
		var plain, inTx, lost cancelRecorder
		e.Add(rows[0].Ref(), time.Now().Add(time.Minute), plain.cancel)
		e.Add(rows[1].Ref(), time.Now().Add(time.Minute), inTx.cancel)
		e.MarkInTx(rows[1].Ref())
		gone := rows[2].Ref()
		gone.Token++
		e.Add(gone, time.Now().Add(time.Minute), lost.cancel)

		// Rolled back (or still open): the in-transaction attempt is
		// extended, in a call apart from the others.
		e.RunOnce(context.Background())
		calls := rec.extendCalls()
		if len(calls) != 2 || !slices.ContainsFunc(calls, func(refs []backend.JobRef) bool {
			return slices.Equal(refs, []backend.JobRef{rows[1].Ref()})
		}) {
			t.Fatalf("extend calls %v; want two, one with the in-transaction attempt alone", calls)
		}
		if e.Held() != 2 || inTx.cause() != nil || plain.cause() != nil || !errors.Is(lost.cause(), ErrLeaseLost) {
			t.Fatalf("held %d, causes: in tx %v, plain %v, lost %v; want the in-tx and plain attempts held and uncancelled, the lost one cancelled",
				e.Held(), inTx.cause(), plain.cause(), lost.cause())
		}

		// The transaction commits: the job is gone, and its handler is
		// not told its lease was lost.
		if res, err := mem.JobComplete(context.Background(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[1].Ref(), Kind: backend.OutcomeDone}}}); err != nil || len(res.Stale) != 0 {
			t.Fatalf("complete: %+v, %v", res, err)
		}
		e.RunOnce(context.Background())
		if inTx.cause() != nil || e.Held() != 1 {
			t.Fatalf("after the commit: in-tx cause %v, held %d; want no cancel and only the plain attempt held", inTx.cause(), e.Held())
		}
	})
}

// TestLeaseExtenderPausedProcess: a process that was stopped (SIGSTOP)
// for longer than the lease cancels the handlers whose lease deadline has
// passed as soon as it runs again, before any heartbeat: the backend
// would still extend the job if no sweep has run yet, but other workers
// may take it at any moment.
func TestLeaseExtenderPausedProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		rec := &recorder{Backend: mem}
		e := NewLeaseExtender(rec, time.Minute, 20*time.Second, quiet)
		var expired, fresh cancelRecorder
		e.Add(rows[0].Ref(), time.Now().Add(time.Minute), expired.cancel)
		time.Sleep(2 * time.Minute) // the process is stopped: no tick runs
		e.Add(rows[1].Ref(), time.Now().Add(time.Minute), fresh.cancel)
		e.RunOnce(context.Background())
		if !errors.Is(expired.cause(), ErrLeaseLost) || fresh.cause() != nil || e.Held() != 1 {
			t.Fatalf("causes: expired %v, fresh %v; held %d; want the expired attempt cancelled with ErrLeaseLost and the fresh one held",
				expired.cause(), fresh.cause(), e.Held())
		}
		for _, refs := range rec.extendCalls() {
			if slices.Contains(refs, rows[0].Ref()) {
				t.Fatalf("extended the expired attempt: %v", refs)
			}
		}
	})
}
