package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// charge derives its key from its own account.
type charge struct {
	Account string `json:"account"`
	N       int    `json:"n"`
}

func (charge) Kind() string       { return "charge" }
func (c charge) JobKey() string   { return "account:" + c.Account }
func (c *charge) String() string  { return fmt.Sprintf("%s#%d", c.Account, c.N) }
func (c charge) failsFirst() bool { return c.N%7 == 3 }

// TestKeysOrderedThroughWorker: a worker with 8 slots runs each ordered
// key's jobs one at a time in enqueue order, even when jobs in the middle
// fail twice before they succeed, while keys run beside each other.
func TestKeysOrderedThroughWorker(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	if err := jobq.NewInspector(b).SetQueueKeys(t.Context(), jobq.DefaultQueue, jobq.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 4, 40
	var mu sync.Mutex
	ran := map[string][]int{}
	running := map[string]int{}
	overlap := ""
	tries := map[string]int{}
	reg := jobq.NewRegistry()
	jobq.HandleArgs(reg, func(ctx context.Context, c charge) error {
		k := c.JobKey()
		mu.Lock()
		running[k]++
		if running[k] > 1 && overlap == "" {
			overlap = fmt.Sprintf("two jobs of %s ran at once (%s)", k, c.String())
		}
		tries[c.String()]++
		n := tries[c.String()]
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[k]--
			mu.Unlock()
		}()
		if c.failsFirst() && n <= 2 {
			return errors.New("declined, try again")
		}
		mu.Lock()
		ran[k] = append(ran[k], c.N)
		mu.Unlock()
		return nil
	})
	client := mustClient(t, b, jobq.ClientConfig{})
	for i := range perKey {
		for k := range keys {
			if _, err := client.EnqueueArgs(t.Context(), charge{Account: fmt.Sprint(k), N: i}, jobq.MaxAttempts(5)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := fastConfig()
	cfg.Concurrency = 8
	stop := startWorker(t, b, reg, cfg)
	eventually(t, settle, "every charge to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range ran {
			n += len(r)
		}
		return n == keys*perKey
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if overlap != "" {
		t.Fatal(overlap)
	}
	for k := range keys {
		got := ran[fmt.Sprintf("account:%d", k)]
		if !slices.IsSorted(got) || len(got) != perKey {
			t.Fatalf("account %d ran %v, want 0..%d in order", k, got, perKey-1)
		}
	}
}

// TestKeyOptionWins: the Key option overrides a payload's own key, the
// handler sees the key, and a backend without keys refuses a keyed job.
func TestKeyOptionWins(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	client := mustClient(t, b, jobq.ClientConfig{})
	own, err := client.EnqueueArgs(t.Context(), charge{Account: "a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.EnqueueArgs(t.Context(), charge{Account: "a"}, jobq.Key("override"))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{own: "account:a", other: "override"} {
		if j, err := b.JobGet(t.Context(), id); err != nil || j.Key != want {
			t.Fatalf("job %d key = %v, %v; want %q", id, j, err, want)
		}
	}
	keys, err := jobq.NewInspector(b).Keys(t.Context(), jobq.KeyListParams{})
	if err != nil || len(keys) != 2 {
		t.Fatalf("Keys = %+v, %v; want the two keys", keys, err)
	}
	_, err = client.Enqueue(t.Context(), "t", nil, jobq.Key("bad\nkey"))
	if !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("enqueue with a control character in its key = %v, want ErrInvalidInput", err)
	}
	var ke *backend.InputError
	if !errors.As(err, &ke) || ke.Field != "key" {
		t.Fatalf("error %v does not name the key field", err)
	}
}

// TestRetentionKeepsHeldHead: a worker pruning failed jobs by age and by
// count never deletes the failed head that holds an ordered key: the key
// stays held, visibly, for an operator.
func TestRetentionKeepsHeldHead(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	in := jobq.NewInspector(b)
	if err := in.SetQueueKeys(t.Context(), "ledger", jobq.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("post", func(context.Context, *jobq.Job) error { return jobq.Permanent(errors.New("rejected")) })
	client := mustClient(t, b, jobq.ClientConfig{})
	for range 2 {
		if _, err := client.Enqueue(t.Context(), "post", nil, jobq.Queue("ledger"), jobq.Key("acct")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := client.Enqueue(t.Context(), "post", nil, jobq.Queue("ledger")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fastConfig()
	cfg.Queues = []string{"ledger"}
	cfg.Retention = jobq.Retention{FailedMaxAge: time.Nanosecond, FailedMaxCount: 1, PruneInterval: 20 * time.Millisecond}
	stop := startWorker(t, b, reg, cfg)
	// The three unkeyed jobs fail and are pruned; the key's head fails
	// and stays, holding the key's second job.
	eventually(t, settle, "the unkeyed failures to be pruned", func() bool {
		f := failedJobs(t, b)
		return len(f) == 1 && f[0].Key == "acct"
	})
	time.Sleep(100 * time.Millisecond) //nolint:forbidigo // a few more prune passes must leave the head
	stop()
	keys, err := in.Keys(t.Context(), jobq.KeyListParams{Held: true})
	if err != nil || len(keys) != 1 || keys[0].Pending != 1 || len(failedJobs(t, b)) != 1 {
		t.Fatalf("held keys %+v, %v, failed %d; want acct held by its head with one job waiting", keys, err, len(failedJobs(t, b)))
	}
}

// TestKeyFilterRefusedWithoutKeys: on a backend that keeps no keys a
// filter naming one is refused, never read as no filter at all: a purge
// by key must not empty the queue.
func TestKeyFilterRefusedWithoutKeys(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	makeFailed := func() {
		for _, r := range claimAll(t, b) {
			if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "x"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(t.Context(), "t", nil); err != nil {
		t.Fatal(err)
	}
	makeFailed()
	in := jobq.NewInspector(struct{ backend.Backend }{b}) // keys hidden
	f := jobq.FailedFilter{Queue: jobq.DefaultQueue, Key: "k"}
	if _, err := in.PurgeMatching(t.Context(), f, 0); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("PurgeMatching(key) = %v, want ErrNotSupported", err)
	}
	if _, _, err := in.ReplayAll(t.Context(), f); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("ReplayAll(key) = %v, want ErrNotSupported", err)
	}
	if _, err := in.FailedPage(t.Context(), f, 0, 0); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("FailedPage(key) = %v, want ErrNotSupported", err)
	}
	if _, err := in.PurgeKeepNewest(t.Context(), f, 1); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("PurgeKeepNewest(key) = %v, want ErrNotSupported", err)
	}
	if n := len(failedJobs(t, b)); n != 1 {
		t.Fatalf("%d failed jobs left, want the one untouched", n)
	}
}

func claimAll(t *testing.T, b backend.Backend) []*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{jobq.DefaultQueue}, Max: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
