package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobq/jobq/backend"
)

// heldSet is the set of the completed holders of these tests: every live
// state, and completed.
const heldSet = backend.UniqueAllStates | backend.UniqueCompleted

// uniqueJob is a job of queue with unique key key and set states.
func uniqueJob(queue, key string, states backend.UniqueStates) backend.InsertParams {
	p := testJob(queue)
	p.UniqueKey, p.UniqueStates = key, states
	return p
}

// keyHolders returns how many live jobs hold key and how many completed
// jobs do.
func keyHolders(t *testing.T, b *Backend, key string) (live, completed int) {
	t.Helper()
	live = count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = $1", key)
	completed = count(t, b, "SELECT count(*) FROM {schema}.finished_jobs WHERE unique_key = $1 AND unique_held", key)
	return live, completed
}

// failedWithKey inserts a job of queue with key and one attempt, claims it
// and fails it; it returns the job's ID.
func failedWithKey(t *testing.T, b *Backend, queue, key string) int64 {
	t.Helper()
	p := uniqueJob(queue, key, 0)
	p.MaxAttempts = 1
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert %+v, %v; want a new job", res, err)
	}
	ref := claimOne(t, b, queue).Ref()
	if r, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil || len(r.Stale) != 0 {
		t.Fatalf("fail = %+v, %v", r, err)
	}
	return res[0].ID
}

// TestUniqueCompletedWaitedFor: writers of a key that wait for the
// completion of its holder (kept, of a set with UniqueCompleted), having
// found its jobs_unique_key entry deleted by a transaction not yet
// committed, find the key held by the completed job once it commits,
// although their statements' snapshots predate it: every insert form
// (one job, a batch, a batch with keys, in a caller's transaction of
// either kind, a follow-up asking KeepLast) is a duplicate of the holder,
// and a replay of a failed job of the key, by ID or by filter, is
// skipped. The completion runs the backend's own statement in a
// transaction the test holds open until every writer waits for it. Each
// replay runs on its own: beside another writer, the one that went in
// would keep it out whatever the completed holder does.
func TestUniqueCompletedWaitedFor(t *testing.T) {
	t.Parallel()
	t.Run("inserts", func(t *testing.T) {
		t.Parallel()
		b := openTest(t, Options{MaxConns: 16})
		ctx := t.Context()
		p := uniqueJob("w", "k", heldSet)
		keepLast := uniqueJob("w", "k", 0)
		keepLast.OnConflict, keepLast.KeepLast = backend.ConflictReplace, true
		keyed := uniqueJob("w", "k", heldSet)
		keyed.Key = "acct"
		inPgxTx := func(ps ...backend.InsertParams) ([]backend.InsertResult, error) {
			tx, err := b.Pool().Begin(ctx)
			if err != nil {
				return nil, err
			}
			defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
			res, err := b.JobInsertManyTx(ctx, tx, ps)
			if err != nil {
				return nil, err
			}
			return res, tx.Commit(ctx)
		}
		db := stdlib.OpenDBFromPool(b.Pool())
		defer db.Close()
		inSQLTx := func(ps ...backend.InsertParams) ([]backend.InsertResult, error) {
			tx, err := db.BeginTx(ctx, &sql.TxOptions{})
			if err != nil {
				return nil, err
			}
			defer tx.Rollback() //nolint:errcheck // a no-op after Commit
			res, err := b.JobInsertManyTx(ctx, tx, ps)
			if err != nil {
				return nil, err
			}
			return res, tx.Commit()
		}
		inserts := map[string]func() ([]backend.InsertResult, error){
			"one job":  func() ([]backend.InsertResult, error) { return b.JobInsertMany(ctx, []backend.InsertParams{p}) },
			"KeepLast": func() ([]backend.InsertResult, error) { return b.JobInsertMany(ctx, []backend.InsertParams{keepLast}) },
			"batch": func() ([]backend.InsertResult, error) {
				return b.JobInsertMany(ctx, []backend.InsertParams{testJob("w"), p, p})
			},
			"with keys": func() ([]backend.InsertResult, error) { return b.JobInsertMany(ctx, []backend.InsertParams{keyed}) },
			"pgx tx":    func() ([]backend.InsertResult, error) { return inPgxTx(testJob("w"), p) },
			"sql tx":    func() ([]backend.InsertResult, error) { return inSQLTx(p, testJob("w")) },
		}
		waitedFor(t, b, "k", len(inserts), func(done chan<- func()) {
			for name, run := range inserts {
				go func() {
					res, err := run()
					done <- func() {
						if err != nil {
							t.Errorf("%s: %v", name, err)
						}
						for i, r := range res {
							if r.Duplicate != (r.ID == holderOf(t, b, "k")) || r.Replaced {
								t.Errorf("%s: item %d = %+v; want a duplicate of the completed holder (not replaced), or a new job without a key", name, i, r)
							}
						}
					}
				}()
			}
		})
	})
	for name, params := range map[string]func(id int64) backend.FailedReplayParams{
		"replay by ID": func(id int64) backend.FailedReplayParams { return backend.FailedReplayParams{IDs: []int64{id}} },
		"replay by filter": func(int64) backend.FailedReplayParams {
			return backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "failed"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := openTest(t, Options{})
			id := failedWithKey(t, b, "failed", "k")
			waitedFor(t, b, "k", 1, func(done chan<- func()) {
				go func() {
					res, err := b.FailedReplay(t.Context(), params(id))
					done <- func() {
						if err != nil || res.Replayed != 0 || res.Skipped != 1 {
							t.Errorf("%s = %+v, %v; want the failed job skipped, its key held by the completed job", name, res, err)
						}
					}
				}()
			})
			if n := count(t, b, "SELECT count(*) FROM {schema}.failed_jobs"); n != 1 {
				t.Fatalf("%d failed jobs, want the one left failed", n)
			}
		})
	}
}

// holderOf returns the ID of the completed job holding key, 0 for none.
func holderOf(t *testing.T, b *Backend, key string) int64 {
	t.Helper()
	var id int64
	err := b.Pool().QueryRow(t.Context(), "SELECT coalesce(max(id), 0) FROM "+quoteIdent(b.Schema())+".finished_jobs WHERE unique_key = $1 AND unique_held", key).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitedFor inserts and claims a holder of key (of heldSet), completes it
// (kept) in a transaction it holds open, runs start, which starts
// writers writers of the key, each sending on done, once it has its
// answer, the check of that answer, waits until every writer waits for
// the completion, commits it, runs the checks, and checks that the
// completed job alone holds the key.
func waitedFor(t *testing.T, b *Backend, key string, writers int, start func(done chan<- func())) {
	t.Helper()
	ctx := t.Context()
	holder, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", key, heldSet)})
	if err != nil {
		t.Fatal(err)
	}
	h := holder[0].ID
	ref := claimOne(t, b, "q").Ref()
	tx, err := b.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	var applied, tokens, taskIDs, taskTokens []int64
	var due []string
	err = tx.QueryRow(ctx, b.rq.completeKeep, []int64{ref.ID}, []int64{ref.Token}, []int32{kindDoneKeep},
		[]int64{0}, []string{""}, []int64{0}, []string{""}, []pgtype.Text{{}}).
		Scan(&applied, &tokens, &due, &taskIDs, &taskTokens)
	if err != nil || len(applied) != 1 {
		t.Fatalf("completion = %v, %v; want the holder completed", applied, err)
	}
	done := make(chan func(), writers)
	start(done)
	waitFor(t, time.Minute, "every writer to wait for the completion", func() bool {
		var n int
		err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, b.Schema()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == writers
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range writers {
		(<-done)()
	}
	if live, completed := keyHolders(t, b, key); live != 0 || completed != 1 || holderOf(t, b, key) != h {
		t.Fatalf("key %q: %d live jobs, %d completed holders; want completed job %d alone\n%s", key, live, completed, h, tables(t, b))
	}
}

// TestUniqueCompletedRace: one connection completes (kept) the holder of
// a key while others insert the key without pause, in many rounds, each
// on a key of its own, so that inserts meet the completion at every
// point of it, with the backend's own statements and nothing held open.
// A round's holder is of a set with every state and completed: it holds
// its key from its insert on, running, then completed, so every insert of
// the round must be its duplicate, and no job of the key may be live when
// the round ends. Every other round's holder is of the set pending,
// scheduled and completed instead: running, it is out of its set, and
// an insert takes the key over unless the completion came first; either
// way a completed holder and a live job of the key never hold it both.
// Without the recheck after the insert (sqlUniqueRecheck), inserts that
// waited for the completion went in beside the completed holder.
func TestUniqueCompletedRace(t *testing.T) {
	t.Parallel()
	const inserters = 3
	b := openTest(t, Options{MaxConns: inserters + 2})
	ctx := t.Context()
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	var raced atomic.Int64 // rounds that let a job of the key in
	var failed atomic.Bool
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		set := heldSet
		if round%2 == 1 {
			set = backend.UniqueWaiting | backend.UniqueCompleted
		}
		res, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", key, set)})
		if err != nil {
			t.Fatal(err)
		}
		h := res[0].ID
		ref := claimOne(t, b, "q").Ref()

		var wg sync.WaitGroup
		stop := make(chan struct{})
		started := make(chan struct{}, inserters)
		var others atomic.Int64
		for w := range inserters {
			wg.Go(func() {
				for n := 0; ; n++ {
					var ps []backend.InsertParams
					switch (n + w) % 3 {
					case 0:
						ps = []backend.InsertParams{uniqueJob("w", key, set)}
					case 1:
						ps = []backend.InsertParams{testJob("w"), uniqueJob("w", key, set)}
					default:
						ps = []backend.InsertParams{uniqueJob("w", key, 0)}
					}
					res, err := b.JobInsertMany(ctx, ps)
					if err != nil {
						failed.Store(true)
						t.Errorf("round %d: insert: %v", round, err)
						return
					}
					if r := res[len(res)-1]; r.ID != h || !r.Duplicate {
						others.Add(1)
					}
					if n == 0 {
						started <- struct{}{}
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		for range inserters {
			<-started
		}
		done := backend.Outcome{Ref: ref, Kind: backend.OutcomeDone, Keep: true}
		if r, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{done}}); err != nil || len(r.Stale) != 0 {
			t.Fatalf("round %d: complete = %+v, %v", round, r, err)
		}
		// A few more inserts, after the completion committed.
		for range inserters * 3 {
			if _, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("w", key, set)}); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		if failed.Load() {
			return
		}
		live, completed := keyHolders(t, b, key)
		switch {
		case set == heldSet && (others.Load() != 0 || live != 0 || completed != 1):
			raced.Add(1)
			t.Errorf("round %d: %d inserts not a duplicate of holder %d; %d live jobs and %d completed holders of the key, want 0 and 1",
				round, others.Load(), h, live, completed)
		case live > 0 && completed > 0:
			raced.Add(1)
			t.Errorf("round %d (%s): %d live jobs beside %d completed holders of the key", round, set, live, completed)
		}
		if live > 1 || completed > 1 {
			t.Errorf("round %d: %d live holders, %d completed ones", round, live, completed)
		}
	}
	if n := raced.Load(); n > 0 {
		t.Logf("%d of %d rounds let a job of the key in beside its completed holder", n, rounds)
	}
}

// TestUniqueCompletedPruneFrees: a completed holder frees its key with its
// finished row, whichever prune deletes it (by state and age, or by type,
// the listed types or all but them).
func TestUniqueCompletedPruneFrees(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	prunes := []struct {
		name   string
		params backend.FinishedPruneParams
	}{
		{"by age", backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: time.Microsecond}},
		{"of the type", backend.FinishedPruneParams{State: backend.StateCompleted, Types: map[string]time.Duration{"t": time.Microsecond}}},
		{"of the other types", backend.FinishedPruneParams{State: backend.StateCompleted, OlderThan: time.Microsecond, Types: map[string]time.Duration{"other": time.Hour}}},
	}
	for _, pr := range prunes {
		key := "prune " + pr.name
		res, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", key, heldSet)})
		if err != nil {
			t.Fatal(err)
		}
		ref := claimOne(t, b, "q").Ref()
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeDone, Keep: true}}}); err != nil {
			t.Fatal(err)
		}
		if again, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", key, 0)}); err != nil || again[0] != (backend.InsertResult{ID: res[0].ID, Duplicate: true}) {
			t.Fatalf("%s: insert while held = %+v, %v; want a duplicate of %d", pr.name, again, err, res[0].ID)
		}
		if n, err := b.FinishedPrune(ctx, pr.params); err != nil || n != 1 {
			t.Fatalf("%s: FinishedPrune = %d, %v; want the completed job pruned", pr.name, n, err)
		}
		if live, completed := keyHolders(t, b, key); live != 0 || completed != 0 {
			t.Fatalf("%s: %d live, %d completed holders after the prune", pr.name, live, completed)
		}
		next, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", key, 0)})
		if err != nil || next[0].Duplicate {
			t.Fatalf("%s: insert after the prune = %+v, %v; want a new job", pr.name, next, err)
		}
		claimOne(t, b, "q")
	}
}

// TestUniqueCompletedTakenOver: a job whose key an insert took over
// completes, kept, holding nothing, even of a set with UniqueCompleted,
// and the job that took the key holds it alone.
func TestUniqueCompletedTakenOver(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	set := backend.UniqueWaiting | backend.UniqueCompleted
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", "k", set)}); err != nil {
		t.Fatal(err)
	}
	ref := claimOne(t, b, "q").Ref()
	next, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", "k", set)})
	if err != nil || next[0].Duplicate {
		t.Fatalf("insert while the holder runs = %+v, %v; want it taken over", next, err)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeDone, Keep: true}}}); err != nil {
		t.Fatal(err)
	}
	if live, completed := keyHolders(t, b, "k"); live != 1 || completed != 0 {
		t.Fatalf("%d live, %d completed holders; want the job that took the key alone", live, completed)
	}
	again, err := b.JobInsertMany(ctx, []backend.InsertParams{uniqueJob("q", "k", 0)})
	if err != nil || again[0] != (backend.InsertResult{ID: next[0].ID, Duplicate: true}) {
		t.Fatalf("insert = %+v, %v; want a duplicate of %d", again, err, next[0].ID)
	}
}

// TestUniqueCompletedPlans: with many finished jobs, half of them
// holding their keys, an insert of jobs with unique keys and the
// recheck after it look for completed holders through
// finished_jobs_unique_held_idx alone, never reading finished_jobs, and
// the recheck reads jobs only through jobs_unique_key_idx.
func TestUniqueCompletedPlans(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	s := quoteIdent(b.Schema())
	execTest(t, `INSERT INTO `+s+`.finished_jobs
		(id, state, queue, type, payload, attempts, max_attempts, priority, unique_key, created_at, finished_at, unique_held)
		SELECT g, 'completed', 'q', 't', '{}', 1, 1, 0, 'f' || g, now(), now(), CASE WHEN g % 2 = 0 THEN true END
		FROM generate_series(1000000, 1039999) g`)
	execTest(t, `INSERT INTO `+s+`.jobs (queue, type, payload, max_attempts, unique_key)
		SELECT 'q', 't', '{}', 1, 'j' || g FROM generate_series(1, 20000) g`)
	for _, table := range []string{"jobs", "finished_jobs"} {
		execTest(t, "ANALYZE "+s+"."+table)
	}
	for _, n := range []int{1, 1000} {
		ps := make([]backend.InsertParams, n)
		idx := make([]int, n)
		keys := make([]string, n)
		for i := range ps {
			ps[i], idx[i], keys[i] = uniqueJob("q", fmt.Sprintf("k%d", i), heldSet), i, fmt.Sprintf("k%d", i)
		}
		for _, c := range []struct{ name, plan, jobs string }{
			{"insert", explain(t, b, nil, b.q.insert, insertArgs(ps, idx)...), "jobs_unique_key_idx"},
			{"recheck", explain(t, b, nil, b.rq.uniqueRecheck, keys, []int64(nil)), "jobs_unique_key_idx"},
			{"recheck by ID", explain(t, b, nil, b.rq.uniqueRecheck, keys, []int64{1, 2}), "jobs_pkey"},
		} {
			if !strings.Contains(c.plan, "finished_jobs_unique_held_idx") || !strings.Contains(c.plan, c.jobs) ||
				strings.Contains(c.plan, "Seq Scan") {
				t.Errorf("%s of %d jobs reads more than finished_jobs_unique_held_idx and %s:\n%s", c.name, n, c.jobs, c.plan)
			}
		}
	}
}
