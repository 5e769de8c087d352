package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestMigrateClaimOrder: migration 009 rebuilds jobs_claim_idx in claim
// order (priority, available_at, id), and the jobs queued before it are
// claimed in that order: a job due earlier first, whatever its id.
// Migration 013 puts turn before available_at: 0 for every job queued
// before it, so their order stays.
func TestMigrateClaimOrder(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	migrateTo(t, schema, 8)
	s := quoteIdent(schema)
	// What a jobq at version 8 leaves: job 1 due a minute ago, job 2 (a
	// retry, say) due two minutes ago, job 3 due now.
	execTest(t, "INSERT INTO "+s+".jobs (id, queue, type, payload, max_attempts, available_at) VALUES (1, 'q', 't', '{}', 3, now() - interval '1 minute')")
	execTest(t, "INSERT INTO "+s+".jobs (id, queue, type, payload, max_attempts, available_at) VALUES (2, 'q', 't', '{}', 3, now() - interval '2 minutes')")
	execTest(t, "INSERT INTO "+s+".jobs (id, queue, type, payload, max_attempts) VALUES (3, 'q', 't', '{}', 3)")

	b := openSchema(t, testURL(t), Options{Schema: schema, NoVacuum: true})
	var def string
	if err := b.Pool().QueryRow(t.Context(), "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'jobs_claim_idx'", schema).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "(queue, priority DESC, turn, available_at, id) WHERE (status = 'pending'::text)") {
		t.Fatalf("jobs_claim_idx after the migration: %s", def)
	}
	for _, want := range []int64{2, 1, 3} {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].ID != want {
			t.Fatalf("claim = %v, %v; want job %d", rows, err, want)
		}
	}
}
