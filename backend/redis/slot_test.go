package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestKeySlot: the CRC16 and hash-tag rules of Redis Cluster.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789": 12739, "somekey": 11058, "foo": 12182, "bar": 5061,
		"{foo}.x": 12182, "x{foo}": 12182, "a{foo}b{bar}": 12182,
		"foo{{bar}}": keySlot("{bar"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if keySlot("foo{}{bar}") == keySlot("bar") {
		t.Error("an empty hash tag must not count")
	}
	// Every key of a queue shares the slot of its name.
	k := newKeyspace("app:1").queue("mail.out")
	for _, key := range []string{k.lastTS, k.ready, k.readyOld, k.readyList, k.readyAt, k.delayed, k.reserved, k.failed, k.job(makeID(5, 1)), k.failedJob(makeID(6, 1)),
		k.cancelling, k.completed, k.completedAt, k.cancelled, k.cancelledAt, k.finishedPrefix + "x"} {
		if keySlot(key) != keySlot("mail.out") {
			t.Errorf("key %q is not in the slot of its queue", key)
		}
	}
}

// TestScriptKeysOneSlot runs every script through the backend's own calls
// (inserts with and without unique keys, over one queue and several,
// claims, every outcome, extensions, releases, sweeps, stats, failed-job
// lists, replays, purges, a unique key taken over from a dead holder) and
// checks that the keys of each call share one Cluster slot. The
// conformance suite runs with the same check on every call.
func TestScriptKeysOneSlot(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(q string, uniq string, delay time.Duration) backend.InsertParams {
		return backend.InsertParams{Queue: q, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: uniq, Delay: delay}
	}
	_, err := b.JobInsertMany(ctx, []backend.InsertParams{p("a", "", 0)})
	must(err)
	_, err = b.JobInsertMany(ctx, []backend.InsertParams{p("a", "k1", 0), p("b", "k2", 0), p("b", "", time.Millisecond)})
	must(err)
	// A replace of k2's holder, in queue b, from an insert into queue a
	// (conflict).
	r := p("a", "k2", 0)
	r.OnConflict = backend.ConflictReplace
	_, err = b.JobInsertMany(ctx, []backend.InsertParams{r})
	must(err)
	// A deadline reads the queue's clock first (now), in a queue of its
	// own, so that the claims below do not see the job.
	dl := p("c", "", time.Hour)
	dl.Deadline = time.Now().Add(2 * time.Hour)
	_, err = b.JobInsertMany(ctx, []backend.InsertParams{dl})
	must(err)
	// A stale holder of k3: a job that never existed, reserved long ago.
	must(b.c.rdb.Do(ctx, b.c.rdb.B().Hset().Key(b.keys.unique).FieldValue().FieldValue("k3", idHex(makeID(1, 1))+"@1").Build()).Error())
	_, err = b.JobInsertMany(ctx, []backend.InsertParams{p("a", "k3", 0)})
	must(err)
	time.Sleep(2 * time.Millisecond)
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a", "b"}, Max: 10, Lease: time.Minute})
	must(err)
	if len(rows) != 5 {
		t.Fatalf("claimed %d jobs, want 5", len(rows))
	}
	_, err = b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: []backend.JobRef{rows[0].Ref()}, Lease: time.Minute})
	must(err)
	must(b.JobProgress(ctx, rows[0].Ref(), backend.Progress{Percent: 5, Message: "slot"}))
	_, err = b.JobRelease(ctx, []backend.JobRef{rows[0].Ref()})
	must(err)
	_, err = b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
		{Ref: rows[1].Ref(), Kind: backend.OutcomeDone},
		{Ref: rows[2].Ref(), Kind: backend.OutcomeRetry, RetryDelay: time.Hour},
		{Ref: rows[3].Ref(), Kind: backend.OutcomeFail, Error: "x"},
	}})
	must(err)
	// A lease left to run out, for the sweep to move: the job released
	// above, claimed again. (It fails, its one attempt spent: the second
	// failed job the replay and purge below need.)
	rows, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{rows[0].Queue}, Max: 1, Lease: time.Millisecond})
	must(err)
	if len(rows) != 1 {
		t.Fatalf("claimed %d jobs for the sweep, want 1", len(rows))
	}
	time.Sleep(5 * time.Millisecond)
	swept, err := b.LeaseSweep(ctx, backend.SweepParams{})
	must(err)
	if len(swept.Jobs) != 1 || swept.Jobs[0].Ref != rows[0].Ref() || !swept.Jobs[0].Failed {
		t.Fatalf("sweep moved %+v; want the expired claim %+v, failed", swept.Jobs, rows[0].Ref())
	}
	_, err = b.QueueStats(ctx)
	must(err)
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	must(err)
	if len(failed) < 2 {
		t.Fatalf("%d failed jobs, want at least 2", len(failed))
	}
	_, err = b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{failed[0].JobID}})
	must(err)
	_, err = b.FailedPurge(ctx, backend.FailedPurgeParams{IDs: []int64{failed[1].JobID}})
	must(err)
	_, err = b.FailedPurge(ctx, backend.FailedPurgeParams{})
	must(err)
	// Cancel and retention (cancel.go, retention.go).
	ids, err := b.JobInsertMany(ctx, []backend.InsertParams{p("a", "", 0), p("b", "", 0)})
	must(err)
	_, err = b.JobCancel(ctx, []int64{ids[0].ID, ids[1].ID})
	must(err)
	_, err = b.JobCancelling(ctx)
	must(err)
	_, err = b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCancelled})
	must(err)
	_, err = b.JobList(ctx, backend.JobListParams{State: backend.StatePending})
	must(err)
	_, err = b.FinishedPrune(ctx, backend.FinishedPruneParams{State: backend.StateCancelled, OlderThan: time.Hour})
	must(err)
	_, err = b.FinishedPrune(ctx, backend.FinishedPruneParams{State: backend.StateCompleted, Types: map[string]time.Duration{"t": time.Hour}})
	must(err)
	_, err = b.PruneTurn(ctx, "me", time.Minute)
	must(err)
	def := backend.ScheduleDef{Name: "s", Spec: "@every 1s", Queue: "a", Type: "t"}
	_, err = b.ScheduleUpsert(ctx, []backend.ScheduleDef{def})
	must(err)
	_, err = b.ScheduleTick(ctx, backend.ScheduleTickParams{Name: "s", Tick: time.Now(), Job: p("a", "", 0)})
	must(err)
	def.Queue = "b" // carries the last tick over (tickmove)
	_, err = b.ScheduleUpsert(ctx, []backend.ScheduleDef{def})
	must(err)
	must(b.QueuePause(ctx, "a", true))
	must(b.QueueSetLimits(ctx, "a", backend.QueueLimits{Concurrency: 1, Rate: 5, RatePeriod: time.Second}))
	must(b.QueuePause(ctx, "a", false))
	// Keys (keyrules.go).
	must(b.QueueSetKeys(ctx, "a", backend.KeyRules{Limit: 1}))
	_, err = b.KeyList(ctx, backend.KeyListParams{})
	must(err)
	_, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a", "b"}, Max: 10, Lease: time.Minute})
	must(err)
	// Raising a layout-4 prefix moves its ready jobs (adopt).
	must(b.c.set(ctx, b.keys.schema, "4"))
	_, err = b.Migrate(ctx)
	must(err)
	// Raising a layout-8 prefix converts its keys (rekey).
	must(b.c.set(ctx, b.keys.schema, "8"))
	_, err = b.Migrate(ctx)
	must(err)
	// Workflows (workflow_test.go).
	exerciseWorkflows(t, b)

	calls := b.c.slots.called()
	for _, s := range allScripts {
		if calls[s.name] == 0 {
			t.Errorf("script %s was not run: extend the test", s.name)
		}
	}
}
