package redis

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// TestInsertsMerge: inserts made while another into the same queue is in
// flight go together in one script call, each caller getting its own
// consecutive IDs; a waiter whose context ends first leaves without
// writing. The server is paused (CLIENT PAUSE) to hold the first insert
// in flight.
func TestInsertsMerge(t *testing.T) {
	srv := redistest.StartServer(t)
	b := openURL(t, srv.URL, Options{Logger: quiet})
	insertJob(t, b, "q") // registers the queue
	ctl, err := redistest.Client(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	before := insertCalls(b)

	if err := ctl.Do(t.Context(), ctl.B().Arbitrary("CLIENT", "PAUSE").Args("300", "WRITE").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ids []int64
		err error
	}
	const callers = 8
	results := make([]result, callers)
	var wg sync.WaitGroup
	call := func(i int, ctx context.Context) {
		ps := make([]backend.InsertParams, 1+i%3)
		for j := range ps {
			ps[j] = backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}
		}
		res, err := b.JobInsertMany(ctx, ps)
		results[i].err = err
		for _, r := range res {
			results[i].ids = append(results[i].ids, r.ID)
		}
	}
	wg.Go(func() { call(0, t.Context()) })
	busy := func() bool {
		b.inserts.mu.Lock()
		defer b.inserts.mu.Unlock()
		qi := b.inserts.queues["q"]
		return qi != nil && qi.busy
	}
	waiting := func() int {
		b.inserts.mu.Lock()
		defer b.inserts.mu.Unlock()
		if qi := b.inserts.queues["q"]; qi != nil {
			return len(qi.waiting)
		}
		return 0
	}
	for !busy() {
		time.Sleep(time.Millisecond)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	wg.Go(func() { call(1, cancelled) })
	for i := 2; i < callers; i++ {
		wg.Go(func() { call(i, t.Context()) })
	}
	for waiting() < callers-1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	for waiting() != callers-2 {
		time.Sleep(time.Millisecond)
	}
	wg.Wait()

	if got := insertCalls(b) - before; got != 2 {
		t.Fatalf("%d insert script calls for %d callers, want 2 (one in flight, the rest merged)", got, callers)
	}
	var all []int64
	for i, r := range results {
		if i == 1 {
			if r.err == nil {
				t.Fatalf("the cancelled waiter's insert succeeded: %v", r.ids)
			}
			continue
		}
		if r.err != nil || len(r.ids) != 1+i%3 {
			t.Fatalf("caller %d: %v, %v", i, r.ids, r.err)
		}
		for j := 1; j < len(r.ids); j++ {
			if r.ids[j] != r.ids[j-1]+1<<queueBits {
				t.Fatalf("caller %d got IDs %v, want consecutive ones", i, r.ids)
			}
		}
		all = append(all, r.ids...)
	}
	slices.Sort(all)
	if len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatalf("IDs handed out twice: %v", all)
	}
	st, err := b.QueueStats(t.Context())
	if err != nil || len(st) != 1 || st[0].Pending != int64(len(all)+1) {
		t.Fatalf("QueueStats = %+v, %v; want %d pending", st, err, len(all)+1)
	}
}

// insertCalls counts the calls of both insert scripts (a lone job goes
// by insert1).
func insertCalls(b *Backend) int {
	c := b.c.slots.called()
	return c["insert"] + c["insert1"]
}
