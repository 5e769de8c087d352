package sqlite_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// TestKeyClaimGreedy: a claim of a queue with key rules takes exactly
// what a walk of every due job in claim order would take, skipping the
// jobs their keys' rules hold back, whether the claim's first walk is
// enough or it goes on key by key (a blocked key's backlog at a high
// priority fills the start of the order here). Random jobs, rules and
// outcomes; the reference is computed from a listing of every live job.
func TestKeyClaimGreedy(t *testing.T) {
	t.Parallel()
	for _, rules := range []backend.KeyRules{
		{Limit: 1}, {Limit: 2}, {Ordered: true}, {Ordered: true, OnFailure: backend.KeyContinue},
	} {
		t.Run(fmt.Sprintf("%+v", rules), func(t *testing.T) {
			t.Parallel()
			keyClaimGreedy(t, rules)
		})
	}
}

func keyClaimGreedy(t *testing.T, rules backend.KeyRules) {
	ctx := t.Context()
	b := openAt(t, filepath.Join(t.TempDir(), "keys.db"), sqlite.Options{})
	if err := b.QueueSetKeys(ctx, "q", rules); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(rules.Limit), 36))
	live := map[int64]bool{}
	failedKeys := map[string]int{}
	insert := func(key string, prio int, delay time.Duration) {
		p := oneJob("q")[0]
		p.Key, p.Priority, p.Delay = key, prio, delay
		res, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		live[res[0].ID] = true
	}
	// A big key at the highest priority: once blocked, its backlog fills
	// the start of the claim order.
	for range 150 {
		insert("big", 2, 0)
	}
	randomJob := func() {
		key := ""
		if k := rng.IntN(7); k > 0 {
			key = fmt.Sprintf("k%d", k)
		}
		var delay time.Duration
		if rng.IntN(8) == 0 {
			delay = time.Hour
		}
		insert(key, rng.IntN(2), delay)
	}
	for range 100 {
		randomJob()
	}
	var held []*backend.JobRow
	for round := range 80 {
		// The reference: every live job, walked in claim order.
		var pending []*backend.JobRow
		reserved := map[string]int{}
		head := map[string]int64{}
		now := time.Now()
		var all []*backend.JobRow
		for _, state := range []backend.JobState{backend.StatePending, backend.StateScheduled, backend.StateReserved} {
			rows, err := b.JobList(ctx, backend.JobListParams{State: state, Limit: 10_000})
			if err != nil {
				t.Fatalf("JobList(%s): %v", state, err)
			}
			all = append(all, rows...)
		}
		if len(all) != len(live) {
			t.Fatalf("round %d: %d live jobs listed, want %d", round, len(all), len(live))
		}
		for _, j := range all {
			if j.Key != "" && (head[j.Key] == 0 || j.ID < head[j.Key]) {
				head[j.Key] = j.ID
			}
			switch {
			case j.Status == backend.StateReserved || j.Status == backend.StateCancelling:
				reserved[j.Key]++
			case !j.AvailableAt.After(now):
				pending = append(pending, j)
			}
		}
		backend.SortClaimOrder(pending)
		want := 1 + rng.IntN(5)
		var expect []int64
		for _, j := range pending {
			if len(expect) == want {
				break
			}
			ok := true
			switch {
			case j.Key == "":
			case rules.Ordered:
				ok = reserved[j.Key] == 0 && head[j.Key] == j.ID && (rules.Policy() != backend.KeyHold || failedKeys[j.Key] == 0)
			default:
				ok = reserved[j.Key] < rules.Limit
			}
			if ok {
				expect = append(expect, j.ID)
				reserved[j.Key]++
			}
		}
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: want, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int64, len(rows))
		for i, r := range rows {
			got[i] = r.ID
		}
		if !slices.Equal(got, expect) {
			t.Fatalf("round %d: claim of %d took %v, want %v", round, want, got, expect)
		}
		// Outcomes: most end, some fail or come back, some run on.
		held = append(held, rows...)
		rng.Shuffle(len(held), func(i, k int) { held[i], held[k] = held[k], held[i] })
		var outs []backend.Outcome
		keep := held[:0]
		for _, r := range held {
			o := backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
			switch rng.IntN(8) {
			case 0, 1:
				keep = append(keep, r)
				continue
			case 2:
				o.Kind, o.Error = backend.OutcomeFail, "boom"
				if r.Key != "" {
					failedKeys[r.Key]++
				}
				delete(live, r.ID)
			case 3:
				o.Kind, o.Error = backend.OutcomeRetry, "again"
				if rng.IntN(2) == 0 {
					o.RetryDelay = time.Hour
				}
			default:
				delete(live, r.ID)
			}
			outs = append(outs, o)
		}
		held = keep
		if len(outs) > 0 {
			if res, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil || len(res.Stale)+len(res.Cancelled) > 0 {
				t.Fatalf("complete: %+v, %v", res, err)
			}
		}
		// A held key is sometimes replayed, so it runs on.
		if rules.Policy() == backend.KeyHold && rng.IntN(4) == 0 {
			for key, n := range failedKeys {
				if n == 0 {
					continue
				}
				failed, err := b.FailedList(ctx, backend.FailedListParams{Filter: backend.FailedFilter{Key: key}})
				if err != nil || len(failed) != n {
					t.Fatalf("failed jobs of key %s: %d, %v; want %d", key, len(failed), err, n)
				}
				for _, f := range failed {
					live[f.JobID] = true
				}
				res, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q", Key: key}})
				if err != nil || res.Replayed != n {
					t.Fatalf("replay of key %s: %+v, %v; want %d", key, res, err, n)
				}
				failed, err = b.FailedList(ctx, backend.FailedListParams{})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range failed {
					if f.Key == key {
						t.Fatalf("key %s still has failed job %d after its replay", key, f.JobID)
					}
				}
				failedKeys[key] = 0
				break
			}
		}
		if rng.IntN(3) == 0 {
			randomJob()
		}
	}
	// Every replayed job came back under its own ID.
	for id := range live {
		if _, err := b.JobGet(ctx, id); err != nil {
			t.Fatalf("JobGet(%d): %v", id, err)
		}
	}
}

// TestKeyClaimPastHeldBacklog: a held key whose backlog sits at a higher
// priority than everything else does not hide the jobs behind it: the
// claim walks past it key by key.
func TestKeyClaimPastHeldBacklog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := openAt(t, filepath.Join(t.TempDir(), "held.db"), sqlite.Options{})
	if err := b.QueueSetKeys(ctx, "q", backend.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	ps := make([]backend.InsertParams, 3000)
	for i := range ps {
		ps[i] = oneJob("q")[0]
		ps[i].Key, ps[i].Priority = "big", 5
	}
	if _, err := b.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %d rows, %v; want big's head", len(rows), err)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
		{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	others := []backend.InsertParams{oneJob("q")[0], oneJob("q")[0], oneJob("q")[0]}
	others[1].Key, others[2].Key = "small", "small"
	res, err := b.JobInsertMany(ctx, others)
	if err != nil {
		t.Fatal(err)
	}
	rows, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, len(rows))
	for i, r := range rows {
		got[i] = r.ID
	}
	slices.SortFunc(got, cmp.Compare)
	if want := []int64{res[0].ID, res[1].ID}; !slices.Equal(got, want) {
		t.Fatalf("claim past the held key took %v, want the unkeyed job and small's head %v", got, want)
	}
}

// TestKeyTasksAndTicks: a workflow task's key reaches its job, whether the
// job is inserted with the workflow or released later, and so does a
// schedule tick's.
func TestKeyTasksAndTicks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := openAt(t, filepath.Join(t.TempDir(), "tasks.db"), sqlite.Options{})
	task := func(name, key string, deps ...string) backend.TaskParams {
		p := backend.TaskParams{Name: name, Job: oneJob("q")[0]}
		p.Job.Key = key
		for _, d := range deps {
			p.Deps = append(p.Deps, backend.Dep{Task: d})
		}
		return p
	}
	wf, err := b.WorkflowInsert(ctx, backend.WorkflowParams{Tasks: []backend.TaskParams{
		task("first", "acct"), task("second", "acct", "first")}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.JobGet(ctx, wf.Jobs["first"])
	if err != nil || first.Key != "acct" || first.Turn != 1 {
		t.Fatalf("first task's job = %+v, %v; want key acct, turn 1", first, err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim = %v, %v", rows, err)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	rows, err = b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 || rows[0].Key != "acct" || rows[0].Task != "second" {
		t.Fatalf("claim of the released task = %+v, %v; want second's job with key acct", rows, err)
	}

	if _, err := b.ScheduleUpsert(ctx, []backend.ScheduleDef{{Name: "tick", Spec: "@every 1m", Queue: "q", Type: "t"}}); err != nil {
		t.Fatal(err)
	}
	p := oneJob("q")[0]
	p.Key = "acct"
	tick, err := b.ScheduleTick(ctx, backend.ScheduleTickParams{Name: "tick", Tick: time.Now(), Job: p})
	if err != nil || !tick.Enqueued {
		t.Fatalf("tick = %+v, %v", tick, err)
	}
	if j, err := b.JobGet(ctx, tick.JobID); err != nil || j.Key != "acct" || j.Turn == 0 {
		t.Fatalf("tick's job = %+v, %v; want key acct with a turn", j, err)
	}
}
