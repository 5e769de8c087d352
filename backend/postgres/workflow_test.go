package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// The workflow tests of this package: what the conformance suite
// (backendtest, area Workflow) does not reach on Postgres: the caller's
// pgx and database/sql transactions, several Backends (pools, as
// processes would have) working one workflow, lock order under concurrent
// fan-in, and the migration of an existing schema.

// wfTask is a task of queue "w" whose type is its name, depending on deps
// with DepCancel.
func wfTask(name string, deps ...string) backend.TaskParams {
	p := backend.TaskParams{Name: name, Job: backend.InsertParams{Queue: "w", Type: name, Payload: []byte(`{}`), MaxAttempts: 3}}
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d})
	}
	return p
}

// wfContinue adds dependencies with DepContinue to p.
func wfContinue(p backend.TaskParams, deps ...string) backend.TaskParams {
	for _, d := range deps {
		p.Deps = append(p.Deps, backend.Dep{Task: d, Policy: backend.DepContinue})
	}
	return p
}

func wfInsert(t testing.TB, b *Backend, tasks ...backend.TaskParams) int64 {
	t.Helper()
	res, err := b.WorkflowInsert(context.Background(), backend.WorkflowParams{Name: "wf", Tasks: tasks})
	if err != nil {
		t.Fatalf("WorkflowInsert: %v", err)
	}
	return res.ID
}

func wfGet(t testing.TB, b *Backend, id int64) *backend.Workflow {
	t.Helper()
	wf, err := b.WorkflowGet(context.Background(), id)
	if err != nil {
		t.Fatalf("WorkflowGet(%d): %v", id, err)
	}
	return wf
}

func wfNamed(t testing.TB, wf *backend.Workflow, name string) *backend.WorkflowTask {
	t.Helper()
	for _, tk := range wf.Tasks {
		if tk.Name == name {
			return tk
		}
	}
	t.Fatalf("workflow %d has no task %q", wf.ID, name)
	return nil
}

// wfWant asserts the workflow's state, each named task's state (and
// reason when given as "state: reason"), and that no count drifted.
func wfWant(t testing.TB, b *Backend, id int64, state backend.WorkflowState, tasks map[string]string) *backend.Workflow {
	t.Helper()
	wf := wfGet(t, b, id)
	if wf.State != state {
		t.Errorf("workflow %d is %s, want %s", id, wf.State, state)
	}
	for name, want := range tasks {
		st, reason, withReason := strings.Cut(want, ": ")
		tk := wfNamed(t, wf, name)
		if string(tk.State) != st || withReason && tk.Reason != reason {
			t.Errorf("task %s is %s (%q), want %s", name, tk.State, tk.Reason, want)
		}
	}
	wfNoDrift(t, b)
	return wf
}

func wfNoDrift(t testing.TB, b *Backend) {
	t.Helper()
	drift, err := b.WorkflowCheck(context.Background())
	if err != nil || len(drift) != 0 {
		t.Fatalf("WorkflowCheck = %v, %v; want no drift", drift, err)
	}
}

// claimTasks claims every due job of queue "w", by task name (its type).
func claimTasks(t testing.TB, b *Backend, lease time.Duration) map[string]*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"w"}, Max: 1000, Lease: lease})
	if err != nil {
		t.Fatalf("JobClaim: %v", err)
	}
	got := map[string]*backend.JobRow{}
	for _, r := range rows {
		got[r.Type] = r
	}
	return got
}

// completeAll sends outcomes and wants every one applied.
func completeAll(t testing.TB, b *Backend, outs ...backend.Outcome) {
	t.Helper()
	res, err := b.JobComplete(context.Background(), backend.CompleteParams{Outcomes: outs})
	if err != nil || len(res.Stale)+len(res.Cancelled) != 0 {
		t.Fatalf("JobComplete = %+v, %v; want all applied", res, err)
	}
}

func doneOf(r *backend.JobRow) backend.Outcome {
	return backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
}

func failOf(r *backend.JobRow, msg string) backend.Outcome {
	return backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: msg}
}

// TestWorkflowInCallerTx: WorkflowInsertTx and JobCompleteTx, on a pgx.Tx
// and a *sql.Tx: a rolled back insert leaves nothing; a task completed in
// the handler's transaction releases its dependant when, and only when,
// that transaction commits, and the release wakes workers of other
// processes then.
func TestWorkflowInCallerTx(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	other := openSchema(t, testURL(t), Options{Schema: b.Schema()})
	db, err := sql.Open("pgx", testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	chain := backend.WorkflowParams{Name: "chain", Tasks: []backend.TaskParams{wfTask("c", "b"), wfTask("b", "a"), wfTask("a")}}

	err = pgx.BeginFunc(ctx, b.Pool(), func(tx pgx.Tx) error {
		if _, err := b.WorkflowInsertTx(ctx, tx, chain); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if list, err := b.WorkflowList(ctx, backend.WorkflowListParams{}); err != nil || len(list) != 0 {
		t.Fatalf("after a rolled back insert: %d workflows, %v", len(list), err)
	}
	if rows := claimTasks(t, b, time.Hour); len(rows) != 0 {
		t.Fatalf("after a rolled back insert: claimed %d jobs", len(rows))
	}

	ch, cancel := other.Subscribe([]string{"w"})
	defer cancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return other.listener.pid.Load() != 0 })
	drain(ch)
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := b.WorkflowInsertTx(ctx, sqlTx, chain)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantWake(t, ch, "the commit of a workflow inserted in a transaction")
	wf := wfWant(t, b, ins.ID, backend.WorkflowRunning, map[string]string{"a": "active", "b": "waiting", "c": "waiting"})
	if ins.Jobs["a"] != wfNamed(t, wf, "a").JobID || len(ins.Jobs) != 1 {
		t.Fatalf("Jobs = %v, want a's job %d", ins.Jobs, wfNamed(t, wf, "a").JobID)
	}

	// a completes in a pgx.Tx that rolls back, then in one that commits.
	a := claimTasks(t, b, time.Hour)["a"]
	for _, commit := range []bool{false, true} {
		drain(ch)
		err := pgx.BeginFunc(ctx, b.Pool(), func(tx pgx.Tx) error {
			if err := b.JobCompleteTx(ctx, tx, a.Ref()); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
		if commit != (err == nil) {
			t.Fatalf("commit %v: %v", commit, err)
		}
		want := map[string]string{"a": "active", "b": "waiting"}
		if commit {
			want = map[string]string{"a": "succeeded", "b": "active"}
			wantWake(t, ch, "the commit of JobCompleteTx releasing b")
		}
		wfWant(t, b, ins.ID, backend.WorkflowRunning, want)
	}

	// b completes in a *sql.Tx.
	bRow := claimTasks(t, b, time.Hour)["b"]
	sqlTx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.JobCompleteTx(ctx, sqlTx, bRow.Ref()); err != nil {
		t.Fatal(err)
	}
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	c := claimTasks(t, b, time.Hour)["c"]
	if c == nil {
		t.Fatal("c was not released by b's JobCompleteTx")
	}
	completeAll(t, b, backend.Outcome{Ref: c.Ref(), Kind: backend.OutcomeDone, Result: []byte(`{"x": 1}`)})
	wf = wfWant(t, b, ins.ID, backend.WorkflowSucceeded, map[string]string{"c": "succeeded"})
	if got := string(wfNamed(t, wf, "c").Result); got != `{"x": 1}` {
		t.Errorf("c's result %q, want the bytes given", got)
	}
}

// fanIn runs a workflow of n parts and one join with workers, each on a
// Backend of its own (pools, as worker processes would have), claiming
// up to batch jobs and completing them at once, until the join ran.
func fanIn(t *testing.T, workers []*Backend, n, batch int) {
	b := workers[0]
	tasks := make([]backend.TaskParams, 0, n+1)
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("p%04d", i))
		tasks = append(tasks, wfTask(names[i]))
	}
	tasks = append(tasks, wfTask("join", names...))
	id := wfInsert(t, b, tasks...)
	start := time.Now()
	var parts, joins atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for joins.Load() == 0 && !t.Failed() {
				rows, err := w.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: batch, Lease: time.Hour})
				if err != nil {
					t.Errorf("JobClaim: %v", err)
					return
				}
				var outs []backend.Outcome
				for _, r := range rows {
					if r.Type == "join" {
						if wf := wfGet(t, w, id); wf.Counts.Succeeded != n {
							t.Errorf("the join was released with %d parts succeeded", wf.Counts.Succeeded)
						}
						joins.Add(1)
					} else {
						parts.Add(1)
					}
					outs = append(outs, doneOf(r))
				}
				if len(outs) > 0 {
					if res, err := w.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil || len(res.Stale) != 0 {
						t.Errorf("JobComplete = %+v, %v", res, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("fan-in of %d with %d workers, batches of %d: %s", n, len(workers), batch, time.Since(start))
	if parts.Load() != int64(n) || joins.Load() != 1 {
		t.Fatalf("%d parts and %d joins ran, want %d and 1", parts.Load(), joins.Load(), n)
	}
	wf := wfWant(t, b, id, backend.WorkflowSucceeded, nil)
	if wf.Counts != (backend.TaskCounts{Succeeded: n + 1}) {
		t.Fatalf("Counts = %+v", wf.Counts)
	}
}

// TestWorkflowFanInBackends: 1,000 parts completed concurrently through
// four Backends, in batches and one at a time: the join is released once,
// by the last part, and WorkflowCheck sees no count off meanwhile.
func TestWorkflowFanInBackends(t *testing.T) {
	t.Parallel()
	first := openTest(t, Options{})
	workers := []*Backend{first}
	for range 3 {
		workers = append(workers, openSchema(t, testURL(t), Options{Schema: first.Schema(), MaxConns: 4}))
	}
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if drift, err := first.WorkflowCheck(t.Context()); err != nil || len(drift) != 0 {
				t.Errorf("WorkflowCheck during the fan-in = %v, %v", drift, err)
				return
			}
		}
	})
	fanIn(t, workers, 1000, 25)
	fanIn(t, workers, 300, 1)
	close(stop)
	checks.Wait()
}

// TestWorkflowCrossedFanIn: two roots that 300 joins each depend on end
// at once in two Backends, ten times over: the two transactions lock the
// same 300 rows, in one order, so neither fails, and each join is
// resolved once. r1 fails; joins with DepContinue on it run, the others
// are cancelled, each with one reason.
func TestWorkflowCrossedFanIn(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	b2 := openSchema(t, testURL(t), Options{Schema: b.Schema()})
	const joins = 300
	for round := range 10 {
		tasks := []backend.TaskParams{wfTask("r1"), wfTask("r2")}
		for i := range joins {
			j := wfTask(fmt.Sprintf("j%03d", i), "r2")
			if i%2 == 0 {
				j = wfContinue(j, "r1")
			} else {
				j.Deps = append(j.Deps, backend.Dep{Task: "r1"})
			}
			tasks = append(tasks, j)
		}
		id := wfInsert(t, b, tasks...)
		roots := claimTasks(t, b, time.Hour)
		var wg sync.WaitGroup
		wg.Go(func() { completeAll(t, b, failOf(roots["r1"], "broke")) })
		wg.Go(func() { completeAll(t, b2, doneOf(roots["r2"])) })
		wg.Wait()
		wf := wfWant(t, b, id, backend.WorkflowRunning, nil)
		if wf.Counts != (backend.TaskCounts{Active: joins / 2, Succeeded: 1, Failed: 1, Cancelled: joins / 2}) {
			t.Fatalf("round %d: Counts = %+v", round, wf.Counts)
		}
		for _, tk := range wf.Tasks[2:] {
			if tk.State == backend.TaskCancelled && tk.Reason != backend.DepCancelReason("r1", backend.TaskFailed) {
				t.Fatalf("round %d: %s cancelled with reason %q", round, tk.Name, tk.Reason)
			}
		}
		released := claimTasks(t, b, time.Hour)
		if len(released) != joins/2 {
			t.Fatalf("round %d: claimed %d joins, want %d", round, len(released), joins/2)
		}
		var outs []backend.Outcome
		for _, r := range released {
			outs = append(outs, doneOf(r))
		}
		completeAll(t, b, outs...)
		wfWant(t, b, id, backend.WorkflowFailed, nil)
	}
}

// TestWorkflowMigrateExisting: a schema at version 9 with jobs live and
// failed takes migration 10: its jobs are no task's, complete and replay
// as before, and workflows run on it.
func TestWorkflowMigrateExisting(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	migrateTo(t, schema, 9)
	s := quoteIdent(schema)
	execTest(t, "INSERT INTO "+s+".jobs (queue, type, payload, max_attempts) VALUES ('q', 't', '{}', 3)")
	execTest(t, "INSERT INTO "+s+".failed_jobs (job_id, queue, type, payload, attempts, max_attempts, priority, error, created_at) VALUES (1000, 'q', 't', '{}', 3, 3, 0, 'boom', now())")
	b := openSchema(t, testURL(t), Options{Schema: schema, NoVacuum: true})
	if v := mustInt(t, b, "SELECT max(version) FROM "+s+".jobq_schema_version"); v != int64(LatestVersion()) || LatestVersion() < 10 {
		t.Fatalf("schema at version %d, want %d", v, LatestVersion())
	}
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".jobs WHERE workflow_id IS NULL"); n != 1 {
		t.Fatalf("%d old jobs without a workflow, want 1", n)
	}
	if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}}); err != nil || res.Replayed != 1 {
		t.Fatalf("replay of the old failed job = %+v, %v", res, err)
	}
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Hour})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim = %d, %v; want both old jobs", len(rows), err)
	}
	completeAll(t, b, doneOf(rows[0]), failOf(rows[1], "again"))
	id := wfInsert(t, b, wfTask("a"), wfTask("b", "a"))
	completeAll(t, b, doneOf(claimTasks(t, b, time.Hour)["a"]))
	completeAll(t, b, doneOf(claimTasks(t, b, time.Hour)["b"]))
	wfWant(t, b, id, backend.WorkflowSucceeded, nil)
}
