package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// failOne puts one job of queue into the failed jobs table of db.
func failOne(t *testing.T, db, queue string) {
	t.Helper()
	b := openDB(t, db)
	ctx := t.Context()
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	out := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "boom"}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckExitCodes runs the built 'jobq check' the way a monitor does
// and asserts its exit code and its one line: OK on an empty store, WARNING
// for a backlog over --max-depth and for a failed job over --max-failed 0,
// CRITICAL over a --crit-* threshold, UNKNOWN for a backend that cannot be
// read and for a mistake in the command line (told apart by the line).
func TestCheckExitCodes(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	check := func(wantCode int, wantPrefix string, args ...string) {
		t.Helper()
		r := runBinary(t, "", nil, append([]string{"check"}, args...)...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != wantCode || len(lines) != 1 || !strings.HasPrefix(r.stdout, wantPrefix) || r.stderr != "" {
			t.Fatalf("jobq check %s: exit %d, stdout %q, stderr %q; want exit %d and one line starting %q",
				strings.Join(args, " "), r.code, r.stdout, r.stderr, wantCode, wantPrefix)
		}
	}
	check(0, "JOBQ OK - 0 queues, 0 due, oldest waiting 0s, 0 failed", "--db", db)

	for range 3 {
		if r := run(t, "--db", db, "enqueue", "http", `{"url":"http://127.0.0.1:1/"}`, "--queue", "mail"); r.err != nil {
			t.Fatal(r.err)
		}
	}
	check(0, "JOBQ OK - 1 queue, 3 due", "--db", db, "--max-depth", "3")
	check(1, "JOBQ WARNING - mail: 3 due (warning over 2); 1 queue, 3 due", "--db", db, "--max-depth", "2")
	check(2, "JOBQ CRITICAL - mail: 3 due (critical over 2)", "--db", db, "--max-depth", "1", "--crit-depth", "2")
	check(0, "JOBQ OK - 1 queue, 0 due", "--db", db, "--max-depth", "0", "--queues", "other")

	failOne(t, db, "billing")
	check(0, "JOBQ OK - 2 queues, 3 due, oldest waiting ", "--db", db) // defaults: depth 10000, wait 5m
	check(1, "JOBQ WARNING - billing: 1 failed (warning over 0); 2 queues", "--db", db, "--max-failed", "0")
	check(2, "JOBQ CRITICAL - billing: 1 failed (critical over 0); 2 queues", "--db", db, "--max-failed", "0", "--crit-failed", "0")

	check(3, "JOBQ UNKNOWN - open: backend unavailable: postgres at 127.0.0.1:1", "--db", "postgres://postgres:s3cret@127.0.0.1:1/test", "--timeout", "5s")
	check(3, "JOBQ UNKNOWN - sqlite ", "--db", "sqlite:"+t.TempDir()+"/typo.db")
	check(3, "JOBQ UNKNOWN - usage: unknown flag: --max-dpth", "--db", db, "--max-dpth", "5")
	check(3, "JOBQ UNKNOWN - usage: --crit-depth 1 is below --max-depth 5", "--db", db, "--max-depth", "5", "--crit-depth", "1")
	check(3, "JOBQ UNKNOWN - usage: jobq check: --db memory: keeps jobs only", "--db", "memory:")

	r := runBinary(t, "", nil, "check", "--db", "postgres://postgres:s3cret@127.0.0.1:1/test", "--timeout", "5s")
	if strings.Contains(r.stdout+r.stderr, "s3cret") {
		t.Fatalf("the password reached the output: %q %q", r.stdout, r.stderr)
	}
}

// TestCheckJudge: waits are measured from the oldest due job, thresholds
// apply per queue, the worst queue decides, and the performance data
// carries every value with its thresholds.
func TestCheckJudge(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stats := []jobq.QueueStats{
		{Queue: "a", Pending: 5, OldestDue: now.Add(-10 * time.Minute)},
		{Queue: "b", Pending: 20000, Failed: 2, OldestDue: now.Add(-time.Minute)},
	}
	f := checkFlags{
		warn: limits{wait: 5 * time.Minute, hasWait: true, depth: 10000, hasDepth: true, severity: "warning"},
		crit: limits{wait: 30 * time.Minute, hasWait: true, severity: "critical"},
	}
	state, line := f.judge(stats, now)
	want := "a: oldest waiting 10m0s (warning over 5m0s); b: 20000 due (warning over 10000); " +
		"2 queues, 20005 due, oldest waiting 10m0s, 2 failed | " +
		"'a depth'=5;10000;;0 'a wait'=600s;300;1800;0 'a failed'=0;;;0 " +
		"'b depth'=20000;10000;;0 'b wait'=60s;300;1800;0 'b failed'=2;;;0"
	if state != checkWarning || line != want {
		t.Fatalf("judge = %d %q\nwant      %d %q", state, line, checkWarning, want)
	}
	f.crit.depth, f.crit.hasDepth = 15000, true
	if state, line = f.judge(stats, now); state != checkCritical || !strings.HasPrefix(line, "a: oldest waiting 10m0s (warning over 5m0s); b: 20000 due (critical over 15000); ") {
		t.Fatalf("with --crit-depth 15000: %d %q", state, line)
	}
}
