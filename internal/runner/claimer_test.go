package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq/backend"
)

// timedClaims wraps a backend and records when each JobClaim returned and
// how many jobs it brought.
type timedClaims struct {
	backend.Backend
	mu     sync.Mutex
	at     []time.Time
	counts []int
}

func (b *timedClaims) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	rows, err := b.Backend.JobClaim(ctx, p)
	b.mu.Lock()
	b.at, b.counts = append(b.at, time.Now()), append(b.counts, len(rows))
	b.mu.Unlock()
	return rows, err
}

func (b *timedClaims) claims() ([]time.Time, []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.at...), append([]int(nil), b.counts...)
}

// runClaimer starts c and returns a function that stops it and waits.
func runClaimer(c *Claimer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	wait := start(func() { c.Run(ctx) })
	return func() { cancel(); wait() }
}

// TestClaimerWaitsAfterPartialClaim: a claim that brings several jobs but
// not a full batch is followed by the cooldown before the next claim, even
// when a wake-up is waiting; a claim that brings one job is not.
func TestClaimerWaitsAfterPartialClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		const cooldown = 200 * time.Millisecond
		b := &timedClaims{Backend: mem}
		wake := make(chan struct{}, 1)
		var c *Claimer
		c = NewClaimer(b, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 10, Batch: 10, Lease: time.Minute,
			Poll: time.Hour, Cooldown: cooldown, Log: quiet,
			Dispatch: func(Claimed) { go c.Done() },
		})
		c.SetWake(wake)
		insertJobs(t, mem, 3)
		stop := runClaimer(c)
		defer stop()

		synctest.Wait()
		insertJobs(t, mem, 1)
		wake <- struct{}{}
		time.Sleep(time.Second)
		at, counts := b.claims()
		if len(counts) != 2 || counts[0] != 3 || counts[1] != 1 {
			t.Fatalf("claims brought %v jobs; want 3 then 1", counts)
		}
		if gap := at[1].Sub(at[0]); gap != cooldown {
			t.Fatalf("next claim %s after a claim of 3 of 10; want exactly the %s cooldown", gap, cooldown)
		}

		insertJobs(t, mem, 1)
		woke := time.Now()
		wake <- struct{}{}
		synctest.Wait()
		at, counts = b.claims()
		if len(counts) != 3 || counts[2] != 1 {
			t.Fatalf("claims brought %v jobs; want a third claim of 1", counts)
		}
		if gap := at[2].Sub(woke); gap != 0 {
			t.Fatalf("third claim came %s after the wake-up; want it at once, without the cooldown", gap)
		}
	})
}

// TestClaimerWaitsForHalfABatch: with a backlog known and fewer than half a
// batch of slots free, the claimer waits up to the cooldown for slots to
// free up and then claims them together.
func TestClaimerWaitsForHalfABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		b := &timedClaims{Backend: mem}
		release := make(chan struct{}, 100)
		var c *Claimer
		c = NewClaimer(b, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 8, Batch: 8, Lease: time.Minute,
			Poll: time.Hour, Cooldown: 50 * time.Millisecond, Log: quiet,
			Dispatch: func(Claimed) {
				go func() { <-release; c.Done() }()
			},
		})
		insertJobs(t, mem, 20)
		stop := runClaimer(c)
		defer stop()
		synctest.Wait()
		// The first claim took 8; free one slot: a backlog is known, so the
		// claimer waits for 4 (half a batch) or the cooldown.
		release <- struct{}{}
		synctest.Wait()
		if _, counts := b.claims(); len(counts) != 1 {
			t.Fatalf("claims %v; want the claimer waiting for half a batch", counts)
		}
		for range 3 {
			release <- struct{}{}
		}
		synctest.Wait()
		if _, counts := b.claims(); len(counts) != 2 || counts[1] != 4 {
			t.Fatalf("claims %v; want 8 then 4 claimed together", counts)
		}
		// One slot and the cooldown: it claims what it has.
		release <- struct{}{}
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if _, counts := b.claims(); len(counts) != 3 || counts[2] != 1 {
			t.Fatalf("claims %v; want a claim of 1 after the cooldown", counts)
		}
		close(release)
	})
}

// TestClaimerPollsAndDeadlines: an idle claimer finds jobs on its poll
// tick, and each claimed job carries the lease deadline measured from the
// claim's start.
func TestClaimerPollsAndDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		got := make(chan Claimed, 10)
		var c *Claimer
		c = NewClaimer(mem, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 4, Batch: 4, Lease: 30 * time.Second,
			Poll: time.Second, Log: quiet,
			Dispatch: func(cl Claimed) { got <- cl; c.Done() },
		})
		stop := runClaimer(c)
		defer stop()
		synctest.Wait()
		insertJobs(t, mem, 1)
		began := time.Now()
		cl := <-got
		if waited := time.Since(began); waited < time.Second/2 || waited > time.Second {
			t.Fatalf("job claimed %s after insert; want the next poll, within 0.5s to 1s", waited)
		}
		if want := time.Now().Add(30 * time.Second); !cl.LeaseDeadline.Equal(want) {
			t.Fatalf("lease deadline %v, want claim start + lease %v", cl.LeaseDeadline, want)
		}
	})
}

// failingClaims fails every claim.
type failingClaims struct {
	backend.Backend
	mu    sync.Mutex
	calls int
}

func (b *failingClaims) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	return nil, backend.ErrUnavailable
}

// TestClaimerBacksOffOnErrors: failed claims are logged and retried with
// a doubling wait capped at 5s, every slot is given back, and the claimer
// stops promptly while waiting.
func TestClaimerBacksOffOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &failingClaims{Backend: newMemory(t)}
		var log logLines
		c := NewClaimer(b, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 3, Batch: 3, Lease: time.Minute,
			Poll: time.Hour, Log: log.logger(), Dispatch: func(Claimed) { t.Error("dispatched a job from a failed claim") },
		})
		stop := runClaimer(c)
		// 0.1+0.2+0.4+0.8+1.6+3.2+5+5 s: 9 claims by 16.3s.
		time.Sleep(16*time.Second + 400*time.Millisecond)
		b.mu.Lock()
		calls := b.calls
		b.mu.Unlock()
		stop()
		if calls != 9 {
			t.Fatalf("%d claims in 16.4s; want 9 (backoff 100ms doubling, capped at 5s)", calls)
		}
		if n := len(c.slots); n != 3 {
			t.Fatalf("%d of 3 slots free after failed claims", n)
		}
		if !strings.Contains(log.String(), "claim jobs, will retry") {
			t.Fatalf("failed claims not logged: %s", log.String())
		}
	})
}

// replyLost models a claim whose reply is lost to a cancellation: the
// server commits the claim whatever the context, but the caller sees only
// its context's error once the context has ended.
type replyLost struct {
	backend.Backend
	started chan struct{}
	proceed chan struct{}
}

func (b *replyLost) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	b.started <- struct{}{}
	<-b.proceed
	rows, err := b.Backend.JobClaim(context.Background(), p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, err
}

// TestClaimerSeesClaimThrough: a claim in flight when the claimer is
// stopped is seen through and its jobs dispatched, so no job is left
// reserved with an attempt counted that never ran.
func TestClaimerSeesClaimThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		id := insertJobs(t, mem, 1)[0]
		b := &replyLost{Backend: mem, started: make(chan struct{}, 1), proceed: make(chan struct{})}
		var dispatched []int64
		var c *Claimer
		c = NewClaimer(b, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 1, Batch: 1, Lease: time.Minute,
			Poll: time.Hour, Log: quiet,
			Dispatch: func(cl Claimed) { dispatched = append(dispatched, cl.Row.ID); c.Done() },
		})
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { c.Run(ctx) })
		<-b.started
		cancel()
		close(b.proceed)
		wait()
		if len(dispatched) != 1 || dispatched[0] != id {
			row, _ := mem.JobGet(context.Background(), id)
			t.Fatalf("dispatched %v; want job %d, which the claim reserved (now %+v)", dispatched, id, row)
		}
	})
}

// TestClaimerStopsWhileWaitingForSlots: a claimer with no free slot stops
// at once when its context ends, and one waiting out the cooldown for half
// a batch gives its slots back.
func TestClaimerStopsWhileWaitingForSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		insertJobs(t, mem, 4)
		hold := make(chan struct{})
		var c *Claimer
		c = NewClaimer(mem, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 4, Batch: 4, Lease: time.Minute,
			Poll: time.Hour, Cooldown: time.Hour, Log: quiet,
			Dispatch: func(Claimed) { go func() { <-hold; c.Done() }() },
		})
		stop := runClaimer(c)
		synctest.Wait()
		stop() // every slot taken: blocked in takeSlots
		close(hold)
		synctest.Wait()
		if n := len(c.slots); n != 4 {
			t.Fatalf("%d of 4 slots free after the jobs finished", n)
		}
		insertJobs(t, mem, 4)
		block := make(chan struct{})
		c2 := NewClaimer(mem, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 4, Batch: 4, Lease: time.Minute,
			Poll: time.Hour, Cooldown: time.Hour, Log: quiet,
			Dispatch: func(Claimed) {},
		})
		// Take 3 slots away so one is free: a known backlog makes it wait
		// the cooldown for a second one.
		for range 3 {
			<-c2.slots
		}
		ctx, cancel := context.WithCancel(context.Background())
		n, ok := 0, true
		wait := start(func() { n, ok = c2.takeSlots(ctx, true) })
		synctest.Wait()
		cancel()
		wait()
		close(block)
		if ok || n != 0 || len(c2.slots) != 1 {
			t.Fatalf("takeSlots after cancel = %d, %v with %d free; want 0, false and the slot given back", n, ok, len(c2.slots))
		}
	})
}

var _ = errors.New

// TestClaimerWaitsAfterUnrunnableBatch: a full claim of jobs the worker
// cannot run (it gives them back) is followed by the next poll tick, not
// by another claim at once; a full claim with one job it can run is
// followed at once, as a backlog is.
func TestClaimerWaitsAfterUnrunnableBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t)
		const poll = time.Second
		b := &timedClaims{Backend: mem}
		var c *Claimer
		c = NewClaimer(b, ClaimerConfig{
			Queues: []string{"q"}, Concurrency: 4, Batch: 4, Lease: time.Minute,
			Poll: poll, Log: quiet,
			Dispatch: func(Claimed) { go c.Done() },
			Runnable: func(r *backend.JobRow) bool { return r.Priority > 0 },
		})
		insertJobs(t, mem, 8) // priority 0: not runnable here
		stop := runClaimer(c)
		defer stop()
		synctest.Wait()
		if _, counts := b.claims(); len(counts) != 1 || counts[0] != 4 {
			t.Fatalf("claims brought %v jobs before the first tick; want one claim of 4", counts)
		}
		time.Sleep(poll) //nolint:forbidigo // synctest: fake time, advanced at once
		synctest.Wait()
		at, counts := b.claims()
		if gap := at[len(at)-1].Sub(at[0]); len(counts) != 2 || counts[1] != 4 || gap < poll/2 || gap > poll {
			t.Fatalf("claims brought %v jobs at %v; want the second claim of 4 at the next poll, within %s", counts, at, poll)
		}

		// A full claim holding one runnable job is a backlog: the claimer
		// claims again at once (and finds the queue empty).
		ps := make([]backend.InsertParams, 4)
		for i := range ps {
			ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}
		}
		ps[3].Priority = 1
		if _, err := mem.JobInsertMany(context.Background(), ps); err != nil {
			t.Fatal(err)
		}
		time.Sleep(poll) //nolint:forbidigo // synctest: fake time, advanced at once
		synctest.Wait()
		at, counts = b.claims()
		if len(counts) < 4 || counts[2] != 4 || counts[3] != 0 || at[3] != at[2] {
			t.Fatalf("claims brought %v jobs at %v; want a claim of 4 at the next poll and an empty one at once", counts, at)
		}
	})
}
