package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// explain returns the plan of query with args in a transaction that first
// runs each of setup, then rolls back.
func explain(t *testing.T, b *Backend, setup []string, query string, args ...any) string {
	t.Helper()
	ctx := t.Context()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range setup {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestClaimPlanIgnoresStatistics: with statistics that predict one job per
// queue (taken while the queues held a job or two) and index pages costed
// dear, the planner's own plan for the claim reads every job and sorts
// them. After sqlClaimPlan, the claim walks jobs_claim_idx in order and
// stops after the batch, whatever the statistics and costs say.
func TestClaimPlanIgnoresStatistics(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	insertN(t, b, "q", 5000)
	jobs := quoteIdent(b.Schema()) + ".jobs"
	execTest(t, "ALTER TABLE "+jobs+" ALTER COLUMN queue SET (n_distinct = -1)")
	execTest(t, "ANALYZE "+jobs)
	const dear = "SET LOCAL random_page_cost = 1000"
	args := []any{[]string{"q"}, 100, int64(time.Minute / time.Microsecond)}

	if plan := explain(t, b, []string{dear}, b.q.claim, args...); strings.Contains(plan, "jobs_claim_idx") {
		t.Fatalf("the setup did not mislead the planner; its own plan already uses the claim index:\n%s", plan)
	}
	plan := explain(t, b, []string{dear, b.q.claimPlan}, b.q.claim, args...)
	if !strings.Contains(plan, "Index Scan using jobs_claim_idx") || strings.Contains(plan, "Seq Scan on jobs") || strings.Contains(plan, "Bitmap") {
		t.Fatalf("claim plan after sqlClaimPlan does not walk jobs_claim_idx alone:\n%s", plan)
	}
}

// TestCompletePlanUsesPrimaryKey: statistics taken while every job was
// pending predict no held jobs, which once made the planner scan the lease
// index for each outcome write and compare every held job with every
// outcome. The outcome write must look its jobs up by primary key.
func TestCompletePlanUsesPrimaryKey(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	insertN(t, b, "q", 5000)
	execTest(t, "ANALYZE "+quoteIdent(b.Schema())+".jobs")
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 100, Lease: time.Minute})
	if err != nil || len(rows) != 100 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	ids, tokens := make([]int64, len(rows)), make([]int64, len(rows))
	kinds := make([]int32, len(rows))
	delays, errs := make([]int64, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		ids[i], tokens[i], kinds[i] = r.ID, r.Token, kindDone
	}
	tooks, workers := make([]int64, len(rows)), make([]string, len(rows))
	plan := explain(t, b, nil, b.q.complete, ids, tokens, kinds, delays, errs, tooks, workers)
	if strings.Contains(plan, "jobs_lease_idx") || !strings.Contains(plan, "jobs_pkey") {
		t.Fatalf("outcome write does not look jobs up by primary key:\n%s", plan)
	}
}

// TestClaimPlanReachesTheClaim: JobClaim sends sqlClaimPlan and the claim
// as one pgx batch, relying on the batch being one implicit transaction so
// the transaction-local settings still hold when the claim is planned. A
// statement queued the same way after sqlClaimPlan sees them; one sent on
// its own afterwards does not.
func TestClaimPlanReachesTheClaim(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const show = "SELECT current_setting('enable_bitmapscan') || ' ' || current_setting('enable_seqscan')"
	batch := &pgx.Batch{}
	batch.Queue(b.q.claimPlan)
	batch.Queue(show)
	br := conn.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		t.Fatal(err)
	}
	var inBatch string
	if err := br.QueryRow().Scan(&inBatch); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := conn.QueryRow(ctx, show).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inBatch != "off off" || after != "on on" {
		t.Fatalf("settings in the batch %q, after it %q; want \"off off\" then \"on on\"", inBatch, after)
	}
}

// TestDeadlinePlans: the claim walks jobs_claim_idx as it did before
// deadlines (the deadline is a filter on the rows it locks anyway), and
// the sweep finds expired jobs through jobs_deadline_idx, not by reading
// the pending jobs.
func TestDeadlinePlans(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	insertN(t, b, "q", 5000)
	batch := make([]backend.InsertParams, 50)
	for i := range batch {
		batch[i] = testJob("q")
		batch[i].Deadline = time.Now().Add(time.Hour)
	}
	if _, err := b.JobInsertMany(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	execTest(t, "ANALYZE "+quoteIdent(b.Schema())+".jobs")
	args := []any{[]string{"q"}, 100, int64(time.Minute / time.Microsecond)}
	plan := explain(t, b, []string{b.q.claimPlan}, b.q.claim, args...)
	if !strings.Contains(plan, "Index Scan using jobs_claim_idx") || strings.Contains(plan, "Seq Scan on jobs") || strings.Contains(plan, "Bitmap") {
		t.Fatalf("claim plan does not walk jobs_claim_idx:\n%s", plan)
	}
	t.Logf("claim plan:\n%s", plan)
	plan = explain(t, b, nil, b.q.expire, 1000)
	if !strings.Contains(plan, "jobs_deadline_idx") || strings.Contains(plan, "Seq Scan on jobs") {
		t.Fatalf("expire plan does not read jobs_deadline_idx:\n%s", plan)
	}
	t.Logf("expire plan:\n%s", plan)
}
