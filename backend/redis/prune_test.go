package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestPruneByTypeReadsEachJobOnce: a prune by type reads each kept job of
// completedAt once. The jobs of a type whose age is not up leave it for
// their type's zset, so the next prune reads none of them, however many
// are kept: the cost of a pass is the jobs it prunes, not those it keeps.
// A prune without ages per type still prunes them from there.
func TestPruneByTypeReadsEachJobOnce(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	const n = 50
	var params []backend.InsertParams
	for i := range 2 * n {
		typ := "ping"
		if i%2 == 1 {
			typ = "report"
		}
		params = append(params, backend.InsertParams{Queue: "q", Type: typ, Payload: []byte(`{}`), MaxAttempts: 1})
	}
	if _, err := b.JobInsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 2 * n, Lease: time.Minute})
	if err != nil || len(rows) != 2*n {
		t.Fatalf("claimed %d jobs, %v; want %d", len(rows), err, 2*n)
	}
	var outs []backend.Outcome
	for _, r := range rows {
		outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone, Keep: true})
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	// Ages are by the Redis clock, which no test drives: 10 ms puts the
	// jobs well past the 1 ms age below and far from the hour.
	time.Sleep(10 * time.Millisecond) //nolint:forbidigo // see above
	q := b.keys.queue("q")
	base := q.completedAt[:len(q.completedAt)-len("kct")]
	prune := func(rest time.Duration, types ...any) (deleted, read int) {
		t.Helper()
		res, err := scriptPruneCompleted.eval(ctx, b.c, scriptPruneCompleted.keysOf(q), append([]any{ageMicros(rest), backend.ChunkSize}, types...))
		if err != nil {
			t.Fatal(err)
		}
		deleted, read, _, err = pruneReply(scriptPruneCompleted, res, 0)
		if err != nil {
			t.Fatal(err)
		}
		return deleted, read
	}
	zcard := func(key string) int64 {
		t.Helper()
		c, err := b.c.rdb.Do(ctx, b.c.rdb.B().Zcard().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// ping's age (1ms) is up, report's (1h) is not: the pings go, the
	// reports move to their type's zset.
	if d, r := prune(0, "ping", ageMicros(time.Millisecond), "report", ageMicros(time.Hour)); d != n || r != 2*n {
		t.Fatalf("first prune deleted %d and read %d, want %d and %d", d, r, n, 2*n)
	}
	if c, byType := zcard(q.completedAt), zcard(base+"kct:report"); c != 0 || byType != n {
		t.Fatalf("completedAt holds %d, kct:report %d; want 0 and %d", c, byType, n)
	}
	if d, r := prune(0, "ping", ageMicros(time.Millisecond), "report", ageMicros(time.Hour)); d != 0 || r != 0 {
		t.Fatalf("second prune deleted %d and read %d, want none read", d, r)
	}
	kept, err := b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCompleted, Limit: 1000})
	if err != nil || len(kept) != n {
		t.Fatalf("%d completed jobs listed (%v), want the %d reports", len(kept), err, n)
	}
	got, err := b.FinishedPrune(ctx, backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: time.Millisecond})
	if err != nil || got != n {
		t.Fatalf("prune without types = %d, %v; want the %d reports", got, err, n)
	}
	if byType, err := b.c.rdb.Do(ctx, b.c.rdb.B().Exists().Key(base+"kct:report", base+"kcn").Build()).AsInt64(); err != nil || byType != 0 {
		t.Fatalf("%d of the type keys left (%v), want none", byType, err)
	}
	if kept, err := b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCompleted}); err != nil || len(kept) != 0 {
		t.Fatalf("%d completed jobs listed (%v), want none", len(kept), err)
	}
}
