package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

func TestCancelCommand(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	var ids []int64
	for _, args := range [][]string{
		{"enqueue", "http", `{"url":"http://example.com"}`},
		{"enqueue", "http", `{"url":"http://example.com"}`, "--delay", "1h"},
		{"enqueue", "http", `{"url":"http://example.com"}`, "--queue", "run"},
	} {
		r := run(t, append([]string{"--db", db}, args...)...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var id int64
		fmt.Sscan(r.out, &id)
		ids = append(ids, id)
	}
	b := openDB(t, db)
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"run"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v", err)
	}
	pending, scheduled, running := ids[0], ids[1], ids[2]

	r := run(t, "--db", db, "cancel", fmt.Sprint(pending), fmt.Sprint(scheduled), fmt.Sprint(running))
	if r.err != nil {
		t.Fatalf("cancel: %v", r.err)
	}
	want := []string{
		fmt.Sprintf("job %d: cancelled", pending),
		fmt.Sprintf("job %d: cancelled", scheduled),
		fmt.Sprintf("job %d: cancel requested: attempt 1 is running", running),
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 {
		t.Fatalf("cancel printed %q, want 3 lines", r.out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], w)
		}
	}

	// Twice, and unknown: each line says so, exit code 3.
	r = run(t, "--db", db, "cancel", fmt.Sprint(pending), fmt.Sprint(running), "999")
	if code := exitCode(r.err); code != exitNotCancelled {
		t.Fatalf("second cancel: exit %d (%v), want %d", code, r.err, exitNotCancelled)
	}
	for _, w := range []string{
		fmt.Sprintf("job %d: already cancelled\n", pending),
		fmt.Sprintf("job %d: already cancelled\n", running),
		"job 999: not cancelled: no such job",
	} {
		if !strings.Contains(r.out, w) {
			t.Errorf("second cancel printed %q, lacks %q", r.out, w)
		}
	}
	var js []cancelJSON
	r = run(t, "--db", db, "cancel", "--json", fmt.Sprint(pending))
	if err := json.Unmarshal([]byte(r.out), &js); err != nil || len(js) != 1 || js[0].Result != "already cancelled" {
		t.Fatalf("cancel --json printed %q (%v)", r.out, err)
	}

	// The cancelled jobs are listed; the running one is reserved, cancelling.
	r = run(t, "--db", db, "jobs", "list", "--state", "cancelled", "--json")
	var listed []jobview.Job
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil {
		t.Fatalf("jobs list printed %q: %v", r.out, err)
	}
	if len(listed) != 2 || listed[0].ID != scheduled || listed[1].ID != pending || listed[0].State != "cancelled" {
		t.Fatalf("cancelled jobs = %+v, want %d then %d", listed, scheduled, pending)
	}
	r = run(t, "--db", db, "jobs", "list", "--state", "reserved")
	if r.err != nil || !strings.Contains(r.out, "cancelling") || !strings.Contains(r.out, fmt.Sprint(running)) {
		t.Fatalf("reserved list = %q, %v; want job %d cancelling", r.out, r.err, running)
	}
	r = run(t, "--db", db, "jobs", "list", "--state", "cancelled", "--queue", "run", "--since", "1h")
	if r.err != nil || strings.TrimSpace(r.out) != "no cancelled jobs kept" {
		t.Fatalf("cancelled in run = %q, %v", r.out, r.err)
	}
}

func TestCancelAndJobsBadInput(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	for _, args := range [][]string{
		{"cancel"},
		{"cancel", "abc"},
		{"cancel", "0"},
		{"jobs", "list"},
		{"jobs", "list", "--state", "done"},
		{"jobs", "list", "--state", "failed"},
		{"jobs", "list", "--state", "cancelling"}, // a job state, listed as reserved
		{"jobs", "list", "--state", "pending", "--since", "yesterday"},
		{"jobs", "list", "--state", "pending", "--since", "1h", "--until", "2h"},
		{"jobs", "list", "--state", "pending", "--limit", "0"},
		{"worker", "--keep-completed", "-1s"},
		{"worker", "--failed-max-count", "-2"},
	} {
		r := run(t, append([]string{"--db", db}, args...)...)
		if code := exitCode(r.err); code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, r.err, exitUsage)
			continue
		}
		if msg := r.err.Error(); strings.Contains(msg, "\n") || msg == "" {
			t.Errorf("%v: error %q is not one line", args, msg)
		}
	}
	r := run(t, "--db", "sqlite:"+t.TempDir()+"/none.db", "cancel", "1")
	if !errors.Is(r.err, backend.ErrNoSchema) {
		t.Errorf("cancel on a missing store: %v, want ErrNoSchema (nothing created)", r.err)
	}
}

// TestJobsListStateColumn: the table names the state listed, as --json
// does: a scheduled job is stored pending, and was shown so.
func TestJobsListStateColumn(t *testing.T) {
	db := tempDB(t)
	if r := run(t, "--db", db, "enqueue", "report.build", "{}", "--delay", "1h"); r.err != nil {
		t.Fatal(r.err)
	}
	r := run(t, "--db", db, "jobs", "list", "--state", "scheduled")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.err != nil || len(lines) < 2 || !strings.Contains(lines[0], "STATE") ||
		strings.Fields(lines[1])[3] != "scheduled" {
		t.Fatalf("jobs list --state scheduled = %q, %v; want the row's STATE scheduled", r.out, r.err)
	}
}

// TestKeepCompletedTypeFlag: --keep-completed-type TYPE=DURATION gives a
// type its own retention (0: deleted at once); a malformed one is a usage
// error naming the fix.
func TestKeepCompletedTypeFlag(t *testing.T) {
	r := retentionFlags{completed: time.Hour, types: []string{"email.send=24h", "a=b=10m", "chatty=0"}}
	ret, err := r.retention(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]jobq.TypeRetention{"email.send": {Completed: 24 * time.Hour}, "a=b": {Completed: 10 * time.Minute}, "chatty": {DeleteAtOnce: true}}
	if !maps.Equal(ret.Types, want) || ret.Completed != time.Hour {
		t.Fatalf("retention = %+v, want Completed 1h and types %v", ret, want)
	}
	db := tempDB(t)
	for _, arg := range []string{"email.send", "=1h", "x=soon", "x=-1h"} {
		res := run(t, "--db", db, "worker", "--keep-completed-type", arg)
		if code := exitCode(res.err); code != exitUsage || !strings.Contains(res.err.Error(), "TYPE=DURATION") && !strings.Contains(res.err.Error(), "duration") {
			t.Errorf("--keep-completed-type %q: exit %d (%v), want a usage error", arg, code, res.err)
		}
	}
	res := run(t, "--db", db, "worker", "--keep-completed-type", "x=1h", "--keep-completed-type", "x=2h")
	if exitCode(res.err) != exitUsage || !strings.Contains(res.err.Error(), "twice") {
		t.Errorf("a type given twice: %v, want a usage error", res.err)
	}
}
