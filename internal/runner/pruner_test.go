package runner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

// TestPrunerCompletedTypes: a pass prunes each type's completed jobs by
// its own age, and with CompletedTypes alone (Completed 0) only the types
// it names.
func TestPrunerCompletedTypes(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	mem := memory.New(memory.Options{Now: clock})
	t.Cleanup(func() { mem.Close() })
	ctx := context.Background()
	types := []string{"report", "ping", "other"}
	var ps []backend.InsertParams
	for _, typ := range types {
		ps = append(ps, backend.InsertParams{Queue: "q", Type: typ, Payload: []byte("{}"), MaxAttempts: 1})
	}
	ins, err := mem.JobInsertMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := mem.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: len(types), Lease: time.Hour})
	if err != nil || len(rows) != len(types) {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	var outs []backend.Outcome
	for _, r := range rows {
		outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone, Keep: true})
	}
	if _, err := mem.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	kept := func() []int64 {
		t.Helper()
		fs, err := mem.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCompleted})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		slices.Sort(ids)
		return ids
	}
	pass := func(cfg PrunerConfig) {
		cfg.Interval, cfg.Holder = time.Minute, "me"
		NewPruner(mem, mem, cfg, quiet).RunOnce(ctx)
	}
	// Completed 0: only ping, whose hour is up, goes.
	pass(PrunerConfig{CompletedTypes: map[string]time.Duration{"ping": time.Hour}})
	if got, want := kept(), []int64{ins[0].ID, ins[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("kept after the pass by ping's age = %v, want %v", got, want)
	}
	// report keeps a day, the others an hour: other goes.
	pass(PrunerConfig{Completed: time.Hour, CompletedTypes: map[string]time.Duration{"report": 24 * time.Hour}})
	if got, want := kept(), []int64{ins[0].ID}; !slices.Equal(got, want) {
		t.Fatalf("kept after the pass keeping report a day = %v, want %v", got, want)
	}
}
