package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// The key tests of this package: what the conformance suite (area Keys)
// does not reach on Postgres: the statements that insert jobs from SQL
// (workflow tasks, schedule ticks) and the large-batch path, the halt
// trigger's text for a key SQL cannot quote as Go does, the bounded scan
// of a keyed claim, and the plans of the per-key probes.

func keyedJob(queue, key string) backend.InsertParams {
	p := testJob(queue)
	p.Key = key
	return p
}

func insertKeyed(t testing.TB, b *Backend, params ...backend.InsertParams) []int64 {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func turnsOf(t *testing.T, b *Backend, ids []int64) []int64 {
	t.Helper()
	turns := make([]int64, len(ids))
	for i, id := range ids {
		j, err := b.JobGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		turns[i] = j.Turn
	}
	return turns
}

// TestKeyTurnsInOneBatch: a batch's turns are those of its jobs inserted
// one by one, across keys of a queue that had no pending keyed job, and
// through the large-batch path (COPY takes no keyed job).
func TestKeyTurnsInOneBatch(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	unique := keyedJob("t", "b")
	unique.UniqueKey = "once" // through the insert's ON CONFLICT arm
	ids := insertKeyed(t, b, keyedJob("t", "a"), keyedJob("t", "a"), unique, testJob("t"), keyedJob("t", "b"), keyedJob("u", "a"))
	if got, want := fmt.Sprint(turnsOf(t, b, ids)), "[1 2 2 0 3 1]"; got != want {
		t.Fatalf("turns %s, want %s (as if inserted one by one)", got, want)
	}
	batch := make([]backend.InsertParams, 100)
	for i := range batch {
		batch[i] = keyedJob("t", "c")
	}
	turns := turnsOf(t, b, insertKeyed(t, b, batch...))
	for i, turn := range turns {
		if turn != int64(i+2) { // the queue's lowest pending turn is 1
			t.Fatalf("job %d of a batch of 100 has turn %d, want %d", i, turn, i+2)
		}
	}
}

// TestKeysOfTasksAndTicks: a workflow task's job and a schedule tick's job
// carry their key, and take their turn, from the statements that insert
// them in SQL.
func TestKeysOfTasksAndTicks(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	insertKeyed(t, b, keyedJob("w", "acct"))
	first, second := wfTask("first"), wfTask("second", "first")
	first.Job.Key, second.Job.Key = "acct", "acct"
	wf, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{first, second}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := b.JobGet(ctx, wf.Jobs["first"])
	if err != nil || j.Key != "acct" || j.Turn != 2 {
		t.Fatalf("first task's job: %+v, %v; want key acct, turn 2", j, err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"w"}, Max: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var ref backend.JobRef
	for _, r := range rows {
		if r.ID == wf.Jobs["first"] {
			ref = r.Ref()
		}
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	next, err := b.JobList(ctx, backend.JobListParams{State: backend.StatePending, Filter: backend.JobFilter{Queue: "w", Key: "acct"}})
	if err != nil || len(next) != 1 || next[0].Type != "second" || next[0].Turn != 2 {
		t.Fatalf("released task's job: %+v, %v; want the task second, key acct, turn 2 (the key's other job is reserved, turn 1)", next, err)
	}

	if _, err := b.ScheduleUpsert(ctx, []backend.ScheduleDef{{Name: "s", Spec: "@every 1m", Queue: "s", Type: "tick"}}); err != nil {
		t.Fatal(err)
	}
	job := keyedJob("s", "tenant")
	res, err := b.ScheduleTick(ctx, backend.ScheduleTickParams{Name: "s", Tick: time.Now().Truncate(time.Minute), Job: job})
	if err != nil || !res.Enqueued {
		t.Fatalf("tick: %+v, %v", res, err)
	}
	if j, err := b.JobGet(ctx, res.JobID); err != nil || j.Key != "tenant" || j.Turn != 1 {
		t.Fatalf("tick's job: %+v, %v; want key tenant, turn 1", j, err)
	}
}

// TestKeyHaltQuotesAsGo: the halt trigger writes the halted jobs' error
// in SQL, which quotes a key only roughly; the backend reads it back in
// Go's own words (backend.HaltedError) whatever the key holds.
func TestKeyHaltQuotesAsGo(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	const key = "a\"b\\c\u00ad"
	if err := b.QueueSetKeys(ctx, "h", backend.KeyRules{Ordered: true, OnFailure: backend.KeyHalt}); err != nil {
		t.Fatal(err)
	}
	ids := insertKeyed(t, b, keyedJob("h", key), keyedJob("h", key), keyedJob("h", "other"))
	if _, err := b.JobCancel(ctx, ids[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCancelled, Filter: backend.JobFilter{Key: key}})
	if err != nil || len(got) != 2 {
		t.Fatalf("cancelled jobs of the key: %d, %v; want 2", len(got), err)
	}
	if want := backend.HaltedError(key, ids[0]); got[0].ID != ids[1] || got[0].LastError != want || got[0].Key != key {
		t.Fatalf("halted job %d: key %q, error %q; want job %d, %q", got[0].ID, got[0].Key, got[0].LastError, ids[1], want)
	}
	if j, err := b.JobGet(ctx, ids[2]); err != nil || j.Status != backend.StatePending {
		t.Fatalf("another key's job: %+v, %v; want it pending", j, err)
	}
}

// TestKeyedClaimPassesHeldBacklog: a held key's long backlog at a higher
// priority than everything else sits first in claim order. No claim reads
// all of it (each reads at most keyPageFirst + keyPageNext jobs), and the
// claimable job behind it is still reached, within a few claims.
func TestKeyedClaimPassesHeldBacklog(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	if err := b.QueueSetKeys(ctx, "q", backend.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	const backlog = 3000
	big := make([]backend.InsertParams, backlog)
	for i := range big {
		big[i] = keyedJob("q", "big")
		big[i].Priority = 5
	}
	insertKeyed(t, b, big...)
	head := claimOne(t, b, "q")
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: head.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	small := insertKeyed(t, b, keyedJob("q", "small"))[0]
	claims := 0
	for ; claims < 2*backlog/keyPageNext+4; claims++ {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 {
			if rows[0].ID != small {
				t.Fatalf("claimed job %d of key %q while the key is held", rows[0].ID, rows[0].Key)
			}
			return
		}
	}
	t.Fatalf("job %d behind the held backlog was not claimed in %d claims", small, claims)
}

// TestKeyProbePlans: the per-key lookups of a keyed claim and of a keyed
// insert are index probes on the key indexes (migrations/014_key_indexes.sql),
// never a scan of the jobs table or of a key's whole backlog, with
// statistics that saw thousands of keyed jobs.
func TestKeyProbePlans(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	if err := b.QueueSetKeys(ctx, "q", backend.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	batch := make([]backend.InsertParams, 4000)
	for i := range batch {
		batch[i] = keyedJob("q", fmt.Sprintf("k%d", i%40))
	}
	insertKeyed(t, b, batch...)
	insertN(t, b, "plain", 2000)
	execTest(t, `INSERT INTO `+quoteIdent(b.Schema())+`.failed_jobs
		(job_id, queue, type, payload, attempts, max_attempts, priority, error, created_at, key)
		SELECT g, 'q', 't', '{}', 1, 1, 0, 'x', now(), 'k' || (g % 40) FROM generate_series(1000000, 1001999) g`)
	for _, table := range []string{"jobs", "failed_jobs"} {
		execTest(t, "ANALYZE "+quoteIdent(b.Schema())+"."+table)
	}
	plan := explain(t, b, []string{b.q.claimPlan}, b.kq.claimKeyed, "q", 10, int64(time.Minute/time.Microsecond), keyPageFirst(10), keyPageNext)
	for _, idx := range []string{"jobs_claim_idx", "jobs_key_idx", "jobs_key_held_idx", "failed_jobs_key_idx"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("keyed claim plan does not use %s:\n%s", idx, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on jobs") || strings.Contains(plan, "Seq Scan on failed_jobs") {
		t.Errorf("keyed claim plan scans a table:\n%s", plan)
	}
	// The batch of a keyed claim runs it on a generic plan
	// (sqlClaimKeyedPlan): the same index probes, whatever the parameters.
	prepare := "PREPARE keyed_claim(text, int, bigint, int, int) AS " + b.kq.claimKeyed
	generic := fmt.Sprintf("EXECUTE keyed_claim('q', 10, %d, %d, %d)", int64(time.Minute/time.Microsecond), keyPageFirst(10), keyPageNext)
	plan = explain(t, b, []string{b.kq.claimPlan, prepare}, generic)
	if !strings.Contains(plan, "(queue = $1)") {
		t.Errorf("keyed claim after sqlClaimKeyedPlan is not planned generically:\n%s", plan)
	}
	for _, idx := range []string{"jobs_claim_idx", "jobs_key_idx", "jobs_key_held_idx", "failed_jobs_key_idx"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("generic keyed claim plan does not use %s:\n%s", idx, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap") {
		t.Errorf("generic keyed claim plan scans a table:\n%s", plan)
	}
	if err := b.QueueSetKeys(ctx, "q", backend.KeyRules{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if plan := explain(t, b, []string{b.q.claimPlan}, b.kq.claimKeyed, "q", 10, int64(time.Minute/time.Microsecond), keyPageFirst(10), keyPageNext); !strings.Contains(plan, "jobs_key_held_idx") {
		t.Errorf("limited key claim does not count held jobs through jobs_key_held_idx:\n%s", plan)
	}
	args := append(insertArgs([]backend.InsertParams{keyedJob("q", "k1")}, []int{0}), keyArg([]backend.InsertParams{keyedJob("q", "k1")}, []int{0}))
	plan = explain(t, b, nil, b.kq.insert, args...)
	for _, idx := range []string{"jobs_key_turn_idx", "jobs_key_held_idx", "jobs_key_pending_idx"} {
		if !strings.Contains(plan, idx) {
			t.Errorf("keyed insert plan does not use %s:\n%s", idx, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on jobs") {
		t.Errorf("keyed insert plan scans the jobs table:\n%s", plan)
	}
}

// TestClaimKeyedOnlyFollowsRules: a claim of queues that all had key
// rules at the last claim skips sqlClaim (claimKeyedOnly). Rules another
// process changed since still hold from the next claim on: cleared, the
// queue's jobs are claimed without limit and the next claim goes through
// sqlClaim again; paused, nothing is claimed; set again, the limit holds.
func TestClaimKeyedOnlyFollowsRules(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	other := openSchema(t, testURL(t), Options{Schema: b.Schema(), NoVacuum: true})
	ctx := t.Context()
	if err := other.QueueSetKeys(ctx, "q", backend.KeyRules{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	insertKeyed(t, b, keyedJob("q", "k"), keyedJob("q", "k"), keyedJob("q", "k"))
	claimN(t, b, "q", 1) // through sqlClaim: the lists were not read yet
	if !b.allKeyed([]string{"q"}) {
		t.Fatal("after a claim of the keyed queue q, allKeyed(q) = false")
	}
	if rows := claimMax(t, b, "q", 10); len(rows) != 0 {
		t.Fatalf("claimed %d jobs of key k past its limit 1", len(rows))
	}
	if err := other.QueueSetKeys(ctx, "q", backend.KeyRules{}); err != nil {
		t.Fatal(err)
	}
	claimN(t, b, "q", 2) // the rules are gone: no limit
	if b.allKeyed([]string{"q"}) {
		t.Fatal("after the rules of q were cleared, a claim left allKeyed(q) = true")
	}
	insertKeyed(t, b, keyedJob("q", "k"), keyedJob("q", "k"))
	if err := other.QueueSetKeys(ctx, "q", backend.KeyRules{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if rows := claimMax(t, b, "q", 10); len(rows) != 0 {
		t.Fatalf("claimed %d jobs of key k, which holds 3 jobs, past its limit 1", len(rows))
	}
	if err := other.QueuePause(ctx, "q", true); err != nil {
		t.Fatal(err)
	}
	if rows := claimMax(t, b, "q", 10); len(rows) != 0 {
		t.Fatalf("claimed %d jobs of the paused queue q", len(rows))
	}
}

// claimMax claims up to n jobs of queue for a long lease.
func claimMax(t *testing.T, b *Backend, queue string, n int) []*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Hour})
	if err != nil {
		t.Fatalf("JobClaim: %v", err)
	}
	return rows
}

// TestMigrateKeyIndexes: migration 014 leaves the key indexes on pending
// jobs and the held ones, and what the probes of a key's live jobs decide
// holds for jobs queued before it: a new job's turn follows a held job's,
// an ordered key with a held head gives nothing, and the head failing
// under halt cancels the key's pending jobs (the trigger replaced).
func TestMigrateKeyIndexes(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	migrateTo(t, schema, 13)
	s := quoteIdent(schema)
	execTest(t, "INSERT INTO "+s+".queue_settings (queue, key_ordered, key_policy) VALUES ('q', true, 'halt')")
	execTest(t, "INSERT INTO "+s+".jobs (queue, type, payload, max_attempts, key, turn) VALUES ('q', 't', '{}', 1, 'a', 4)")

	b := openSchema(t, testURL(t), Options{Schema: schema, NoVacuum: true})
	ctx := t.Context()
	for idx, want := range map[string]string{
		"jobs_key_idx":      "(queue, key, id) WHERE ((key IS NOT NULL) AND (status = 'pending'::text))",
		"jobs_key_turn_idx": "(queue, key, turn) WHERE ((key IS NOT NULL) AND (status = 'pending'::text))",
		"jobs_key_held_idx": "(queue, key, id) INCLUDE (turn) WHERE ((key IS NOT NULL) AND (status <> 'pending'::text))",
	} {
		var def string
		if err := b.Pool().QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2", schema, idx).Scan(&def); err != nil {
			t.Fatalf("%s: %v", idx, err)
		}
		if !strings.HasSuffix(def, want) {
			t.Errorf("%s after the migration: %s; want it to end %s", idx, def, want)
		}
	}
	head := claimN(t, b, "q", 1)[0]
	ids := insertKeyed(t, b, keyedJob("q", "a"))
	if got := turnsOf(t, b, ids); got[0] != 5 {
		t.Fatalf("turn of a job queued behind the held turn 4: %d, want 5", got[0])
	}
	if rows := claimMax(t, b, "q", 10); len(rows) != 0 {
		t.Fatalf("claimed %d jobs of key a while its head %d is held", len(rows), head.ID)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: head.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.FinishedList(ctx, backend.FinishedListParams{State: backend.StateCancelled, Filter: backend.JobFilter{Key: "a"}})
	if err != nil || len(got) != 1 || got[0].ID != ids[0] {
		t.Fatalf("cancelled jobs of key a after its head failed under halt: %v, %v; want job %d", got, err, ids[0])
	}
}
