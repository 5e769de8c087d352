package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// unfencedArgs is a verify run that makes a build without the fence fail
// within seconds: half the jobs work one to two and a half leases, so a
// paused worker holds several, and the other worker is still running
// them when the paused one comes back and writes its late outcomes. Few
// jobs for many slots: a rescued job waits behind the jobs due before it
// (claim order), so with a backlog, which a loaded machine makes long, the
// other worker would not take it over before the pause ends.
func unfencedArgs(t *testing.T, seed int) []string {
	return []string{"--db", tempDB(t), "verify", "--quiet", "--faults", "pause", "--lease", "1s",
		"--jobs", "40", "--procs", "2", "--concurrency", "16", "--slow", "0.5",
		"--duration", "4s", "--pause-every", "1s", "--seed", strconv.Itoa(seed),
		"--history", filepath.Join(t.TempDir(), "history")} // kept when anomalies are found

}

// runVerifyBinary runs bin with args and returns its output and exit code.
func runVerifyBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "JOBQ_DB=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", bin, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestVerifyCatchesUnfencedBuild shows the checker can fail: a jobq built
// with the jobq_unfenced tag writes each outcome to whatever claim holds
// the job, so a paused worker's late outcome lands on the claim of the
// worker that took its job over; verify must report it and exit 1.
func TestVerifyCatchesUnfencedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the jobq binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "jobq-unfenced")
	if out, err := exec.Command("go", "build", "-tags", "jobq_unfenced", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags jobq_unfenced: %v\n%s", err, out)
	}
	// An overlap needs a paused worker's job rescued and claimed again
	// before the pause ends. Since a rescued job waits behind the jobs due
	// before it (claim order), a run may end without one: the checker has
	// to catch one in a few runs, each with its own seed.
	var stdout, stderr string
	var code int
	for seed := 7; seed < 12; seed++ {
		stdout, stderr, code = runVerifyBinary(t, bin, unfencedArgs(t, seed)...)
		if strings.Contains(stdout, "UNFENCED OVERLAP job ") {
			break
		}
		t.Logf("seed %d: exit %d without an overlap; trying another seed", seed, code)
	}
	if code != exitError || !strings.Contains(stdout, "UNFENCED OVERLAP job ") || !strings.Contains(stdout, "build        UNFENCED") {
		t.Fatalf("unfenced build: exit %d, want 1 with UNFENCED OVERLAP anomalies\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "a stale write was applied") || !strings.Contains(stderr, "anomalies found (the history is in ") {
		t.Errorf("the report does not explain the anomaly or name the history:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// Each anomaly shows the lines behind it: the late write and the pause.
	if !strings.Contains(stdout, " written proc=") || !strings.Contains(stdout, " pause proc=verifier") {
		t.Errorf("the anomalies lack their history lines:\n%s", stdout)
	}
	t.Logf("unfenced build:\n%s", stdout)
}

// TestVerifyFencedBuildHolds is the same run on the normal build: the
// fence refuses the late outcomes, and every check holds.
func TestVerifyFencedBuildHolds(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()
	stdout, stderr, code := runVerifyBinary(t, bin, unfencedArgs(t, 7)...)
	if code != 0 || !strings.Contains(stdout, "no anomalies: every check held") {
		t.Fatalf("normal build: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("normal build:\n%s", stdout)
}

func TestVerifyMemoryInProcess(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "verify", "--faults", "none", "--jobs", "100", "--procs", "2", "--duration", "500ms", "--slow", "0")
	if r.code() != 0 || !strings.Contains(r.out, "no anomalies: every check held") || !strings.Contains(r.out, "100 acknowledged") {
		t.Fatalf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code(), r.err, r.out, r.errOut)
	}
}

func TestVerifyWorkflowsInProcess(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "verify", "--faults", "none", "--workflows", "20", "--fan-out", "4", "--procs", "2", "--duration", "500ms", "--slow", "0")
	if r.code() != 0 || !strings.Contains(r.out, "20 workflows of 4 parts and a join (100 jobs)") || !strings.Contains(r.out, "max attempts 10") ||
		!strings.Contains(r.out, "one join completion per workflow  ok") {
		t.Fatalf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code(), r.err, r.out, r.errOut)
	}
}

func TestVerifyKeysInProcess(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "verify", "--faults", "none", "--keys", "9", "--per-key", "1,2", "--ordered", "--jobs", "90", "--procs", "2", "--duration", "500ms", "--slow", "0")
	if r.code() != 0 || !strings.Contains(r.out, "90 jobs on 9 keys (queues: limit 1, limit 2, ordered)") ||
		!strings.Contains(r.out, "never more than N of a key at once   ok") || !strings.Contains(r.out, "ordered keys in insertion order      ok") {
		t.Fatalf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code(), r.err, r.out, r.errOut)
	}
}

func TestVerifyDeadlinesInProcess(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", "memory:", "verify", "--faults", "none", "--deadlines", "0.5", "--jobs", "100", "--procs", "2", "--duration", "500ms", "--slow", "0")
	if r.code() != 0 || !strings.Contains(r.out, "100 jobs, 50 % with a deadline") ||
		!strings.Contains(r.out, "no claim after the deadline     ok") || !strings.Contains(r.out, "expired jobs never ran after    ok") {
		t.Fatalf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code(), r.err, r.out, r.errOut)
	}
}

func TestVerifyUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", "sqlite:x.db", "verify", "--faults", "proxy"}, "does not apply to sqlite"},
		{[]string{"--db", "sqlite:x.db", "verify", "--faults", "restart"}, "--broker redis"},
		{[]string{"--db", "memory:", "verify", "--faults", "kill"}, "memory: runs every worker inside this process"},
		{[]string{"verify", "--faults", "kill,fire"}, `--faults "kill,fire": unknown fault "fire"`},
		{[]string{"--db", "sqlite:x.db", "verify", "--broker", "redis"}, "give one of them"},
		{[]string{"verify", "--broker", "mysql"}, "use redis or postgres"},
		{[]string{"verify", "--jobs", "0"}, "--jobs 0 must be greater than zero"},
		{[]string{"verify", "--kill-every", "0s"}, "--kill-every 0s must be greater than zero"},
		{[]string{"verify", "--slow", "2"}, "--slow 2: use a share from 0 to 1"},
		{[]string{"--db", "sqlite:x.db", "verify", "--lease", "1s", "--pause-for", "1s"}, "longer than the lease"},
		{[]string{"verify", "--workflows", "10", "--jobs", "5"}, "--jobs and --workflows are both given"},
		{[]string{"verify", "--fan-out", "5"}, "--fan-out 5 needs --workflows"},
		{[]string{"verify", "--workflows", "0"}, "--workflows 0 must be greater than zero"},
		{[]string{"verify", "--workflows", "1", "--fan-out", "10000"}, "at most 10000 tasks"},
		{[]string{"verify", "--per-key", "1"}, "--per-key needs --keys"},
		{[]string{"verify", "--ordered"}, "--ordered needs --keys"},
		{[]string{"verify", "--keys", "0", "--ordered"}, "--keys 0 must be greater than zero"},
		{[]string{"verify", "--keys", "10"}, "--keys 10 needs --per-key"},
		{[]string{"verify", "--keys", "10", "--ordered", "--workflows", "5"}, "--keys and --workflows are both given"},
		{[]string{"verify", "--unique", "1"}, "--unique 1: give how many jobs ask for each identity, 2 or more"},
		{[]string{"verify", "--unique", "3", "--keys", "10", "--ordered"}, "--unique with --workflows or --keys"},
		{[]string{"--db", "memory:", "verify", "--faults", "none", "--unique", "5000"}, "Unique 5000: use at most 1000"},
		{[]string{"--db", "memory:", "verify", "--faults", "none", "--keys", "10", "--per-key", "1,1"}, "names the limit 1 twice"},
		{[]string{"verify", "--deadlines", "0"}, "--deadlines 0: give the share of jobs with a deadline"},
		{[]string{"verify", "--deadlines", "1.5"}, "--deadlines 1.5: give the share"},
		{[]string{"verify", "--deadlines", "0.3", "--unique", "3"}, "--deadlines with --workflows, --keys or --unique"},
		{[]string{"verify", "--clock-tolerance", "1s"}, "--clock-tolerance needs --deadlines"},
		{[]string{"--db", "sqlite:x.db", "verify", "--deadlines", "0.3", "--faults", "skew"}, "skew fault on SQLite"},
		{[]string{"verify", "worker"}, "started by jobq verify"},
		{[]string{"verify", "extra"}, "takes no arguments"},
	} {
		r := run(t, tc.args...)
		if r.code() != exitUsage || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("jobq %s: exit %d (%v), want %d with %q", strings.Join(tc.args, " "), r.code(), r.err, exitUsage, tc.want)
			continue
		}
		if strings.Contains(r.err.Error(), "\n") {
			t.Errorf("jobq %s: the error is more than one line: %q", strings.Join(tc.args, " "), r.err)
		}
	}
}

func TestVerifyNeverPrintsSecrets(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()
	down := withSecrets(t, "postgres://user@127.0.0.1:1/x") // nothing listens on port 1
	for _, faults := range []string{"none", "kill,pause,proxy"} {
		stdout, stderr, code := runVerifyBinary(t, bin, "--db", down, "verify", "--faults", faults, "--duration", "1s")
		if code == 0 || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("verify --faults %s on a server that is down: exit %d, stderr %q; want a failure naming the server", faults, code, stderr)
		}
		checkNoSecret(t, "jobq --db URL verify --faults "+faults, stdout+stderr)
	}
}
