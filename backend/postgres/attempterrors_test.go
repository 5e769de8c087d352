package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestAttemptHistoryStorage: the history (011) is stored as compact array
// entries compressed with lz4 (012), and a job whose history began as
// objects, before 012, reads back whole after one more retry.
func TestAttemptHistoryStorage(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	b := openTest(t, Options{Schema: schema})
	ctx := t.Context()
	pool := b.Pool()

	for _, table := range []string{"jobs", "failed_jobs"} {
		var method string
		err := pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute
			WHERE attrelid = ($1 || '.' || $2)::regclass AND attname = 'errors'`, quoteIdent(schema), table).Scan(&method)
		if err != nil {
			t.Fatalf("read %s.errors' compression: %v", table, err)
		}
		if method != "l" {
			t.Errorf("%s.errors compression %q, want l (lz4)", table, method)
		}
	}

	p := testJob("q")
	p.MaxAttempts = 5
	ins, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	id := ins[0].ID
	// The entry of attempt 1 as a build before 012 wrote it.
	execTest(t, `UPDATE `+quoteIdent(schema)+`.jobs SET errors = '[{"attempt":1,"at_us":1700000000000000,"duration_us":10,"worker":"old:1","error":"first"}]', attempts = 1 WHERE id = $1`, id)
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	long := strings.Repeat("connection refused; ", 40)
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{
		Ref: rows[0].Ref(), Kind: backend.OutcomeRetry, Error: long, Duration: time.Millisecond, Worker: "new:2",
	}}}); err != nil {
		t.Fatal(err)
	}
	var kinds string
	if err := pool.QueryRow(ctx, `SELECT string_agg(jsonb_typeof(e.v), ',' ORDER BY e.n)
		FROM `+quoteIdent(schema)+`.jobs, jsonb_array_elements(errors) WITH ORDINALITY e(v, n) WHERE id = $1`, id).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if kinds != "object,array" {
		t.Fatalf("stored entries %s, want the old object then a compact array", kinds)
	}
	j, err := b.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Errors) != 2 || j.Errors[0].Error != "first" || j.Errors[0].Worker != "old:1" ||
		j.Errors[1].Attempt != 2 || j.Errors[1].Error != long || j.Errors[1].Worker != "new:2" || j.Errors[1].Duration != time.Millisecond {
		t.Fatalf("history %+v", j.Errors)
	}
}
