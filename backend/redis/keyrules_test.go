package redis

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// keyedJob is a keyed job of queue q for the tests here.
func keyedJob(q, key string) backend.InsertParams {
	return backend.InsertParams{Queue: q, Type: "t", Payload: []byte("{}"), MaxAttempts: 3, Key: key}
}

// TestKeyedTaskAndTick: a workflow task's job and a schedule's job carry
// their key, take their turn and obey the queue's key rules.
func TestKeyedTaskAndTick(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	if err := b.QueueSetKeys(ctx, "w", backend.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	first := keyedJob("w", "acct")
	ins, err := b.JobInsertMany(ctx, []backend.InsertParams{first})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Name: "wf", Tasks: []backend.TaskParams{
		{Name: "a", Job: keyedJob("w", "acct")},
		{Name: "b", Job: keyedJob("w", "acct"), Deps: []backend.Dep{{Task: "a"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.JobGet(ctx, wf.Jobs["a"])
	if err != nil || task.Key != "acct" || task.Turn != 2 {
		t.Fatalf("task a's job = %+v, %v; want key acct, turn 2", task, err)
	}
	// Ordered: the plain job first, then the task's.
	for _, want := range []int64{ins[0].ID, wf.Jobs["a"]} {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 10, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].ID != want {
			t.Fatalf("claim = %v, %v; want only job %d", rows, err, want)
		}
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Task b was released by a's completion, keyed.
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 1 || rows[0].Key != "acct" || rows[0].Task != "b" {
		t.Fatalf("claim = %v, %v; want task b's keyed job", rows, err)
	}
	def := backend.ScheduleDef{Name: "s", Spec: "@every 1s", Queue: "w", Type: "t"}
	if _, err := b.ScheduleUpsert(ctx, []backend.ScheduleDef{def}); err != nil {
		t.Fatal(err)
	}
	res, err := b.ScheduleTick(ctx, backend.ScheduleTickParams{Name: "s", Tick: time.Now(), Job: keyedJob("w", "acct")})
	if err != nil || !res.Enqueued {
		t.Fatalf("ScheduleTick = %+v, %v", res, err)
	}
	if g, err := b.JobGet(ctx, res.JobID); err != nil || g.Key != "acct" {
		t.Fatalf("tick's job = %+v, %v; want key acct", g, err)
	}
	// Task b runs: the tick's job waits behind it.
	if rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 10, Lease: time.Minute}); err != nil || len(rows) != 0 {
		t.Fatalf("claim = %v, %v; want none while task b runs", rows, err)
	}
}

// TestKeyedStatsAndMultiQueue: keyed ready jobs count as pending, list as
// pending, and a claim over several queues takes them in claim order.
func TestKeyedStatsAndMultiQueue(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	hi := keyedJob("a", "k")
	hi.Priority = 3
	ins, err := b.JobInsertMany(ctx, []backend.InsertParams{keyedJob("a", "k"), keyedJob("b", "k"), hi,
		{Queue: "b", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Pending != 2 {
			t.Fatalf("stats of %s: %+v, want 2 pending", s.Queue, s)
		}
	}
	rows, err := b.JobList(ctx, backend.JobListParams{State: backend.StatePending, Filter: backend.JobFilter{Key: "k"}})
	if err != nil || len(rows) != 3 {
		t.Fatalf("JobList(key k) = %d rows, %v; want 3", len(rows), err)
	}
	got, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a", "b"}, Max: 3, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(got))
	for i, r := range got {
		ids[i] = r.ID
	}
	// Priority 3 first, then b's unkeyed job (turn 0), then turn 1 by ID.
	if want := []int64{ins[2].ID, ins[3].ID, ins[0].ID}; !slices.Equal(ids, want) {
		t.Fatalf("claim over a and b took %v, want %v", ids, want)
	}
}

// TestHaltedErrorText: the error of a halted job is backend.HaltedError,
// the head's whole ID and the key quoted as Go does, built in Lua.
func TestHaltedErrorText(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	const key = `a "quoted" \ key ✓`
	if err := b.QueueSetKeys(ctx, "h", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt}); err != nil {
		t.Fatal(err)
	}
	ins, err := b.JobInsertMany(ctx, []backend.InsertParams{keyedJob("h", key), keyedJob("h", key)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobCancel(ctx, []int64{ins[0].ID}); err != nil {
		t.Fatal(err)
	}
	fin, err := b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCancelled, Filter: backend.JobFilter{Key: key}})
	if err != nil || len(fin) != 2 {
		t.Fatalf("FinishedList = %d, %v; want both jobs", len(fin), err)
	}
	if want := backend.HaltedError(key, ins[0].ID); fin[0].LastError != want || fin[0].Key != key {
		t.Fatalf("halted job: error %q key %q; want %q", fin[0].LastError, fin[0].Key, want)
	}
	if list, err := b.KeyList(ctx, backend.KeyListParams{}); err != nil || len(list) != 0 {
		t.Fatalf("KeyList = %+v, %v; want no key left", list, err)
	}
}

// TestOrderedUnderRacingClaimers: eight claimers work one ordered key of
// 200 jobs, every third attempt retried at once: the jobs start in ID
// order, one at a time, and each runs to done after its retries.
func TestOrderedUnderRacingClaimers(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	if err := b.QueueSetKeys(ctx, "o", backend.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	ps := make([]backend.InsertParams, 200)
	for i := range ps {
		ps[i] = keyedJob("o", "seq")
		ps[i].MaxAttempts = 10
	}
	ins, err := b.JobInsertMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, done, attempts := 0, map[int64]bool{}, 0
	var starts []int64
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				finished := len(done) == len(ins)
				mu.Unlock()
				if finished || time.Now().After(deadline) {
					return
				}
				rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"o"}, Max: 3, Lease: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				for _, r := range rows {
					mu.Lock()
					running++
					if running > 1 {
						mu.Unlock()
						errs <- fmt.Errorf("job %d started while another job of the key ran", r.ID)
						return
					}
					starts = append(starts, r.ID)
					attempts++
					retry := attempts%3 == 0
					mu.Unlock()
					// Counted down before the completion: a claim racing
					// with it may see the key still taken, never the other
					// way round.
					mu.Lock()
					running--
					if !retry {
						done[r.ID] = true
					}
					mu.Unlock()
					out := backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
					if retry {
						out = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeRetry, Error: "again"}
					}
					if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(done) != len(ins) {
		t.Fatalf("%d of %d jobs done before the deadline", len(done), len(ins))
	}
	// Starts go in ID order, a retried job starting again before the next.
	for i := 1; i < len(starts); i++ {
		if starts[i] < starts[i-1] {
			t.Fatalf("job %d started after job %d", starts[i], starts[i-1])
		}
	}
}

// layout8 writes a queue's keyed structures back as layout 8 kept them
// (Kk's members the claimable job's member in Kr:<key> and the key, with
// their map Km; each key's live jobs by turn in Kt:<key>, no Kn), for
// TestRekey.
var layout8 = newScript("layout8", `
local base = KEYS[1]
for _, key in ipairs(redis.call('SMEMBERS', base .. 'Ks')) do
  for _, id in ipairs(redis.call('ZRANGE', base .. 'Kl:' .. key, 0, -1)) do
    local tu = string.match(redis.call('HGET', base .. 'j:' .. id, 'ky'), '^(%d+) ')
    redis.call('ZADD', base .. 'Kt:' .. key, tu, id)
  end
  local s = redis.call('ZSCORE', base .. 'Kk', key)
  if s then
    local m = redis.call('ZRANGE', base .. 'Kr:' .. key, 0, 0)[1] .. key
    redis.call('ZREM', base .. 'Kk', key)
    redis.call('ZADD', base .. 'Kk', s, m)
    redis.call('HSET', base .. 'Km', key, m)
  end
end
redis.call('DEL', base .. 'Kn')
return 0`)

// TestRekey: Migrate converts a layout-8 prefix's keys, and its keyed
// jobs then run as before: one at a time per key, in turn, every one.
func TestRekey(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	if err := b.QueueSetKeys(ctx, "q", backend.KeyRules{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	var ps []backend.InsertParams
	for _, key := range []string{"a", "b", "c", "a", "c", "c"} {
		ps = append(ps, keyedJob("q", key))
	}
	ins, err := b.JobInsertMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	keyOf := map[int64]string{}
	for i, r := range ins {
		keyOf[r.ID] = ps[i].Key
	}
	claim := func() []*backend.JobRow {
		t.Helper()
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// The keys' first jobs are running across the upgrade.
	held := claim()
	base := b.keys.queue("q").jobPrefix[:len(b.keys.queue("q").jobPrefix)-2]
	if _, err := b.c.eval(ctx, layout8, []string{base}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.c.set(ctx, b.keys.schema, "8"); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Migrate(ctx); err != nil || v != LayoutVersion {
		t.Fatalf("Migrate = %d, %v", v, err)
	}
	old, err := b.c.existAll(ctx, []string{base + "Km", base + "Kt:a", base + "Kt:c"})
	if err != nil || slices.Contains(old, true) {
		t.Fatalf("layout 8's keys after Migrate: %v, %v", old, err)
	}
	order := map[string][]int64{}
	done := 0
	for running := held; len(running) > 0; running = claim() {
		seen := map[string]bool{}
		outs := make([]backend.Outcome, len(running))
		for i, r := range running {
			k := keyOf[r.ID]
			if seen[k] {
				t.Fatalf("two jobs of key %s claimed at once", k)
			}
			seen[k] = true
			order[k] = append(order[k], r.ID)
			outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
		}
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
			t.Fatal(err)
		}
		done += len(running)
	}
	if done != len(ps) {
		t.Fatalf("%d jobs ran after Migrate, want %d", done, len(ps))
	}
	for k, ids := range order {
		if !slices.IsSorted(ids) {
			t.Errorf("key %s ran %v, out of order", k, ids)
		}
	}
}
