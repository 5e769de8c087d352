package redis

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestUniqueAbandoned: a key whose holder is not live (its job ended and
// the key was not freed, or its insert died after reserving it) is not
// given to another insert while the reservation is younger than the grace
// period, since the holder may still be written, yet that insert is no
// duplicate of it either (it would name a job that may never exist): it
// fails as unavailable. The key is taken over once the reservation is
// older.
func TestUniqueAbandoned(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	ghost := makeID(42, 1) // no such job
	keyed := func(key string) []backend.InsertParams {
		return []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: key}}
	}
	now := time.Now().UnixMicro()
	old := now - b.grace.Microseconds() - time.Minute.Microseconds()
	for key, at := range map[string]int64{"young": now, "old": old} {
		if err := b.c.rdb.Do(ctx, b.c.rdb.B().Hset().Key(b.keys.unique).FieldValue().FieldValue(key, fmt.Sprintf("%s@%d", idHex(ghost), at)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.JobInsertMany(ctx, keyed("young"))
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("insert over a young reservation of job %d, which does not exist = %+v, %v; want ErrUnavailable", ghost, res, err)
	}
	res, err = b.JobInsertMany(ctx, keyed("old"))
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert over an abandoned reservation = %+v, %v; want a new job", res, err)
	}
	// The new job holds the key now.
	again, err := b.JobInsertMany(ctx, keyed("old"))
	if err != nil || !again[0].Duplicate || again[0].ID != res[0].ID {
		t.Fatalf("second insert = %+v, %v; want a duplicate of %d", again, err, res[0].ID)
	}
}

// TestUniqueKeyFreed: once the job holding a unique key ends, the key's
// entry leaves the prefix's hash of keys (U): nothing accumulates there.
// That a key is unique across queues and free again once its job ended is
// the conformance suite's (area Unique, AcrossQueues).
func TestUniqueKeyFreed(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	in := func(queue string) backend.InsertParams {
		return backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: "k"}
	}
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{in("a"), in("b")}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %v, %v", rows, err)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.c.rdb.Do(ctx, b.c.rdb.B().Hlen().Key(b.keys.unique).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("unique keys left after the job ended: %d, %v", n, err)
	}
}
