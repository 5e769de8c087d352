package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// checkFailedIndex asserts that failedByJob indexes exactly the failed
// records of every queue of b: one entry per record, from the ID its job
// had to the record's failed ID.
func checkFailedIndex(t *testing.T, b *Backend) {
	t.Helper()
	checkFailedIndexCtx(t.Context(), t, b)
}

func checkFailedIndexCtx(ctx context.Context, t *testing.T, b *Backend) {
	t.Helper()
	queues, err := b.reg.all(ctx)
	if err != nil {
		t.Fatalf("list queues: %v", err)
	}
	for _, name := range queues {
		k := b.keys.queue(name)
		fids, err := b.c.rdb.Do(ctx, b.c.rdb.B().Zrange().Key(k.failed).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatalf("read %s: %v", k.failed, err)
		}
		index, err := b.c.rdb.Do(ctx, b.c.rdb.B().Hgetall().Key(k.failedByJob).Build()).AsStrMap()
		if err != nil {
			t.Fatalf("read %s: %v", k.failedByJob, err)
		}
		if len(index) != len(fids) {
			t.Errorf("queue %s: %d entries in failedByJob for %d failed records (%v, %v)", name, len(index), len(fids), index, fids)
		}
		for _, fid := range fids {
			job, err := b.c.rdb.Do(ctx, b.c.rdb.B().Hget().Key(k.failedPrefix+fid).Field("j").Build()).ToString()
			if err != nil {
				t.Fatalf("read field j of failed record %s of queue %s: %v", fid, name, err)
			}
			if index[job] != fid {
				t.Errorf("queue %s: failedByJob names %q for job %s, whose failed record is %s", name, index[job], job, fid)
			}
		}
	}
}

// checkFailedIndexOf checks the index of the key prefix prefix through a
// backend of its own, in a cleanup: after the test's context ended and
// its backend was closed.
func checkFailedIndexOf(t *testing.T, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Open(ctx, testURL(t), Options{KeyPrefix: prefix, Existing: true, Logger: quiet})
	if err != nil {
		t.Fatalf("open %s to check its failed jobs' index: %v", prefix, err)
	}
	defer func() { _ = b.Close() }()
	checkFailedIndexCtx(ctx, t, b)
}

// TestMigrateIndexesFailed: Migrate from layout 6, whose failed records
// have no entry in failedByJob, indexes them all, over several calls of
// its script when they are many.
func TestMigrateIndexesFailed(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	n := backend.ChunkSize + 3
	ps := make([]backend.InsertParams, n)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: []string{"a", "b"}[i%2], Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	if _, err := b.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a", "b"}, Max: n, Lease: time.Minute})
	if err != nil || len(rows) != n {
		t.Fatalf("claimed %d, %v; want %d", len(rows), err, n)
	}
	outs := make([]backend.Outcome, n)
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "x"}
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	checkFailedIndex(t, b)

	// Layout 6: the same records, no index.
	for _, q := range []string{"a", "b"} {
		mustOK(t, b.c.rdb.Do(ctx, b.c.rdb.B().Del().Key(b.keys.queue(q).failedByJob).Build()).Error())
	}
	mustOK(t, b.c.set(ctx, b.keys.schema, "6"))
	if v, err := b.Migrate(ctx); err != nil || v != LayoutVersion {
		t.Fatalf("Migrate of layout 6 = %d, %v; want %d", v, err, LayoutVersion)
	}
	checkFailedIndex(t, b)
}

// TestFailedWithoutIndexEntry: a failed record without an entry in
// failedByJob, as a layout-6 process still running writes them after the
// migration, is found, replayed and purged by its job ID all the same
// (script "failedof" walks the failed set when the index is short), and
// an entry naming a record that is gone finds nothing.
func TestFailedWithoutIndexEntry(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	ps := make([]backend.InsertParams, 4)
	for i := range ps {
		ps[i] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	}
	res, err := b.JobInsertMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 3, Lease: time.Minute})
	if err != nil || len(rows) != 3 {
		t.Fatalf("claimed %d, %v; want 3", len(rows), err)
	}
	outs := make([]backend.Outcome, len(rows))
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "x"}
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	a, c, live := res[0].ID, res[1].ID, res[3].ID
	k := b.keys.queue("q")
	hdel := func(id int64) {
		mustOK(t, b.c.rdb.Do(ctx, b.c.rdb.B().Hdel().Key(k.failedByJob).Field(tsHex(id)).Build()).Error())
	}
	hdel(a)
	hdel(c)

	if f, err := b.FailedGet(ctx, a); err != nil || f.JobID != a {
		t.Fatalf("FailedGet(%d) without its index entry = %+v, %v; want its failed job", a, f, err)
	}
	if r, err := b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{a}}); err != nil || r.Replayed != 1 {
		t.Fatalf("FailedReplay(%d) without its index entry = %+v, %v; want 1 replayed", a, r, err)
	}
	if row, err := b.JobGet(ctx, a); err != nil || row.Status != backend.StatePending {
		t.Fatalf("JobGet(%d) after the replay = %+v, %v; want it pending", a, row, err)
	}
	if n, err := b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{c}}); err != nil || n != 1 {
		t.Fatalf("FailedPurge(%d) without its index entry = %d, %v; want 1", c, n, err)
	}
	// An entry left by a layout-6 replay, naming a record that is gone.
	mustOK(t, b.c.rdb.Do(ctx, b.c.rdb.B().Hset().Key(k.failedByJob).FieldValue().FieldValue(tsHex(live), tsHex(c)).Build()).Error())
	for _, id := range []int64{a, c, live} {
		if f, err := b.FailedGet(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("FailedGet(%d) = %+v, %v; want ErrNotFound", id, f, err)
		}
	}
	if got, err := b.FailedList(ctx, backend.FailedListParams{}); err != nil || len(got) != 1 || got[0].JobID != res[2].ID {
		t.Fatalf("FailedList = %+v, %v; want job %d's failed row alone", got, err, res[2].ID)
	}
}
