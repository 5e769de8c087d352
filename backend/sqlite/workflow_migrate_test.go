package sqlite

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestWorkflowMigrateExisting: a file left at version 7, holding a
// pending, a reserved and a failed job, upgrades to 8 on Open; its jobs
// carry no workflow and go on as before (claimed, completed, replayed),
// and workflows run in it.
func TestWorkflowMigrateExisting(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	queries := []string{`CREATE TABLE jobq_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`}
	for v := 1; v <= 7; v++ {
		names, err := filepath.Glob(fmt.Sprintf("migrations/%03d_*.sql", v))
		if err != nil || len(names) != 1 {
			t.Fatalf("migration %d: %v, %v", v, names, err)
		}
		text, err := os.ReadFile(names[0])
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, string(text), fmt.Sprintf(`INSERT INTO jobq_schema VALUES (%d, 0)`, v))
	}
	now := time.Now().UnixMicro()
	queries = append(queries,
		fmt.Sprintf(`INSERT INTO jobs (id, queue, type, payload, max_attempts, status, available_at, created_at) VALUES (1, 'q', 't', '{}', 3, 'pending', %d, %d)`, now, now),
		fmt.Sprintf(`INSERT INTO jobs (id, queue, type, payload, attempts, max_attempts, status, available_at, created_at, reserved_at, lease_until, claim_token)
			VALUES (2, 'q', 't', '{}', 1, 3, 'reserved', %d, %d, %d, %d, 5)`, now, now, now, now+time.Hour.Microseconds()),
		`INSERT INTO failed_jobs (job_id, queue, type, payload, attempts, max_attempts, priority, error, created_at, failed_at) VALUES (3, 'q', 't', '{}', 3, 3, 0, 'boom', 0, 0)`)
	for _, q := range queries {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	b, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if v, err := b.schemaState(ctx, b.r); err != nil || v != SchemaVersion() {
		t.Fatalf("schema after Open = %d, %v; want %d", v, err, SchemaVersion())
	}
	// The held job from before completes; the pending one is claimed and
	// fails; the old failed one is replayed: none is a task's.
	res, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: backend.JobRef{ID: 2, Attempt: 1, Token: 5}, Kind: backend.OutcomeDone, Result: []byte(`1`)}}})
	if err != nil || len(res.Stale) != 0 {
		t.Fatalf("complete the job held across the migration: %+v, %v", res, err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 1 || rows[0].ID != 1 {
		t.Fatalf("claim = %v, %v; want job 1", rows, err)
	}
	finish(t, b, backend.OutcomeFail, rows[0])
	rr, err := b.FailedReplay(ctx, backend.FailedReplayParams{})
	if err != nil || rr.Replayed != 2 {
		t.Fatalf("replay = %+v, %v; want both failed jobs back", rr, err)
	}
	for _, id := range []int64{1, 3} {
		if _, err := b.JobGet(ctx, id); err != nil {
			t.Fatalf("replayed job %d: %v", id, err)
		}
	}
	id := insertWF(t, b, wfTask("a"), wfTask("b", "a"))
	finish(t, b, backend.OutcomeDone, claimAll(t, b, 1)["a"])
	finish(t, b, backend.OutcomeDone, claimAll(t, b, 1)["b"])
	if wf := wantStates(t, b, id, "a=succeeded b=succeeded"); wf.State != backend.WorkflowSucceeded {
		t.Fatalf("workflow after the migration: %s", wf.State)
	}
}
