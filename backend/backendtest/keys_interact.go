package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testKeysInteract: keys beside the other controls of a queue and the
// other ways a job comes to be: pause and rate limits still apply, unique
// keys still deduplicate, a workflow task and a schedule's tick carry
// their key, a cancelled running head lets its key go on, and pruning
// failed jobs by filter can keep the heads that hold their keys.
func testKeysInteract(t *testing.T, h Harness) {
	parallel(t, h, "PauseAndRate", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		qc := b.(backend.QueueController)
		setKeys(t, c, "p", backend.KeyRules{Limit: 5})
		insertIDs(t, b, keyed("p", "a"), keyed("p", "a"), keyed("p", "b"), keyed("p", "b"))
		if err := qc.QueuePause(t.Context(), "p", true); err != nil {
			t.Fatal(err)
		}
		claimNone(t, b, "p")
		if err := qc.QueuePause(t.Context(), "p", false); err != nil {
			t.Fatal(err)
		}
		if err := qc.QueueSetLimits(t.Context(), "p", backend.QueueLimits{Rate: 3, RatePeriod: time.Hour}); err != nil {
			t.Fatal(err)
		}
		// The rate allows 3 this hour, whatever the key limit would.
		if rows := claim(t, b, 10, longLease, "p"); len(rows) != 3 {
			t.Fatalf("claim under a rate of 3 took %v, want 3 jobs", keysOf(rows))
		}
		claimNone(t, b, "p")
	})
	parallel(t, h, "Unique", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "u", backend.KeyRules{Ordered: true})
		p := keyed("u", "a")
		p.UniqueKey = "once"
		first := insertOne(t, b, p)
		res := insert(t, b, p)
		if !res[0].Duplicate || res[0].ID != first {
			t.Fatalf("second insert of unique key = %+v, want a duplicate of %d", res[0], first)
		}
		wantKeyInfo(t, c, backend.KeyListParams{}, "a", 1, 0, 0, false)
		if g := get(t, b, first); g.Turn != 1 {
			t.Fatalf("the duplicate moved the job's turn to %d", g.Turn)
		}
	})
	parallel(t, h, "Workflow", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		wf, ok := b.(backend.Workflower)
		if !ok {
			t.Skip("backend does not implement backend.Workflower")
		}
		setKeys(t, c, "w", backend.KeyRules{Ordered: true})
		// A plain job of key a first: the tasks of key a wait behind it.
		plain := insertOne(t, b, keyed("w", "a"))
		ins, err := wf.WorkflowInsert(t.Context(), backend.WorkflowParams{Tasks: []backend.TaskParams{
			{Name: "first", Job: keyed("w", "a")},
			{Name: "second", Job: keyed("w", "a"), Deps: []backend.Dep{{Task: "first"}}},
		}})
		if err != nil {
			t.Fatalf("WorkflowInsert: %v", err)
		}
		rows := claim(t, b, 10, longLease, "w")
		if len(rows) != 1 || rows[0].ID != plain {
			t.Fatalf("claim = %v, want only the plain job %d, the head of key a", keysOf(rows), plain)
		}
		completeFresh(t, b, done(rows[0].Ref()))
		task := claimOne(t, b, "w")
		if task.Task != "first" || task.Key != "a" || task.WorkflowID != ins.ID || task.Turn == 0 {
			t.Fatalf("claimed %+v, want task first of workflow %d with key a and a turn", task, ins.ID)
		}
		completeFresh(t, b, done(task.Ref()))
		second := claimOne(t, b, "w")
		if second.Task != "second" || second.Key != "a" {
			t.Fatalf("claimed task %q key %q, want the released task second with key a", second.Task, second.Key)
		}
	})
	parallel(t, h, "Schedule", func(t *testing.T, b backend.Backend) {
		keyCtl(t, b)
		s, ok := b.(backend.ScheduleStore)
		if !ok {
			t.Skip("backend does not implement backend.ScheduleStore")
		}
		upsert(t, s, def("nightly", "@daily"))
		p := tickParams("nightly", time.Now().Truncate(time.Second))
		p.Job.Key = "tenant-7"
		res, err := s.ScheduleTick(t.Context(), p)
		if err != nil || !res.Enqueued {
			t.Fatalf("ScheduleTick = %+v, %v", res, err)
		}
		if g := get(t, b, res.JobID); g.Key != "tenant-7" || g.Turn != 1 {
			t.Fatalf("the tick's job has key %q turn %d, want tenant-7 and 1", g.Key, g.Turn)
		}
	})
	parallel(t, h, "CancelRunningHead", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		cn, _ := canceller(t, b)
		setKeys(t, c, "h", backend.KeyRules{Ordered: true})
		a := insertIDs(t, b, keyed("h", "a"), keyed("h", "a"))
		head := claimOne(t, b, "h")
		if res, err := cn.JobCancel(t.Context(), []int64{head.ID}); err != nil || res[0].Outcome != backend.CancelRequested {
			t.Fatalf("JobCancel(running head) = %+v, %v", res, err)
		}
		// Cancelling: the head still holds its key's only turn.
		claimNone(t, b, "h")
		if _, err := b.JobRelease(t.Context(), []backend.JobRef{head.Ref()}); err != nil {
			t.Fatalf("JobRelease: %v", err)
		}
		if r := claimOne(t, b, "h"); r.ID != a[1] {
			t.Fatalf("after the head ended cancelled claimed %d, want %d: under hold a cancel is a discard", r.ID, a[1])
		}
	})
	parallel(t, h, "PurgeKeepsHeld", func(t *testing.T, b backend.Backend) {
		c := keyCtl(t, b)
		setKeys(t, c, "h", backend.KeyRules{Ordered: true})
		setKeys(t, c, "n", backend.KeyRules{Ordered: true, OnFailure: backend.KeyContinue})
		insertIDs(t, b, keyed("h", "a"), keyed("h", "a"), keyed("n", "a"), job("h", "t"))
		for _, q := range []string{"h", "n"} {
			for _, r := range claim(t, b, 10, longLease, q) {
				completeFresh(t, b, fail(r.Ref(), "boom"))
			}
		}
		// Failed now: h's head of a (holds it), h's unkeyed job, n's head
		// of a (under continue, holds nothing).
		keep := backend.FailedFilter{KeepHeld: true}
		if n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: keep}); err != nil || n != 2 {
			t.Fatalf("FailedPurge(keep held) = %d, %v; want the 2 jobs that hold no key", n, err)
		}
		wantKeyInfo(t, c, backend.KeyListParams{Queue: "h"}, "a", 1, 0, 1, true)
		if n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: 0, Filter: keep}); err != nil || n != 0 {
			t.Fatalf("FailedPurge(keep held) again = %d, %v; want 0", n, err)
		}
		if n, err := b.FailedPurge(t.Context(), backend.FailedPurgeParams{}); err != nil || n != 1 {
			t.Fatalf("FailedPurge() = %d, %v; want the held head", n, err)
		}
		wantKeyInfo(t, c, backend.KeyListParams{Queue: "h"}, "a", 1, 0, 0, false)
	})
}
