package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
	"github.com/jobq/jobq/internal/storetest"
)

// TestJobsShowResult: 'jobq jobs show' prints a kept completed job's
// result, masked like its payload, in text and in --json; a job kept
// without one shows none.
func TestJobsShowResult(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := storetest.KeptWithResult(t, b, "q", []byte(storetest.KeptResult))
	r := run(t, "--db", db, "jobs", "show", fmt.Sprint(id))
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"completed", "Result:", `"url": "s3://b/a-320.png"`, `"width": 320`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, storetest.ResultSecret) {
		t.Errorf("jobs show prints the result's secret:\n%s", r.out)
	}

	j := showJSON(t, db, id)
	var got map[string]any
	if err := json.Unmarshal(j.Result, &got); err != nil || got["url"] != "s3://b/a-320.png" || got["width"] != 320.0 || got["token"] == storetest.ResultSecret {
		t.Errorf("jobs show --json result = %s (%v), want the result with its token masked", j.Result, err)
	}

	bare := storetest.KeptWithResult(t, b, "q", nil)
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(bare))
	if r.err != nil || strings.Contains(r.out, "Result:") {
		t.Errorf("jobs show of a job kept without a result: %v\n%s", r.err, r.out)
	}
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(bare), "--json")
	if r.err != nil || strings.Contains(r.out, `"result"`) {
		t.Errorf("jobs show --json of a job kept without a result: %v\n%s", r.err, r.out)
	}
}

// showJSON runs 'jobq jobs show ID --json' on db and decodes its answer.
func showJSON(t *testing.T, db string, id int64) jobview.Job {
	t.Helper()
	r := run(t, "--db", db, "jobs", "show", fmt.Sprint(id), "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var j jobview.Job
	if err := json.Unmarshal([]byte(r.out), &j); err != nil {
		t.Fatalf("jobs show --json printed %q: %v", r.out, err)
	}
	return j
}

// TestJobsShowProgress: 'jobq jobs show' prints a running job's progress
// in text and in --json; a running job that reported none shows none.
func TestJobsShowProgress(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := storetest.RunningWithProgress(t, b, "q", 42, storetest.ProgressMessage)
	r := run(t, "--db", db, "jobs", "show", fmt.Sprint(id))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := "Progress:     42% " + storetest.ProgressMessage; !strings.Contains(r.out, want) {
		t.Errorf("jobs show lacks %q:\n%s", want, r.out)
	}
	j := showJSON(t, db, id)
	if p := j.Progress; p == nil || p.Percent != 42 || p.Message != storetest.ProgressMessage || p.At.IsZero() {
		t.Errorf("jobs show --json progress = %+v, want 42%% %q", p, storetest.ProgressMessage)
	}

	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "bare", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"bare"}, Max: 1, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(res[0].ID))
	if r.err != nil || strings.Contains(r.out, "Progress:") || !strings.Contains(r.out, "reserved") {
		t.Errorf("jobs show of a running job without progress: %v\n%s", r.err, r.out)
	}
}
