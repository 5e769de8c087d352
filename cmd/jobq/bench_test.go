package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// TestBenchWorkloads runs every workload with tiny sizes on memory and
// sqlite and checks each prints one JSON line with the expected fields,
// and that the workloads leave no job behind.
func TestBenchWorkloads(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := "memory:"
			if name == "sqlite" {
				db = tempDB(t)
			}
			r := run(t, "--db", db, "bench", "-n", "200", "--duration", "1s", "--rate", "100", "--workers", "20")
			if r.err != nil {
				t.Fatalf("bench: %v\n%s", r.err, r.errOut)
			}
			if strings.Contains(r.errOut, "temporary") {
				t.Fatalf("bench ignored --db %s: %s", db, r.errOut)
			}
			lines := strings.Split(strings.TrimSpace(r.out), "\n")
			want := []string{"enqueue-single", "enqueue-batch", "drain", "latency", "steady"}
			if len(lines) != len(want) {
				t.Fatalf("bench printed %d lines, want %d:\n%s", len(lines), len(want), r.out)
			}
			for i, line := range lines {
				checkBenchLine(t, line, want[i], name)
			}
			if name == "sqlite" {
				stats, err := jobq.NewInspector(openDB(t, db)).Stats(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(stats) != 0 {
					t.Errorf("bench left jobs behind: %+v", stats)
				}
			}
		})
	}
}

// TestBenchKeys: drain over keys with a key limit leaves nothing behind,
// and fairness reports when the small keys' jobs started.
func TestBenchKeys(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "bench", "--workload", "drain", "-n", "200", "--keys", "30", "--key-limit", "1", "--workers", "20")
	if r.err != nil {
		t.Fatalf("bench drain with keys: %v\n%s", r.err, r.errOut)
	}
	checkBenchLine(t, strings.TrimSpace(r.out), "drain", "memory")
	if !strings.Contains(r.out, `"keys":30,"key_limit":1`) {
		t.Fatalf("drain line does not name its keys: %s", r.out)
	}
	r = run(t, "--db", "memory:", "bench", "--workload", "fairness", "--hot", "2000", "--workers", "20")
	var m map[string]any
	if r.err != nil || json.Unmarshal([]byte(r.out), &m) != nil {
		t.Fatalf("bench fairness: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if m["jobs"] != 1000.0 || m["hot"] != 2000.0 || m["p99_ms"] == nil {
		t.Fatalf("fairness line %s: want the 1000 small jobs, the hot key's 2000 and a p99", r.out)
	}
}

// TestBenchUnique: enqueue-batch with --unique --duplicates 0.5 sends
// every job and stores half of them, the rest answered as duplicates of
// the previous batch's waiting jobs.
func TestBenchUnique(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "bench", "--workload", "enqueue-batch", "-n", "1000", "--batch", "100", "--unique", "--duplicates", "0.5")
	var m map[string]any
	if r.err != nil || json.Unmarshal([]byte(r.out), &m) != nil {
		t.Fatalf("bench enqueue-batch --unique: %v\n%s%s", r.err, r.out, r.errOut)
	}
	if m["jobs"] != 1000.0 || m["inserted"] != 500.0 || m["unique"] != true || m["duplicates"] != 0.5 {
		t.Fatalf("enqueue-batch line %s: want 1000 jobs sent, 500 inserted, unique, duplicates 0.5", r.out)
	}
}

// TestBenchMemProfile: --memprofile writes a pprof profile (gzipped
// protobuf) of the run's allocations. (--cpuprofile is not run here: it
// would fail under go test -cpuprofile, which holds the only profiler.)
func TestBenchMemProfile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mem.prof")
	r := run(t, "--db", "memory:", "bench", "--workload", "drain", "-n", "300", "--workers", "10", "--memprofile", path)
	if r.err != nil {
		t.Fatalf("bench: %v\n%s", r.err, r.errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("%d bytes, not a gzipped pprof profile", len(b))
	}
}

func checkBenchLine(t *testing.T, line, workload, backendName string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("line %q is not JSON: %v", line, err)
	}
	if m["workload"] != workload || m["backend"] != backendName {
		t.Errorf("line %s: want workload %s, backend %s", line, workload, backendName)
	}
	num := func(field string) float64 {
		v, ok := m[field].(float64)
		if !ok {
			t.Errorf("%s line lacks number %q: %s", workload, field, line)
		}
		return v
	}
	if num("seconds") <= 0 || num("jobs_per_sec") <= 0 {
		t.Errorf("%s: seconds and jobs_per_sec must be positive: %s", workload, line)
	}
	jobs := num("jobs")
	switch workload {
	case "enqueue-single":
		if jobs != 200 || num("producers") != 1 || num("alloc_bytes_per_job") <= 0 {
			t.Errorf("%s: %s", workload, line)
		}
	case "enqueue-batch":
		if jobs != 200 || num("batch") != 1000 || num("alloc_bytes_per_job") <= 0 {
			t.Errorf("%s: %s", workload, line)
		}
	case "drain":
		if jobs != 200 || num("workers") != 20 || num("alloc_bytes_per_job") <= 0 || num("cpu_us_per_job") <= 0 {
			t.Errorf("%s: %s", workload, line)
		}
	case "latency":
		// min(-n 200, --rate 100 × --duration 1s) jobs.
		if jobs != 100 || num("rate") != 100 {
			t.Errorf("%s: %s", workload, line)
		}
		p50, p90, p99, mx := num("p50_ms"), num("p90_ms"), num("p99_ms"), num("max_ms")
		if p50 <= 0 || p50 > p90 || p90 > p99 || p99 > mx {
			t.Errorf("latency percentiles out of order: %s", line)
		}
	case "steady":
		if jobs <= 0 || num("producers") != 8 || num("enqueued") < jobs || num("max_backlog") != 1000 ||
			num("alloc_bytes_per_job") <= 0 || num("cpu_us_per_job") <= 0 {
			t.Errorf("%s: %s", workload, line)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--workload", "nope"},
		{"-n", "0"},
		{"--duration", "0s"},
		{"--workers", "20000"},
		{"--key-limit", "1"},
		{"--keys", "-1"},
		{"--duplicates", "0.5"},
		{"--unique", "--duplicates", "0.95"},
		{"extra"},
	} {
		r := run(t, append([]string{"--db", "memory:", "bench"}, args...)...)
		if r.code() != 2 || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("bench %v: exit %d, err %v; want a one-line usage error", args, r.code(), r.err)
		}
	}
	if r := run(t, "--db", "sync:", "bench"); r.err == nil || !strings.Contains(r.err.Error(), "sync backend") {
		t.Errorf("bench on sync: %v, want a refusal naming the sync backend", r.err)
	}
}

// TestBenchDefaultsToTemporaryFile checks that bench without --db or
// JOBQ_DB writes to a temporary SQLite file it removes, not to ./jobq.db.
func TestBenchDefaultsToTemporaryFile(t *testing.T) {
	t.Setenv("JOBQ_DB", "") // not parallel: it changes the environment
	_, err := os.Stat("jobq.db")
	existed := err == nil
	r := run(t, "bench", "--workload", "enqueue-batch", "-n", "10")
	if r.err != nil {
		t.Fatalf("bench: %v\n%s", r.err, r.errOut)
	}
	m := regexp.MustCompile(`temporary SQLite file in (\S+)`).FindStringSubmatch(r.errOut)
	if m == nil {
		t.Fatalf("stderr does not name the temporary file: %q", r.errOut)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s still exists (err %v)", m[1], err)
	}
	if _, err := os.Stat("jobq.db"); err == nil && !existed {
		t.Errorf("bench created ./jobq.db")
	}
	if !strings.Contains(r.out, `"workload":"enqueue-batch"`) {
		t.Errorf("out = %q", r.out)
	}
}

// TestBenchObserve: --observe runs the workloads with metrics and tracing
// on (the result says which), --observe=metrics with metrics alone, and
// anything else is a usage error.
func TestBenchObserve(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--observe"}, "metrics,tracing"},
		{[]string{"--observe=metrics"}, "metrics"},
		{[]string{"--observe=tracing", "--observe-sample", "0.5", "--observe-sampler", "jobq"}, "tracing (sampled 0.5 by jobq)"},
	} {
		r := run(t, append([]string{"--db", "memory:", "bench", "--workload", "drain", "-n", "300", "--workers", "10"}, c.flags...)...)
		if r.err != nil {
			t.Fatalf("bench %s: %v\n%s", c.flags, r.err, r.errOut)
		}
		var res struct {
			Workload, Observe string
			Jobs              int
		}
		if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Workload != "drain" || res.Observe != c.want || res.Jobs != 300 {
			t.Fatalf("bench %s printed %q (%v); want a drain of 300 jobs observed with %s", c.flags, r.out, err, c.want)
		}
	}
	if r := run(t, "--db", "memory:", "bench", "--observe=logs"); r.code() != exitUsage || !strings.Contains(r.err.Error(), `--observe "logs"`) {
		t.Fatalf("bench --observe=logs: exit %d, %v", r.code(), r.err)
	}
	if r := run(t, "--db", "memory:", "bench", "--observe", "--observe-sampler", "otel"); r.code() != exitUsage || !strings.Contains(r.err.Error(), `--observe-sampler "otel"`) {
		t.Fatalf("bench --observe-sampler otel: exit %d, %v", r.code(), r.err)
	}
}

// TestBenchWorkerProcess runs the built jobq: with --worker-process the
// workers run in a 'jobq bench-worker' process of their own on the same
// SQLite file, the results say so, and the jobs are gone from the file's
// tables afterwards.
func TestBenchWorkerProcess(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	for _, c := range []struct {
		name     string
		args     []string
		workload string
		jobs     float64
	}{
		{"Drain", []string{"--workload", "drain", "-n", "2000"}, "drain", 2000},
		{"DrainKeys", []string{"--workload", "drain", "-n", "2000", "--keys", "30", "--key-limit", "1"}, "drain", 2000},
		// min(-n 2000, --rate 100 × --duration 1s) jobs, found by the
		// worker process at its polls (SQLite wakes only its own process).
		{"Latency", []string{"--workload", "latency", "-n", "2000", "--rate", "100", "--duration", "1s"}, "latency", 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "bench.db")
			db := "sqlite:" + path
			r := runBinary(t, "", nil, append([]string{"--db", db, "bench", "--worker-process", "--workers", "20"}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
				t.Fatalf("stdout %q is not one JSON line: %v", r.stdout, err)
			}
			if m["workload"] != c.workload || m["worker_process"] != true || m["jobs"] != c.jobs {
				t.Errorf("result %s: want workload %s, worker_process true, %v jobs", r.stdout, c.workload, c.jobs)
			}
			if c.name == "DrainKeys" && (m["keys"] != 30.0 || m["key_limit"] != 1.0) {
				t.Errorf("result %s does not name its keys", r.stdout)
			}
			if c.workload == "latency" {
				if p50, p99 := m["p50_ms"].(float64), m["p99_ms"].(float64); p50 <= 0 || p99 < p50 {
					t.Errorf("latency percentiles %v, %v: %s", p50, p99, r.stdout)
				}
			} else if cpu, _ := m["cpu_us_per_job"].(float64); cpu <= 0 {
				t.Errorf("no CPU figure: %s", r.stdout)
			}
			if stats, err := jobq.NewInspector(openDB(t, db)).Stats(t.Context()); err != nil || len(stats) != 0 {
				t.Errorf("stats after the run: %+v, %v; want no queue with jobs", stats, err)
			}
			sdb, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer sdb.Close()
			for _, table := range []string{"jobs", "failed_jobs"} {
				var n int
				if err := sdb.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
					t.Errorf("%s holds %d rows after the run (%v); want none", table, n, err)
				}
			}
		})
	}
}

// TestBenchWorkerProcessRefusals: stores that live inside one process and
// --observe (whose hooks would stay in the producers' process) are refused
// with one line, before anything runs.
func TestBenchWorkerProcessRefusals(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--db", "memory:", "bench", "--worker-process"},
		{"--db", "sync:", "bench", "--worker-process"},
		{"--db", "memory:", "bench", "--worker-process", "--observe"},
	} {
		r := run(t, args...)
		if r.code() != exitUsage || r.out != "" || strings.Contains(r.err.Error(), "\n") || !strings.Contains(r.err.Error(), "--worker-process") {
			t.Errorf("%v: exit %d, out %q, err %v; want a one-line usage error naming --worker-process", args, r.code(), r.out, r.err)
		}
	}
}
