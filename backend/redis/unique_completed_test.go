package redis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/jobq/jobq/backend"
)

// completedHeld is an item of queue q whose unique key a kept completed
// job holds on (backend.UniqueCompleted), of type typ.
func completedHeld(q, typ, key string) backend.InsertParams {
	return backend.InsertParams{Queue: q, Type: typ, Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: key,
		UniqueStates: backend.UniqueAllStates | backend.UniqueCompleted}
}

// insertOneRes inserts p and returns its result.
func insertOneRes(t *testing.T, b *Backend, p backend.InsertParams) backend.InsertResult {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil {
		t.Fatalf("insert %q: %v", p.UniqueKey, err)
	}
	return res[0]
}

// completeKept claims the next job of queue q and completes it, kept.
func completeKept(t *testing.T, b *Backend, q string) int64 {
	t.Helper()
	rows := claimN(t, b, 1, time.Minute, q)
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone, Keep: true}}}); err != nil {
		t.Fatal(err)
	}
	return rows[0].ID
}

// uniqueValue is the unique hash's value of key ("" when free).
func uniqueValue(t *testing.T, b *Backend, key string) string {
	t.Helper()
	v, err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Hget().Key(b.keys.unique).Field(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("HGET unique %s: %v", key, err)
	}
	return v
}

// setUnique writes the unique hash's value of key, as a process that died
// between two steps leaves it.
func setUnique(t *testing.T, b *Backend, key, value string) {
	t.Helper()
	if err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Hset().Key(b.keys.unique).FieldValue().FieldValue(key, value).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// uniqueLen is how many keys the unique hash holds.
func uniqueLen(t *testing.T, b *Backend) int64 {
	t.Helper()
	n, err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Hlen().Key(b.keys.unique).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUniqueCompletedMarked: complete leaves a completed holder's key
// held, as reserved; the first insert that finds it names the job after
// marking the key "<ID>@0" (usteal), so that a takeover judged before the
// job completed (it expects the value before the mark) fails: the key
// stays the completed job's. Later inserts read the finished record
// alone.
func TestUniqueCompletedMarked(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	a := insertOneRes(t, b, completedHeld("q", "t", "k")).ID
	completeKept(t, b, "q")
	before := uniqueValue(t, b, "k")
	if id, at, ok := heldBy(before); !ok || id != a || at == 0 {
		t.Fatalf("after the completion the key holds %q; want job %d's reservation, unmarked", before, a)
	}
	for i := range 2 {
		if r := insertOneRes(t, b, completedHeld("q", "t", "k")); !r.Duplicate || r.ID != a || r.Replaced {
			t.Fatalf("insert %d = %+v; want a duplicate of the completed job %d", i, r, a)
		}
		if v, want := uniqueValue(t, b, "k"), idHex(a)+"@0"; v != want {
			t.Fatalf("insert %d: the key holds %q, want %q (marked)", i, v, want)
		}
	}
	// A takeover judged while the job ran, sent after the mark.
	res, err := scriptUSteal.eval(ctx, b.c, scriptUSteal.prefixKeys(b.keys), []any{"k", before, idHex(makeID(1, queueIndexOf(a))), ""})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := asSlice(res); len(v) != 2 || v[1] != idHex(a)+"@0" {
		t.Fatalf("a stale takeover's reply = %v; want the marked value, the key not taken", res)
	}
	if h := uniqueHolder(t, b, "k"); h != a {
		t.Fatalf("the key is held by %d, want the completed job %d", h, a)
	}
}

// TestUniqueCompletedStrays: a key whose value names a job that finished
// holding nothing (cancelled, or completed of a set without
// UniqueCompleted), or a marked key whose completed job is gone (pruned,
// the release lost), never keeps an insert out, however young its
// reservation: no insert of that job can be in flight, so the key is
// taken over at once (bullmq#4311).
func TestUniqueCompletedStrays(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	plain := completedHeld("q", "t", "plain")
	plain.UniqueStates = 0
	done := insertOneRes(t, b, plain).ID
	completeKept(t, b, "q")
	if v := uniqueValue(t, b, "plain"); v != "" {
		t.Fatalf("a job of the default set kept its key %q when it completed", v)
	}
	c := insertOneRes(t, b, completedHeld("q", "t", "cancelled")).ID
	if _, err := b.JobCancel(t.Context(), []int64{c}); err != nil {
		t.Fatal(err)
	}
	if v := uniqueValue(t, b, "cancelled"); v != "" {
		t.Fatalf("a cancelled job kept its key %q", v)
	}
	now := time.Now().UnixMicro()
	gone := makeID(42, queueIndexOf(done)) // a job of a known queue, never written
	for key, value := range map[string]string{
		"plain":     fmt.Sprintf("%s@%d", idHex(done), now),
		"cancelled": fmt.Sprintf("%s@%d", idHex(c), now),
		"pruned":    idHex(gone) + "@0",
	} {
		setUnique(t, b, key, value)
		p := completedHeld("q", "t", key)
		r := insertOneRes(t, b, p)
		if r.Duplicate || r.ID == done || r.ID == c || r.ID == gone {
			t.Fatalf("insert over the stray key %q (%s) = %+v; want a new job", key, value, r)
		}
		if h := uniqueHolder(t, b, key); h != r.ID {
			t.Fatalf("key %q is held by %d, want the new job %d", key, h, r.ID)
		}
	}
}

// TestUniqueCompletedPruneFrees: the prune that deletes a completed
// holder frees its key, by one age and by ages per type (a job its
// type's zset kept first); nothing is left in the unique hash.
func TestUniqueCompletedPruneFrees(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	for i, typ := range []string{"short", "long", "any"} {
		insertOneRes(t, b, completedHeld("q", typ, typ))
		completeKept(t, b, "q")
		if n := uniqueLen(t, b); n != int64(i+1) {
			t.Fatalf("%d keys held after %d completions, want %d", n, i+1, i+1)
		}
	}
	// Ages are by the Redis clock, which no test drives: 10 ms puts the
	// jobs well past the 1 ms ages below and far from the hour.
	time.Sleep(10 * time.Millisecond) //nolint:forbidigo // see above
	prune := func(p backend.FinishedPruneParams, want int, held ...string) {
		t.Helper()
		p.State = backend.StateCompleted
		if n, err := b.FinishedPrune(ctx, p); err != nil || n != want {
			t.Fatalf("FinishedPrune(%+v) = %d, %v; want %d", p, n, err, want)
		}
		var left []string
		for _, k := range []string{"short", "long", "any"} {
			if uniqueValue(t, b, k) != "" {
				left = append(left, k)
			}
		}
		if strings.Join(left, ",") != strings.Join(held, ",") {
			t.Fatalf("after FinishedPrune(%+v) the keys %v are held, want %v", p, left, held)
		}
	}
	// "long" moves to its type's zset; "any" is kept (no age for it).
	prune(backend.FinishedPruneParams{Types: map[string]time.Duration{"short": time.Millisecond, "long": time.Hour}}, 1, "long", "any")
	prune(backend.FinishedPruneParams{Types: map[string]time.Duration{"long": time.Millisecond}}, 1, "any")
	prune(backend.FinishedPruneParams{OlderThan: time.Millisecond}, 1)
	if n := uniqueLen(t, b); n != 0 {
		t.Fatalf("%d keys left after every holder was pruned", n)
	}
	if r := insertOneRes(t, b, completedHeld("q", "t", "long")); r.Duplicate {
		t.Fatalf("insert after the prune = %+v; want a new job", r)
	}
}
