package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
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

// TestClaimerWaitsAfterPartialClaim: a claim that brings several jobs but
// not a full batch is followed by the cooldown before the next claim, even
// when a wake-up is waiting; a claim that brings one job is not.
func TestClaimerWaitsAfterPartialClaim(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mem := memory.New(memory.Options{})
	defer mem.Close()
	const cooldown = 200 * time.Millisecond
	b := &timedClaims{Backend: mem}
	wake := make(chan struct{}, 1)
	var c *Claimer
	c = NewClaimer(b, ClaimerConfig{
		Queues: []string{"q"}, Concurrency: 10, Batch: 10, Lease: time.Minute,
		Poll: time.Hour, Cooldown: cooldown, Wake: wake, Log: quiet,
		Dispatch: func(*backend.JobRow) { go c.Done() },
	})
	waitClaims := func(n int) ([]time.Time, []int) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			at, counts := b.claims()
			if len(at) >= n {
				return at, counts
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d claims after 5s, want %d (counts %v)", len(at), n, counts)
			}
			time.Sleep(time.Millisecond)
		}
	}

	insertJobs(t, mem, 3)
	finished := make(chan struct{})
	go func() { c.Run(ctx); close(finished) }()
	defer func() { cancel(); <-finished }()

	waitClaims(1)
	insertJobs(t, mem, 1)
	wake <- struct{}{}
	at, counts := waitClaims(2)
	if counts[0] != 3 || counts[1] != 1 {
		t.Fatalf("claims brought %v jobs; want 3 then 1", counts)
	}
	if gap := at[1].Sub(at[0]); gap < cooldown {
		t.Fatalf("next claim %s after a claim of 3 of 10; want the %s cooldown first", gap, cooldown)
	}

	insertJobs(t, mem, 1)
	wake <- struct{}{}
	at, counts = waitClaims(3)
	if counts[2] != 1 {
		t.Fatalf("third claim brought %d jobs; want 1", counts[2])
	}
	if gap := at[2].Sub(at[1]); gap >= cooldown {
		t.Fatalf("next claim %s after a claim of 1; want it at the wake-up, without the cooldown", gap)
	}
}
