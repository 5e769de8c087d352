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

// TestJobsWait: 'jobq jobs wait' prints a completed job's result and exits
// 0, and ends every other way with its own exit code and one line.
func TestJobsWait(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	enqueue := func(queue string) int64 {
		t.Helper()
		r := run(t, "--db", db, "enqueue", "w", `{}`, "--queue", queue)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var id int64
		fmt.Sscan(r.out, &id)
		return id
	}
	b := openDB(t, db)
	finish := func(queue string, o backend.Outcome) {
		t.Helper()
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Hour})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim %s: %v", queue, err)
		}
		o.Ref = rows[0].Ref()
		if res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil || len(res.Stale) > 0 {
			t.Fatalf("complete: %+v, %v", res, err)
		}
	}
	done := enqueue("done")
	finish("done", backend.Outcome{Kind: backend.OutcomeDone, Keep: true, Result: []byte(`{"url":"s3://b/1.png"}`)})
	failed := enqueue("failed")
	finish("failed", backend.Outcome{Kind: backend.OutcomeFail, Error: "no such invoice"})
	cancelled := enqueue("cancelled")
	if r := run(t, "--db", db, "cancel", fmt.Sprint(cancelled)); r.err != nil {
		t.Fatal(r.err)
	}
	pending := enqueue("pending")

	r := run(t, "--db", db, "jobs", "wait", fmt.Sprint(done), "--timeout", "10s")
	if r.err != nil || r.out != `{"url":"s3://b/1.png"}`+"\n" {
		t.Fatalf("wait on a completed job: %q, %v; want its result", r.out, r.err)
	}
	var js jobview.Wait
	r = run(t, "--db", db, "jobs", "wait", fmt.Sprint(done), "--json")
	if err := json.Unmarshal([]byte(r.out), &js); err != nil || r.err != nil || js.State != "completed" || js.ID != done || js.FinishedAt == nil {
		t.Fatalf("wait --json: %q, %v (%v)", r.out, r.err, err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		line string
	}{
		{"failed", []string{fmt.Sprint(failed)}, exitWaitFailed, "job failed: no such invoice"},
		{"cancelled", []string{fmt.Sprint(cancelled)}, exitWaitCancelled, "job cancelled"},
		{"timeout", []string{fmt.Sprint(pending), "--timeout", "100ms"}, exitWaitTimeout, "not finished after --timeout 100ms"},
		{"unknown", []string{"999999"}, exitWaitGone, "finished but not retained, or never enqueued"},
		{"not an ID", []string{"abc"}, exitUsage, "abc"},
		{"negative timeout", []string{fmt.Sprint(pending), "--timeout", "-1s"}, exitUsage, "--timeout -1s"},
		{"no ID", nil, exitUsage, "one job ID"},
	} {
		r := run(t, append([]string{"--db", db, "jobs", "wait"}, c.args...)...)
		if code := exitCode(r.err); code != c.code {
			t.Errorf("%s: exit %d (%v), want %d", c.name, code, r.err, c.code)
		}
		said := r.errOut
		if r.err != nil {
			said += r.err.Error()
		}
		if !strings.Contains(said, c.line) || r.out != "" {
			t.Errorf("%s: stdout %q, stderr %q, error %v; want only %q said", c.name, r.out, r.errOut, r.err, c.line)
		}
	}
}
