package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestConflictHolderGone: the holder of a key that the reservation found
// live, and which ended before the script "conflict" ran, is reported
// gone, not changed, and the item is inserted again: a new job, since
// the key is free now, never a duplicate naming a job that no longer
// exists.
func TestConflictHolderGone(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{"v":1}`), MaxAttempts: 1, UniqueKey: "k"}
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	holder := res[0].ID
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %v, %v", rows, err)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}

	// What insertUnique does once its reservation named holder as live.
	p.Payload, p.OnConflict = []byte(`{"v":2}`), backend.ConflictReplace
	params := []backend.InsertParams{p}
	calls, groups, asked, err := b.conflictCalls(ctx, params, map[string]int{"k": 0}, map[string]int64{"k": holder})
	if err != nil || len(calls) != 1 {
		t.Fatalf("conflictCalls = %d calls, %v", len(calls), err)
	}
	if err := b.c.evalAll(ctx, calls, true); err != nil {
		t.Fatal(err)
	}
	out := []backend.InsertResult{{ID: holder, Duplicate: true}}
	gone, err := b.afterConflict(calls, groups, asked, out)
	if err != nil || len(gone) != 1 || out[0].Replaced {
		t.Fatalf("afterConflict = gone %v, %+v, %v; want item 0 gone, not replaced", gone, out, err)
	}
	if err := b.insertAgain(ctx, params, gone, out, 0); err != nil {
		t.Fatal(err)
	}
	if out[0].Duplicate || out[0].ID == holder {
		t.Fatalf("inserted again = %+v, want a new job (job %d ended)", out[0], holder)
	}
	row, err := b.JobGet(ctx, out[0].ID)
	if err != nil || string(row.Payload) != `{"v":2}` || row.Status != backend.StatePending {
		t.Fatalf("new job = %+v, %v; want pending with the new payload", row, err)
	}
	if err := b.insertAgain(ctx, params, gone, out, conflictTries); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatal("insertAgain past its tries succeeded, want ErrUnavailable")
	}
}
