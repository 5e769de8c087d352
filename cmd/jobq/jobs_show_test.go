package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// keptWithResult completes a job of b kept, with result, and returns its
// ID.
func keptWithResult(t *testing.T, b backend.Backend, result string) int64 {
	t.Helper()
	ctx := t.Context()
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "q", Type: "thumb", Payload: []byte(`{"image":"a.png"}`), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	o := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeDone, Keep: true}
	if result != "" {
		o.Result = []byte(result)
	}
	if r, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil || len(r.Stale) != 0 {
		t.Fatalf("complete: %+v, %v", r, err)
	}
	return res[0].ID
}

// TestJobsShowResult: 'jobq jobs show' prints a kept completed job's
// result, masked like its payload, in text and in --json; a job kept
// without one shows none.
func TestJobsShowResult(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := keptWithResult(t, b, `{"url":"s3://b/a-320.png","width":320,"token":"tok-9911"}`)
	r := run(t, "--db", db, "jobs", "show", fmt.Sprint(id))
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"completed", "Result:", `"url": "s3://b/a-320.png"`, `"width": 320`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "tok-9911") {
		t.Errorf("jobs show prints the result's secret:\n%s", r.out)
	}

	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(id), "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var j jobview.Job
	if err := json.Unmarshal([]byte(r.out), &j); err != nil {
		t.Fatalf("jobs show --json printed %q: %v", r.out, err)
	}
	var got map[string]any
	if err := json.Unmarshal(j.Result, &got); err != nil || got["url"] != "s3://b/a-320.png" || got["width"] != 320.0 || got["token"] == "tok-9911" {
		t.Errorf("jobs show --json result = %s (%v), want the result with its token masked", j.Result, err)
	}

	bare := keptWithResult(t, b, "")
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(bare))
	if r.err != nil || strings.Contains(r.out, "Result:") {
		t.Errorf("jobs show of a job kept without a result: %v\n%s", r.err, r.out)
	}
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(bare), "--json")
	if r.err != nil || strings.Contains(r.out, `"result"`) {
		t.Errorf("jobs show --json of a job kept without a result: %v\n%s", r.err, r.out)
	}
}
