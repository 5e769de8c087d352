package redis

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestSingleInsertList: a lone plain insert of priority 0 lands in the
// queue's list l, not in the zsets p and o, so the cheap path cannot
// silently stop being taken, and so do the plain jobs of a batch whose IDs
// the script mints (the inserts the inserter merges), with or without
// metadata; other priorities go to p. Its wake-up is published only when the ready set (p and l) was
// empty, and a claim empties the list.
func TestSingleInsertList(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	if _, err := b.reg.index(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	// insert1 runs the script as a lone insert does and returns the job's
	// ID (its ts as in the keys) and whether it published a wake-up.
	insert1 := func() (string, bool) {
		t.Helper()
		p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
		if !lone(&p) {
			t.Fatal("the job is not lone: insert1 would not run")
		}
		call := b.insert1Call(q, &p)
		res, err := b.c.eval(ctx, call.s, call.keys, call.args)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := res.(int64)
		if !ok {
			t.Fatalf("insert1 replied %#v; want ts * 2 + woke", res)
		}
		return hexN(uint64(v>>1), 13), v&1 == 1
	}
	// want checks the members of l (in order) and the sizes of q and o.
	want := func(step string, list []string, ready, readyAt int64) {
		t.Helper()
		l, err := b.c.rdb.Do(ctx, b.c.rdb.B().Lrange().Key(q.readyList).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		np, err1 := b.c.rdb.Do(ctx, b.c.rdb.B().Zcard().Key(q.ready).Build()).AsInt64()
		no, err2 := b.c.rdb.Do(ctx, b.c.rdb.B().Zcard().Key(q.readyAt).Build()).AsInt64()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !slices.Equal(l, list) || np != ready || no != readyAt {
			t.Fatalf("%s: l %v, ZCARD q %d, ZCARD o %d; want l %v, q %d, o %d", step, l, np, no, list, ready, readyAt)
		}
	}

	a, woke := insert1()
	if !woke {
		t.Error("the first job into an empty queue published no wake-up")
	}
	want("one single insert", []string{a}, 0, 0)
	c, woke := insert1()
	if woke {
		t.Error("a job into a queue with a ready job published a wake-up")
	}
	want("two single inserts", []string{a, c}, 0, 0)
	// A lone job of another priority goes to p, through insert.
	prio := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, Priority: 2}
	if lone(&prio) {
		t.Fatal("a job of priority 2 is lone: insert1 would put it in l")
	}
	ins, err := b.JobInsertMany(ctx, []backend.InsertParams{prio})
	if err != nil {
		t.Fatal(err)
	}
	hi := tsHex(ins[0].ID)
	want("a single insert of priority 2", []string{a, c}, 1, 1)
	// Metadata (a trace context) does not keep a job out of l.
	jobs := benchJobs(2, "q")
	jobs[1].Metadata = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	batch, err := b.JobInsertMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	b0, b1 := tsHex(batch[0].ID), tsHex(batch[1].ID)
	want("a batch, one job with metadata", []string{a, c, b0, b1}, 1, 1)

	// Highest priority, then by ID across p and l.
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, tsHex(r.ID))
	}
	if order := []string{hi, a, c, b0, b1}; !slices.Equal(got, order) {
		t.Fatalf("claimed %v, want %v", got, order)
	}
	if md := rows[4].Metadata; !maps.Equal(md, jobs[1].Metadata) {
		t.Fatalf("the job with metadata was claimed with %v, want %v", md, jobs[1].Metadata)
	}
	want("all claimed", nil, 0, 0)
	if n, err := b.c.rdb.Do(ctx, b.c.rdb.B().Exists().Key(q.readyList, q.ready, q.readyAt, q.readyAtCounts).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("EXISTS l p o n = %d, %v; want 0", n, err)
	}

	// A batch whose IDs were minted before the call (it spans queues)
	// goes to p: those IDs may be below IDs already in l.
	mixed := append(benchJobs(2, "q"), benchJobs(1, "other")...)
	if _, err := b.JobInsertMany(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	want("a batch spanning queues", nil, 2, 1)
	// With p holding ready jobs and l empty, a single insert wakes no one.
	d, woke := insert1()
	if woke {
		t.Error("a job into l with ready jobs in p published a wake-up")
	}
	want("a single insert after a batch into p", []string{d}, 2, 1)
	// So does a job with a unique key, whose ID is minted first too.
	u := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: "k"}
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{u}); err != nil {
		t.Fatal(err)
	}
	want("a unique job", []string{d}, 3, 2)
}

// TestBatchInsertListWakes: a batch into an empty queue whose jobs all go
// to l publishes the wake-up an idle worker waits for, and one into a
// queue with ready jobs does not.
func TestBatchInsertListWakes(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	if _, err := b.reg.index(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	insert := func() bool {
		t.Helper()
		call := b.insertCall(q, benchJobs(3, "q"), nil, nil)
		res, err := b.c.eval(ctx, call.s, call.keys, call.args)
		if err != nil {
			t.Fatal(err)
		}
		f := fields{v: res.([]any)}
		woke := f.int(1)
		if f.err != nil {
			t.Fatal(f.err)
		}
		return woke == 1
	}
	if !insert() {
		t.Error("a batch into an empty queue published no wake-up")
	}
	if insert() {
		t.Error("a batch into a queue with ready jobs published a wake-up")
	}
	if n, err := b.c.rdb.Do(ctx, b.c.rdb.B().Llen().Key(q.readyList).Build()).AsInt64(); err != nil || n != 6 {
		t.Fatalf("LLEN l = %d, %v; want 6", n, err)
	}
}

// TestInsert1ClockBehind: when the queue's last ID is ahead of the Redis
// clock (a clock stepped back, or IDs reserved ahead by a batch), insert1
// hands out last + 1, as reserve does, and records it.
func TestInsert1ClockBehind(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	if _, err := b.reg.index(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	const ahead = int64(100_000_000_000_000) // about three years past the clock
	if err := b.c.rdb.Do(ctx, b.c.rdb.B().Set().Key(q.lastTS).Value(strconv.FormatInt(ahead, 10)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
	for i := int64(1); i <= 2; i++ {
		res, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tsHex(res[0].ID), hexN(uint64(ahead+i), 13); got != want {
			t.Fatalf("insert %d got ts %s; want %s (the last one + 1)", i, got, want)
		}
	}
	if last, err := b.c.rdb.Do(ctx, b.c.rdb.B().Get().Key(q.lastTS).Build()).AsInt64(); err != nil || last != ahead+2 {
		t.Fatalf("t = %d, %v; want %d", last, err, ahead+2)
	}
}
