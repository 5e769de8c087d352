package postgres

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

// TestUniqueStatesAsMemory: PostgreSQL answers random batches of unique
// inserts with state sets, conflict modes and KeepLast as the memory
// backend does (see backendtest.UniqueStatesAsMemory).
func TestUniqueStatesAsMemory(t *testing.T) {
	t.Parallel()
	backendtest.UniqueStatesAsMemory(t, "postgres", func(t *testing.T) backend.Backend { return openTest(t, Options{}) })
}

// TestTakeoverOneStatement: an insert round taking keys over releases the
// old holder's key before its insert arm runs, in every form of the
// statement, so the item is inserted in that very round; a holder whose
// state changed since it was judged keeps its key, and the item comes
// back its duplicate.
func TestTakeoverOneStatement(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		stmt   string
		keyed  bool
		notify bool
	}{
		{"plain", b.q.insertTake, false, false},
		{"notify", b.q.insertNotifyTake, false, true},
		{"keyed", b.kq.insertTake, true, false},
		{"keyed notify", b.kq.insertNotifyTake, true, true},
	} {
		queue := strings.ReplaceAll(tc.name, " ", "-")
		p := testJob(queue)
		p.UniqueKey, p.UniqueStates = queue, backend.UniqueWaiting
		if tc.keyed {
			p.Key = "acct"
		}
		old, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		row := claimOne(t, b, queue)
		// run sends the round of item p taking the key from h, returning
		// (id, duplicate).
		run := func(h holder) (int64, bool) {
			args := insertArgs([]backend.InsertParams{p}, []int{0})
			if tc.keyed {
				args = append(args, keyArg([]backend.InsertParams{p}, []int{0}))
			}
			args = append(args, takeArgs(map[int]holder{0: h})...)
			tx, err := b.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
			var (
				ord            int64
				id             int64
				duplicate, due bool
				hr             holderRow
			)
			if err := tx.QueryRow(ctx, tc.stmt, args...).Scan(&ord, &id, &duplicate, &due, &hr.states, &hr.reserved, &hr.attempts, &hr.due, &hr.now); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			return id, duplicate
		}
		// Judged pending (attempts 0), it is running: left alone.
		if id, dup := run(holder{id: old[0].ID, due: row.AvailableAt}); !dup || id != old[0].ID {
			t.Fatalf("%s: takeover of a holder whose state changed = job %d, duplicate %t; want a duplicate of %d", tc.name, id, dup, old[0].ID)
		}
		id, dup := run(holder{id: old[0].ID, reserved: true, attempts: 1, due: row.AvailableAt})
		if dup || id == old[0].ID {
			t.Fatalf("%s: takeover = job %d, duplicate %t; want a new job", tc.name, id, dup)
		}
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = $1 AND id = $2 AND unique_states = $3", p.UniqueKey, id, int16(backend.UniqueWaiting)); n != 1 {
			t.Fatalf("%s: the new job holds the key with its states: %d rows, want 1", tc.name, n)
		}
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND unique_key IS NULL AND status = 'reserved'", old[0].ID); n != 1 {
			t.Fatalf("%s: the old holder runs on without its key: %d rows, want 1", tc.name, n)
		}
	}
}

// TestTakeoverConcurrent: inserts of one key from several connections at
// once, alone or in batches (a transaction), over a holder out of its
// states or giving way to a KeepLast follow-up, make one new job, which
// every other insert names as its duplicate: never two holders, never an
// error.
func TestTakeoverConcurrent(t *testing.T) {
	t.Parallel()
	for _, keepLast := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep last %t", keepLast), func(t *testing.T) {
			t.Parallel()
			b := openTest(t, Options{})
			ctx := t.Context()
			p := testJob("q")
			p.UniqueKey = "k"
			if keepLast {
				p.OnConflict, p.KeepLast = backend.ConflictReplace, true
			} else {
				p.UniqueStates = backend.UniqueWaiting
			}
			if _, err := b.JobInsertMany(ctx, []backend.InsertParams{p}); err != nil {
				t.Fatal(err)
			}
			const inserters = 16
			for round := range 6 {
				running := claimOne(t, b, "q")
				ids := make([]int64, inserters)
				errs := make([]error, inserters)
				var wg sync.WaitGroup
				for g := range inserters {
					wg.Add(1)
					go func() {
						defer wg.Done()
						batch := []backend.InsertParams{p}
						if g%2 == 1 {
							batch = append([]backend.InsertParams{testJob("other")}, p)
						}
						res, err := b.JobInsertMany(ctx, batch)
						if err != nil {
							errs[g] = err
							return
						}
						ids[g] = res[len(res)-1].ID
					}()
				}
				wg.Wait()
				for g := range inserters {
					if errs[g] != nil || ids[g] != ids[0] || ids[g] == running.ID {
						t.Fatalf("round %d: inserter %d = job %d, %v; want job %d, not the running %d", round, g, ids[g], errs[g], ids[0], running.ID)
					}
				}
				if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'k'"); n != 1 {
					t.Fatalf("round %d: %d jobs hold the key, want 1", round, n)
				}
				if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE queue = 'q' AND status = 'pending'"); n != 1 {
					t.Fatalf("round %d: %d jobs wait, want 1", round, n)
				}
			}
		})
	}
}

// TestInsertHolderPlan: the insert statements find a duplicate's holder
// by a probe of the unique key index, gated on the item being a
// duplicate, and the takeover updates its holders by primary key: never
// a scan of the jobs table, on a fresh table as on one whose statistics
// saw thousands of jobs with unique keys. A batch without unique keys
// looks for no holder.
func TestInsertHolderPlan(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	item := testJob("q")
	item.UniqueKey = "k1"
	args := insertArgs([]backend.InsertParams{item}, []int{0})
	take := takeArgs(map[int]holder{0: {id: 1, due: time.Now()}})
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			name, stmt string
			args       []any
		}{
			{"insert", b.q.insert, args},
			{"insert notify", b.q.insertNotify, args},
			{"takeover", b.q.insertTake, append(slices.Clip(args), take...)},
		} {
			plan := explain(t, b, nil, tc.stmt, tc.args...)
			if !strings.Contains(plan, "One-Time Filter") || !strings.Contains(plan, "Index Scan using jobs_unique_key_idx on jobs x") || strings.Contains(plan, "Seq Scan on jobs") {
				t.Errorf("%s: %s plan does not probe the holder by jobs_unique_key_idx alone:\n%s", when, tc.name, plan)
			}
			if tc.stmt == b.q.insertTake && !strings.Contains(plan, "Index Scan using jobs_pkey on jobs h") {
				t.Errorf("%s: the takeover does not find its holders by primary key:\n%s", when, plan)
			}
		}
	}
	check("fresh table")
	plain := insertArgs([]backend.InsertParams{testJob("q")}, []int{0})
	if plan := explain(t, b, nil, b.q.insertPlain, plain...); strings.Contains(plan, "jobs x") {
		t.Errorf("the insert of a batch without unique keys looks for holders:\n%s", plan)
	}
	batch := make([]backend.InsertParams, 4000)
	for i := range batch {
		batch[i] = testJob("q")
		batch[i].UniqueKey = fmt.Sprintf("k%d", i)
	}
	if _, err := b.JobInsertMany(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	execTest(t, "ANALYZE "+quoteIdent(b.Schema())+".jobs")
	check("analyzed")
}

// TestTakeoverInSQLTx: JobInsertManyTx takes a key over in an
// application's database/sql transaction too, whose driver scans the
// holder columns and sends the takeover's arrays; the old holder keeps
// its key until that transaction commits.
func TestTakeoverInSQLTx(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ctx := t.Context()
	db, err := sql.Open("pgx", testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p := testJob("q")
	p.UniqueKey, p.UniqueStates = "k", backend.UniqueWaiting
	old, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	claimOne(t, b, "q")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := b.JobInsertManyTx(ctx, tx, []backend.InsertParams{p, testJob("q"), p})
	if err != nil || res[0].Duplicate || res[0].ID == old[0].ID || res[2] != (backend.InsertResult{ID: res[0].ID, Duplicate: true}) {
		t.Fatalf("JobInsertManyTx over a running holder = %+v, %v; want a new job and its duplicate", res, err)
	}
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'k' AND id = $1", old[0].ID); n != 1 {
		t.Fatalf("before the commit, the old holder holds the key: %d rows, want 1", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'k' AND id = $1", res[0].ID); n != 1 {
		t.Fatalf("after the commit, the new job holds the key: %d rows, want 1", n)
	}
}
