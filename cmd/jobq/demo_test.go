package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// demoSummary is what a test reads back from the demo's printed summary.
type demoSummary struct {
	completed, retriedJobs, retries, failed int
	delays                                  [][]time.Duration // per retried job, in order
	failedRows                              map[int64]string  // job ID -> "type attempts: error"
}

var (
	reCompleted = regexp.MustCompile(`(?m)^  completed +(\d+) `)
	reRetried   = regexp.MustCompile(`(?m)^  retried +(\d+)  jobs, (\d+) retries`)
	reWaited    = regexp.MustCompile(`(?m)waited (.+), (?:completed|failed) `)
	reFailed    = regexp.MustCompile(`(?m)^  failed +(\d+)  moved`)
	reFailedRow = regexp.MustCompile(`(?m)^ +job (\d+) +(\S+) +(\d+) attempts?: (.*)$`)
)

func parseDemo(t *testing.T, out string) demoSummary {
	t.Helper()
	num := func(re *regexp.Regexp, group int) int {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("summary lacks %s:\n%s", re, out)
		}
		n, _ := strconv.Atoi(m[group])
		return n
	}
	s := demoSummary{
		completed: num(reCompleted, 1), retriedJobs: num(reRetried, 1), retries: num(reRetried, 2),
		failed: num(reFailed, 1), failedRows: map[int64]string{},
	}
	for _, m := range reWaited.FindAllStringSubmatch(out, -1) {
		var ds []time.Duration
		for _, f := range strings.Split(m[1], " then ") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatalf("delay %q: %v", f, err)
			}
			ds = append(ds, d)
		}
		s.delays = append(s.delays, ds)
	}
	for _, m := range reFailedRow.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		s.failedRows[id] = m[2] + " " + m[3] + ": " + m[4]
	}
	return s
}

// TestDemoSummaryAgreesWithInspector runs the real demo twice on one SQLite
// file, replaying the first run's failures in between, and checks each
// summary against what the Inspector (what `jobq stats` and `jobq failed
// list` read) reports afterwards.
func TestDemoSummaryAgreesWithInspector(t *testing.T) {
	t.Parallel()
	db := tempDB(t)

	start := time.Now()
	r := run(t, "--db", db, "demo")
	if r.err != nil {
		t.Fatalf("demo: %v\n%s\n%s", r.err, r.out, r.errOut)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("demo took %s, promised under 30s", took)
	}
	if strings.Contains(r.errOut, "job_id=") {
		t.Errorf("the worker's per-job log lines repeat the demo's own on stderr:\n%s", r.errOut)
	}
	first := parseDemo(t, r.out)
	checkDemoRun(t, first, r.out)
	in := jobq.NewInspector(openDB(t, db))
	failed := checkDemoDB(t, in, 1)
	checkFailedRowsPrinted(t, first, failed, nil)
	// In process the binary is the test's, neither go run's nor one named
	// jobq, so the hints name plain jobq (TestJobqCommand covers the rest).
	for _, cmd := range []string{"jobq stats --db " + db, "jobq failed list --queue demo --db " + db, "jobq failed retry --all --queue demo --db " + db} {
		if !strings.Contains(r.out, "\n  "+cmd+"\n") {
			t.Errorf("summary lacks the command line %q:\n%s", cmd, r.out)
		}
	}
	if strings.Contains(r.out, "go install") {
		t.Errorf("summary tells how to install jobq, though it was not run by go run:\n%s", r.out)
	}
	// The show it suggests names one of the failed jobs, by its job ID.
	m := regexp.MustCompile(`\n  jobq failed show (\d+) --db `).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("summary lacks a failed show command:\n%s", r.out)
	}
	shown, _ := strconv.ParseInt(m[1], 10, 64)
	if f, ok := failed[shown]; !ok {
		t.Errorf("summary suggests failed show %d, not a failed job's ID (%v)", shown, failed)
	} else if r := run(t, "--db", db, "failed", "show", m[1]); r.err != nil || !strings.Contains(r.out, f.Type) {
		t.Errorf("failed show %d: %v\n%s", shown, r.err, r.out)
	}

	// Replay the failures: the next demo works them too but keeps them
	// out of its own numbers.
	if r := run(t, "--db", db, "failed", "retry", "--all", "--queue", "demo"); r.err != nil || !strings.Contains(r.out, "replayed 2") {
		t.Fatalf("failed retry: %v %q", r.err, r.out)
	}
	r = run(t, "--db", db, "demo")
	if r.err != nil {
		t.Fatalf("second demo: %v\n%s", r.err, r.out)
	}
	second := parseDemo(t, r.out)
	checkDemoRun(t, second, r.out)
	for _, want := range []string{
		`still held 2 unfinished jobs from an earlier run`,
		`also ran 4 attempts of jobs left on queue "demo" by earlier runs`, // report 3 + charge 1
		`4 failed (2 from this run, 2 from earlier runs)`,
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("second summary lacks %q:\n%s", want, r.out)
		}
	}
	all := checkDemoDB(t, in, 2)
	checkFailedRowsPrinted(t, second, all, failed)
}

// checkDemoRun checks one run's own numbers: 24 jobs, 22 completed, the
// three flaky calls and the report retried twice each with delays in the
// 200ms × 2^(n−1) ±20% band, and two failures.
func checkDemoRun(t *testing.T, s demoSummary, out string) {
	t.Helper()
	if s.completed != 22 || s.failed != 2 || s.completed+s.failed != len(demoJobs()) {
		t.Errorf("completed %d, failed %d; want 22 and 2 of %d:\n%s", s.completed, s.failed, len(demoJobs()), out)
	}
	if s.retriedJobs != 4 || s.retries != 8 || len(s.delays) != 4 {
		t.Errorf("retried %d jobs, %d retries, %d delay lines; want 4, 8, 4:\n%s", s.retriedJobs, s.retries, len(s.delays), out)
	}
	for _, ds := range s.delays {
		if len(ds) != 2 {
			t.Errorf("delays %v, want two", ds)
			continue
		}
		for i, d := range ds {
			base := demoRetryBase << i
			if d < base*8/10-time.Millisecond || d > base*12/10+time.Millisecond {
				t.Errorf("retry %d waited %s, outside %s ±20%%", i+1, d, base)
			}
		}
	}
}

// checkDemoDB checks the queue is drained and failed_jobs holds exactly
// runs × (one malformed charge after 1 attempt, one report after 3), and
// returns those rows by job ID.
func checkDemoDB(t *testing.T, in *jobq.Inspector, runs int) map[int64]*jobq.FailedJob {
	t.Helper()
	ctx := t.Context()
	q, err := queueStats(ctx, in, demoQueue)
	if err != nil {
		t.Fatal(err)
	}
	if q.Pending != 0 || q.Scheduled != 0 || q.Reserved != 0 || q.Failed != int64(2*runs) {
		t.Errorf("queue demo = %+v, want only %d failed", q, 2*runs)
	}
	rows, err := in.FailedPage(ctx, jobq.FailedFilter{Queue: demoQueue}, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]int{}
	out := map[int64]*jobq.FailedJob{}
	for _, f := range rows {
		byType[f.Type]++
		out[f.JobID] = f
		switch f.Type {
		case demoCharge:
			if f.Attempts != 1 || !strings.Contains(f.Error, "decode payment.charge payload") || !strings.HasPrefix(f.Error, "permanent: ") {
				t.Errorf("charge failed after %d attempts with %q; want 1 attempt, a permanent decode error", f.Attempts, f.Error)
			}
		case demoReport:
			if f.Attempts != 3 || !strings.Contains(f.Error, "connection refused") {
				t.Errorf("report failed after %d attempts with %q; want 3, connection refused", f.Attempts, f.Error)
			}
		}
	}
	if len(rows) != 2*runs || byType[demoCharge] != runs || byType[demoReport] != runs {
		t.Errorf("failed_jobs by type = %v (%d rows), want %d %s and %d %s", byType, len(rows), runs, demoCharge, runs, demoReport)
	}
	return out
}

// checkFailedRowsPrinted checks the summary listed exactly the failed jobs
// of this run's jobs, those not in prev, with their job IDs, types,
// attempts and errors.
func checkFailedRowsPrinted(t *testing.T, s demoSummary, rows, prev map[int64]*jobq.FailedJob) {
	t.Helper()
	// The first run's jobs were replayed and failed again under their
	// IDs: the second run names them as earlier runs' jobs, not here.
	printed := 0
	for id, f := range rows {
		line, ok := s.failedRows[id]
		if _, old := prev[id]; old {
			if ok {
				t.Errorf("summary lists job %d, an earlier run's", id)
			}
			continue
		}
		if !ok {
			t.Errorf("summary lacks failed job %d (%s)", id, f.Type)
			continue
		}
		printed++
		want := f.Type + " " + strconv.Itoa(f.Attempts) + ": " + f.Error
		if line != want {
			t.Errorf("summary row for job %d = %q, want %q", id, line, want)
		}
	}
	if printed != 2 || len(s.failedRows) != 2 {
		t.Errorf("summary printed %d failed rows (%d matching failed_jobs), want 2", len(s.failedRows), printed)
	}
}

// TestJobqCommand: the demo's hints name the command that runs jobq again
// the way the demo was run: go run again (its binary is gone), in the
// clone as ./cmd/jobq, elsewhere by package path and version; a binary run
// by a path as typed; otherwise jobq. When go run's package is not known,
// they say how to install jobq.
func TestJobqCommand(t *testing.T) {
	t.Parallel()
	const (
		goRun  = "/tmp/go-build1234/b001/exe/jobq"
		cached = "/root/.cache/go-build/8b/8bfb0c40e238a8a690ca6dee0439da4ebaf2ecb9a99996ff53bf30a3caa5d01e-d/jobq" // go run's, from Go 1.24
		pkg    = "github.com/jobq/jobq/cmd/jobq"
	)
	for _, c := range []struct {
		arg0, exe, pkg, version string
		inClone                 bool
		want                    string
		install                 bool
	}{
		{goRun, goRun, pkg, "(devel)", true, "go run ./cmd/jobq", false},
		{goRun, goRun, pkg, "(devel)", false, "go run " + pkg, false},
		{cached, cached, pkg, "(devel)", true, "go run ./cmd/jobq", false},
		{goRun, goRun, pkg, "v1.4.0", false, "go run " + pkg + "@v1.4.0", false},
		{goRun, goRun, "command-line-arguments", "", true, "go run ./cmd/jobq", false},
		{goRun, goRun, "command-line-arguments", "", false, "jobq", true},
		{"jobq", "/home/me/go/bin/jobq", pkg, "(devel)", true, "jobq", false},
		{"./jobq", "/src/jobq/jobq", pkg, "(devel)", true, "./jobq", false},
		{"/opt/my tools/jobq", "/opt/my tools/jobq", pkg, "v1.4.0", false, "'/opt/my tools/jobq'", false},
		{"/tmp/go-build1234/b001/jobq.test", "/tmp/go-build1234/b001/jobq.test", "", "", false, "jobq", false},
	} {
		cmd, install := jobqCommand(c.arg0, c.exe, c.pkg, c.version, c.inClone)
		if cmd != c.want || (install != "") != c.install {
			t.Errorf("jobqCommand(%q, %q, %q, %q, %v) = %q, %q; want %q, install line %v", c.arg0, c.exe, c.pkg, c.version, c.inClone, cmd, install, c.want, c.install)
		}
		if c.install && !strings.Contains(install, "go install ./cmd/jobq") {
			t.Errorf("install line %q does not name go install ./cmd/jobq", install)
		}
	}
}
