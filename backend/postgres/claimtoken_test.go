package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// migrateTo applies the migrations up to version to a fresh schema, as an
// older jobq would have left it.
func migrateTo(t *testing.T, schema string, version int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := newQueries(schema)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.createSchema); err != nil {
			return err
		}
		for _, m := range migrations[:version] {
			if _, err := tx.Exec(ctx, q.setSearchPath); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, q.recordVersion, m.version); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("migrate %s to version %d: %v", schema, version, err)
	}
}

// TestMigrateClaimToken: migration 008 gives the jobs queued before it,
// live and failed, token 0, and their first claim afterwards token 1.
func TestMigrateClaimToken(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	migrateTo(t, schema, 7)
	s := quoteIdent(schema)
	// What a jobq at version 7 leaves: a pending job, one held by a worker
	// of that version, and a failed one.
	execTest(t, "INSERT INTO "+s+".jobs (id, queue, type, payload, max_attempts) VALUES (1, 'q', 't', '{}', 3)")
	execTest(t, "INSERT INTO "+s+".jobs (id, queue, type, payload, max_attempts, status, attempts, reserved_at, lease_until) VALUES (2, 'held', 't', '{}', 3, 'reserved', 1, now(), now() + interval '1 hour')")
	execTest(t, "INSERT INTO "+s+".failed_jobs (job_id, queue, type, payload, attempts, max_attempts, priority, error, created_at) VALUES (3, 'q', 't', '{}', 3, 3, 0, 'boom', now())")

	b := openSchema(t, testURL(t), Options{Schema: schema, NoVacuum: true})
	if v := mustInt(t, b, "SELECT max(version) FROM "+s+".jobq_schema_version"); v != int64(LatestVersion()) || LatestVersion() < 8 {
		t.Fatalf("schema at version %d after Open, want %d (8 or later)", v, LatestVersion())
	}
	for id, want := range map[int64]backend.JobState{1: backend.StatePending, 2: backend.StateReserved} {
		row, err := b.JobGet(t.Context(), id)
		if err != nil || row.Status != want || row.Token != 0 {
			t.Fatalf("job %d after the migration = %+v, %v; want %s with token 0", id, row, err, want)
		}
	}
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".failed_jobs WHERE job_id = 3 AND claim_token = 0"); n != 1 {
		t.Fatalf("failed job 3: %d rows with token 0, want 1", n)
	}
	if _, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 2, Lease: time.Minute})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim = %d rows, %v; want 2", len(rows), err)
	}
	for _, r := range rows {
		if r.Token != 1 || r.Attempts != 1 {
			t.Fatalf("first claim of job %d after the migration: attempt %d token %d, want 1 and 1", r.ID, r.Attempts, r.Token)
		}
	}
}

// TestTokenSurvivesEveryMove: whichever way a job leaves its claim (a
// retry, a free and a counted release, a lease sweep, a fail, a counted
// release and a sweep into failed_jobs, each followed by a replay), its
// next claim's token is one above the last, every earlier holder's
// outcome is stale, and JobGet and JobList show the current claim's token.
func TestTokenSurvivesEveryMove(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	p := testJob("q")
	p.MaxAttempts = 1
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].ID
	var held []backend.JobRef
	claim := func(lease time.Duration) backend.JobRef {
		t.Helper()
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: lease})
		if err != nil || len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("claim = %v, %v; want job %d", rows, err, id)
		}
		ref := rows[0].Ref()
		if want := int64(len(held) + 1); ref.Token != want {
			t.Fatalf("claim %d of job %d: token %d, want %d", len(held)+1, id, ref.Token, want)
		}
		held = append(held, ref)
		return ref
	}
	replay := func() {
		t.Helper()
		if r, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}}); err != nil || r.Replayed != 1 {
			t.Fatalf("replay = %+v, %v", r, err)
		}
	}
	sweep := func() {
		t.Helper()
		waitFor(t, 10*time.Second, "the sweep", func() bool {
			r, err := b.LeaseSweep(ctx, backend.SweepParams{})
			if err != nil {
				t.Fatal(err)
			}
			return len(r.Jobs) == 1 && r.Jobs[0].Ref == held[len(held)-1]
		})
	}
	complete := func(o backend.Outcome) {
		t.Helper()
		if r, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil || len(r.Stale) != 0 {
			t.Fatalf("%s = %+v, %v", o.Kind, r, err)
		}
	}
	release := func(ref backend.JobRef) {
		t.Helper()
		if r, err := b.JobRelease(ctx, []backend.JobRef{ref}); err != nil || len(r.Stale) != 0 {
			t.Fatalf("release = %+v, %v", r, err)
		}
	}

	complete(backend.Outcome{Ref: claim(time.Hour), Kind: backend.OutcomeFail, Error: "boom"}) // to failed_jobs
	replay()
	for range backend.MaxFreeReleases {
		release(claim(time.Hour)) // free
	}
	release(claim(time.Hour)) // counted, attempts spent: to failed_jobs
	replay()
	claim(50 * time.Millisecond)
	sweep() // spent: to failed_jobs
	replay()
	complete(backend.Outcome{Ref: claim(time.Hour), Kind: backend.OutcomeRetry, Error: "again"})
	cur := claim(time.Hour)

	var stale []backend.Outcome
	for _, ref := range held[:len(held)-1] {
		stale = append(stale, backend.Outcome{Ref: ref, Kind: backend.OutcomeDone})
	}
	r, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: stale})
	if err != nil || !slices.Equal(r.Stale, held[:len(held)-1]) {
		t.Fatalf("outcomes of the earlier claims = %+v, %v; want all %d stale", r, err, len(held)-1)
	}
	row, err := b.JobGet(ctx, id)
	if err != nil || row.Status != backend.StateReserved || row.Token != cur.Token {
		t.Fatalf("job after the stale outcomes = %+v, %v; want held by token %d", row, err, cur.Token)
	}
	listed, err := b.JobList(ctx, backend.JobListParams{State: backend.StateReserved})
	if err != nil || len(listed) != 1 || listed[0].Token != cur.Token {
		t.Fatalf("JobList(reserved) = %v, %v; want job %d with token %d", listed, err, id, cur.Token)
	}
}
