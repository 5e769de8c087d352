package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// failThrice inserts a job of 4 attempts and ends three of them with
// different errors, durations and workers, the third with a secret in its
// text; with last it fails the fourth too. It returns the job's ID.
func failThrice(t *testing.T, b backend.Backend, last bool) int64 {
	t.Helper()
	ctx := t.Context()
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "q", Type: "mail", Payload: []byte(`{}`), MaxAttempts: 4}})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := []backend.Outcome{
		{Kind: backend.OutcomeRetry, Error: "dial tcp: connection refused", Duration: 1500 * time.Millisecond, Worker: "host-a:101"},
		{Kind: backend.OutcomeRetry, Error: "http 503\nretry later", Duration: 250 * time.Millisecond, Worker: "host-b:202"},
		{Kind: backend.OutcomeRetry, Error: "dial smtp://ada:pw-6628@mail.example:587: refused", Duration: 42 * time.Millisecond, Worker: "host-c:303"},
		{Kind: backend.OutcomeFail, Error: "payment declined", Duration: 3 * time.Second, Worker: "host-a:101"},
	}
	if !last {
		outcomes = outcomes[:3]
	}
	for _, o := range outcomes {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v, %d rows", err, len(rows))
		}
		o.Ref = rows[0].Ref()
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil {
			t.Fatal(err)
		}
	}
	return res[0].ID
}

// wantHistory asserts out prints one line per attempt with its number,
// duration, worker and masked first line of error, in order.
func wantHistory(t *testing.T, what, out string, attempts int) {
	t.Helper()
	lines := []string{
		`1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+1\.5s\s+host-a:101\s+dial tcp: connection refused`,
		`2\s+\S+ \S+\s+250ms\s+host-b:202\s+http 503 …`,
		`3\s+\S+ \S+\s+42ms\s+host-c:303\s+dial smtp://ada:\*\*\*@mail\.example:587: refused`,
		`4\s+\S+ \S+\s+3s\s+host-a:101\s+payment declined`,
	}
	if !strings.Contains(out, "ATTEMPT  AT") {
		t.Fatalf("%s lacks the attempts table:\n%s", what, out)
	}
	table := out[strings.Index(out, "ATTEMPT  AT"):]
	rows := strings.Split(strings.TrimSpace(table), "\n")[1:]
	if len(rows) != attempts {
		t.Fatalf("%s prints %d attempts, want %d:\n%s", what, len(rows), attempts, table)
	}
	for i, row := range rows {
		if !regexp.MustCompile(lines[i]).MatchString(row) {
			t.Errorf("%s attempt line %d = %q, want /%s/", what, i+1, row, lines[i])
		}
	}
	if strings.Contains(out, "pw-6628") {
		t.Errorf("%s shows a secret of an attempt's error:\n%s", what, out)
	}
}

// TestFailedShowAttempts: 'jobq failed show' prints every failed attempt,
// masked, and --json carries them as errors.
func TestFailedShowAttempts(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	failThrice(t, b, true)
	page, err := b.FailedList(t.Context(), backend.FailedListParams{Limit: 1})
	if err != nil || len(page) != 1 {
		t.Fatalf("failed list: %v, %v", page, err)
	}
	id := fmt.Sprint(page[0].JobID) // the job's ID names it
	r := run(t, "--db", db, "failed", "show", id)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantHistory(t, "failed show", r.out, 4)

	r = run(t, "--db", db, "failed", "show", id, "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var f jobview.Failed
	if err := json.Unmarshal([]byte(r.out), &f); err != nil {
		t.Fatalf("failed show --json printed %q: %v", r.out, err)
	}
	if len(f.Errors) != 4 || f.Errors[0].DurationMS != 1500 || f.Errors[2].Worker != "host-c:303" ||
		f.Errors[2].Error != "dial smtp://ada:***@mail.example:587: refused" || f.Errors[3].Attempt != 4 {
		t.Errorf("failed show --json errors = %+v", f.Errors)
	}
}

// TestJobsShow: 'jobq jobs show' prints a live job with its failed
// attempts; an unknown ID is an error naming it.
func TestJobsShow(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := failThrice(t, b, false)
	r := run(t, "--db", db, "jobs", "show", fmt.Sprint(id))
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"State:", "pending", "Attempts:", "3 of 4", "Last error:", "mail.example"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, r.out)
		}
	}
	wantHistory(t, "jobs show", r.out, 3)

	j := showJSON(t, db, id)
	if j.ID != id || len(j.Errors) != 3 || j.Errors[1].DurationMS != 250 || j.Errors[1].Error != "http 503\nretry later" {
		t.Errorf("jobs show --json = %+v", j)
	}

	r = run(t, "--db", db, "jobs", "show", "999")
	if r.code() != 1 || !strings.Contains(r.err.Error(), "job 999 not found") {
		t.Errorf("jobs show 999: code %d, %v", r.code(), r.err)
	}

	// A failed job, by the same ID: its state and all its attempts.
	db = tempDB(t)
	failed := failThrice(t, openDB(t, db), true)
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(failed))
	if r.err != nil || !regexp.MustCompile(`State:\s+failed`).MatchString(r.out) || !regexp.MustCompile(fmt.Sprintf(`ID:\s+%d\n`, failed)).MatchString(r.out) {
		t.Fatalf("jobs show of failed job %d = %q, %v", failed, r.out, r.err)
	}
	wantHistory(t, "jobs show of a failed job", r.out, 4)
	// --json in the shape GET /api/v1/jobs/{id} gives every job, a failed
	// one included: last_error and finished_at, not failed show's error
	// and failed_at.
	r = run(t, "--db", db, "jobs", "show", fmt.Sprint(failed), "--json")
	var fj jobview.Job
	if err := json.Unmarshal([]byte(r.out), &fj); err != nil || fj.ID != failed || fj.State != jobq.StateFailed ||
		len(fj.Errors) != 4 || fj.LastError == "" || fj.FinishedAt == nil || strings.Contains(r.out, `"failed_at"`) {
		t.Errorf("jobs show --json of a failed job = %q (%v); want the job view with last_error and finished_at", r.out, err)
	}
}
