package verify

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/storetest"

	"github.com/jobq/jobq/internal/localserver"
)

// short is a run sized for tests: a second's lease, so rescues come
// quickly, faults a few times a second, and enough slow jobs that a
// paused worker holds some.
func short(db string, faults ...Fault) Config {
	return Config{
		DB: db, Faults: faults, Jobs: 150, Procs: 2, Concurrency: 8, SlowShare: 0.1,
		Duration: 3 * time.Second, Lease: time.Second,
		KillEvery: 300 * time.Millisecond, PauseEvery: time.Second, ProxyCutEvery: 600 * time.Millisecond,
		RestartEvery: 1500 * time.Millisecond, RestartDown: 300 * time.Millisecond,
		DrainTimeout: 45 * time.Second, WorkerCommand: testWorkerCommand(),
	}
}

// logWriter passes the progress lines to the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// mustVerify runs cfg and fails t unless every check held.
func mustVerify(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.Progress = logWriter{t}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return mustHold(t, cfg, rep)
}

// mustHold fails t unless every check of rep, the report of a run of
// cfg, held and its counts add up.
func mustHold(t *testing.T, cfg Config, rep *Report) *Report {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("anomalies found:\n%s", b.String())
	}
	t.Logf("\n%s", b.String())
	jobs := rep.Config.Jobs
	if cfg.Workflows > 0 {
		// A failed workflow's join is cancelled before it has a job. Only
		// acknowledged workflows' jobs are acknowledged: a workflow a send
		// whose reply was lost inserted again, and that failed, takes no
		// acknowledged join away.
		jobs -= rep.WorkflowsFailedAcked
		if rep.Workflows != cfg.Workflows || rep.JoinsDone != rep.WorkflowsSucceeded || rep.WorkflowsSucceeded == 0 {
			t.Errorf("%d workflows acknowledged (want %d), %d succeeded, %d joins done", rep.Workflows, cfg.Workflows, rep.WorkflowsSucceeded, rep.JoinsDone)
		}
	}
	// A request of the unique workload answered with a job already
	// acknowledged acknowledges no new one.
	jobs -= rep.UniqueDuplicates
	// A job of the deadline workload given up before a send (its
	// deadline passed while its batch was sent again) was never
	// acknowledged.
	jobs -= rep.DeadlineGivenUp
	if rep.Enqueued != jobs {
		t.Errorf("%d jobs acknowledged, want %d", rep.Enqueued, jobs)
	}
	if got := rep.Done + rep.DoneUnconfirmed + rep.Failed; got < jobs {
		t.Errorf("%d jobs ended, want at least %d", got, jobs)
	}
	if rep.HistoryDir != "" {
		t.Errorf("the history of a clean run was kept in %s", rep.HistoryDir)
	}
	return rep
}

// wantInjected fails t unless each named fault was injected.
func wantInjected(t *testing.T, rep *Report, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if rep.Injected[k] == 0 {
			t.Errorf("no %s fault was injected (%v)", k, rep.Injected)
		}
	}
}

func TestRunMemoryClean(t *testing.T) {
	t.Parallel()
	cfg := short("memory:")
	cfg.Faults = []Fault{}
	cfg.Duration = time.Second
	cfg.WorkerCommand = nil
	// A random seed plans no permanent failure in 150 jobs one run in
	// twenty (0.98^150), so the seed is fixed and its plan counted here.
	cfg.Seed = 7
	perm, transient := planCounts(cfg)
	if perm == 0 || transient == 0 {
		t.Fatalf("seed %d plans %d permanent and %d transient failures: pick a seed that plans both", cfg.Seed, perm, transient)
	}
	rep := mustVerify(t, cfg)
	if rep.Attempts < cfg.Jobs || rep.WorkerProcs != cfg.Procs || rep.Concurrent != 0 || rep.Refused != 0 {
		t.Errorf("attempts %d, workers %d, concurrent %d, refused %d", rep.Attempts, rep.WorkerProcs, rep.Concurrent, rep.Refused)
	}
	if rep.FailedOnPurpose != perm || rep.Failed != perm || rep.Reruns < transient {
		t.Errorf("failed %d (%d on purpose), retried %d; the plan fails %d for good and %d at first", rep.Failed, rep.FailedOnPurpose, rep.Reruns, perm, transient)
	}
	if !rep.Tokens {
		t.Error("the memory backend gave no claim tokens")
	}
}

// planCounts counts the jobs cfg's seed plans to fail for good and to
// fail only their first attempts, drawing as the producer does.
func planCounts(cfg Config) (perm, transient int) {
	rng := seeded(cfg.Seed, streamWorkload)
	for seq := range int64(cfg.Jobs) {
		p := planJob(rng, "", seq, cfg.SlowShare, cfg.Lease)
		switch {
		case p.Perm:
			perm++
		case p.Fail > 0:
			transient++
		}
	}
	return perm, transient
}

func TestRunSQLiteKillPause(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, short(storetest.Durable[0].URL(t), FaultKill, FaultPause))
	wantInjected(t, rep, "kill", "pause")
	if rep.WorkerProcs <= 2 {
		t.Errorf("%d worker processes started: the killed ones were not restarted", rep.WorkerProcs)
	}
}

func TestRunPostgresKillPauseProxy(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, short(storetest.Durable[1].URL(t), FaultKill, FaultPause, FaultProxy))
	wantInjected(t, rep, "kill", "pause", "cut", "blackhole")
}

func TestRunRedisKillPauseProxy(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, short(storetest.Durable[2].URL(t), FaultKill, FaultPause, FaultProxy))
	wantInjected(t, rep, "kill", "pause", "cut", "blackhole")
}

// workflows turns a short run into the workflow workload: 30 workflows
// of 5 parts and a join, the kills every 200 ms.
func workflows(cfg Config) Config {
	cfg.Jobs, cfg.Workflows, cfg.FanOut = 0, 30, 5
	cfg.KillEvery = 200 * time.Millisecond
	return cfg
}

func TestRunMemoryWorkflows(t *testing.T) {
	t.Parallel()
	cfg := workflows(short("memory:"))
	cfg.Faults, cfg.WorkerCommand = []Fault{}, nil
	rep := mustVerify(t, cfg)
	if rep.JoinStarts == 0 || rep.WorkflowChecks == 0 {
		t.Errorf("%d joins started, %d WorkflowCheck runs", rep.JoinStarts, rep.WorkflowChecks)
	}
}

func TestRunSQLiteWorkflowsKill(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, workflows(short(storetest.Durable[0].URL(t), FaultKill)))
	wantInjected(t, rep, "kill")
}

func TestRunPostgresWorkflowsKillProxy(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, workflows(short(storetest.Durable[1].URL(t), FaultKill, FaultProxy)))
	wantInjected(t, rep, "kill", "cut")
}

func TestRunRedisWorkflowsKillProxy(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, workflows(short(storetest.Durable[2].URL(t), FaultKill, FaultProxy)))
	wantInjected(t, rep, "kill", "cut")
}

func TestRunPrivateRedisRestart(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, "no redis-server for a private broker: %v", err)
	}
	t.Parallel()
	cfg := short("", FaultKill, FaultRestart)
	cfg.Broker = "redis"
	rep := mustVerify(t, cfg)
	wantInjected(t, rep, "kill", "restart")
}

func TestRunPrivatePostgresRestart(t *testing.T) {
	if _, err := localserver.PostgresBin(); err != nil {
		unavailable(t, "no PostgreSQL binaries for a private broker: %v", err)
	}
	t.Parallel()
	cfg := short("", FaultRestart, FaultProxy)
	cfg.Broker = "postgres"
	cfg.Duration = 4 * time.Second
	cfg.RestartEvery = 2 * time.Second
	rep := mustVerify(t, cfg)
	wantInjected(t, rep, "restart", "cut")
}

func TestRunSQLiteSkew(t *testing.T) {
	t.Parallel()
	// One worker ten minutes ahead, one behind, on one SQLite file
	// whose clock is theirs: the one behind sees no job due (the
	// verifier enqueues by the true clock), the one ahead does all the
	// work, and its restarts rescue what its killed predecessor held.
	cfg := short(storetest.Durable[0].URL(t), FaultSkew, FaultKill)
	rep := mustVerify(t, cfg)
	if rep.Injected["skew"] != rep.WorkerProcs {
		t.Errorf("%d of %d processes skewed", rep.Injected["skew"], rep.WorkerProcs)
	}
	if rep.ClaimsBehind != 0 || rep.ClaimsAhead == 0 {
		t.Errorf("claims by workers ahead %d, behind %d; want some, none", rep.ClaimsAhead, rep.ClaimsBehind)
	}
}

// unavailable skips t, or fails it under CI=true.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func TestConfigRefusals(t *testing.T) {
	cmd := []string{"x"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"proxy on sqlite", Config{DB: "sqlite:x.db", Faults: []Fault{FaultProxy}, WorkerCommand: cmd}, "does not apply to sqlite"},
		{"restart without a broker", Config{DB: "postgres://u@h/db", Faults: []Fault{FaultRestart}, WorkerCommand: cmd}, "needs a broker"},
		{"faults on memory", Config{DB: "memory:", Faults: []Fault{FaultKill}}, "memory: runs every worker inside this process"},
		{"skew on memory", Config{DB: "memory:", Faults: []Fault{FaultSkew}}, "memory:"},
		{"proxy on a cluster", Config{DB: "redis://h:7001?cluster=true", Faults: []Fault{FaultProxy}, WorkerCommand: cmd}, "Redis Cluster"},
		{"proxy on host=", Config{DB: "postgres://u@/db?host=/tmp", Faults: []Fault{FaultProxy}, WorkerCommand: cmd}, "one host:port"},
		{"no backend", Config{WorkerCommand: cmd}, "no backend URL"},
		{"broker and db", Config{DB: "sqlite:x.db", Broker: "redis", WorkerCommand: cmd}, "give one of them"},
		{"unknown broker", Config{Broker: "mysql", WorkerCommand: cmd}, "use redis or postgres"},
		{"sync", Config{DB: "sync:", WorkerCommand: cmd}, "no workers"},
		{"no worker command", Config{DB: "sqlite:x.db"}, "WorkerCommand"},
		{"short pause", Config{DB: "sqlite:x.db", Lease: time.Second, PauseFor: time.Second, WorkerCommand: cmd}, "longer than the lease"},
		{"negative jobs", Config{DB: "memory:", Jobs: -1}, "Jobs -1 is negative"},
		{"jobs and workflows", Config{DB: "memory:", Jobs: 10, Workflows: 10}, "give one of them"},
		{"fan-out alone", Config{DB: "memory:", FanOut: 3}, "set Workflows too"},
		{"fan-out too big", Config{DB: "memory:", Workflows: 1, FanOut: 10000}, "at most 10000 tasks"},
		{"per-key alone", Config{DB: "memory:", PerKey: []int{1}}, "PerKey [1] without Keys"},
		{"ordered alone", Config{DB: "memory:", Ordered: true}, "Ordered without Keys"},
		{"keys alone", Config{DB: "memory:", Keys: 10}, "without PerKey or Ordered"},
		{"keys and workflows", Config{DB: "memory:", Keys: 10, Ordered: true, Workflows: 5}, "give one of them"},
		{"negative keys", Config{DB: "memory:", Keys: -1}, "Keys -1 is negative"},
		{"key limit zero", Config{DB: "memory:", Keys: 10, PerKey: []int{0}}, "a key limit is from 1"},
		{"key limit twice", Config{DB: "memory:", Keys: 10, PerKey: []int{2, 2}}, "names the limit 2 twice"},
		{"deadlines over 1", Config{DB: "memory:", Deadlines: 1.5}, "Deadlines 1.5: give the share"},
		{"deadlines negative", Config{DB: "memory:", Deadlines: -0.1}, "Deadlines -0.1: give the share"},
		{"deadlines and workflows", Config{DB: "memory:", Deadlines: 0.3, Workflows: 5}, "Deadlines with Workflows, Keys or Unique"},
		{"deadlines and unique", Config{DB: "memory:", Deadlines: 0.3, Unique: 3}, "Deadlines with Workflows, Keys or Unique"},
		{"deadlines and skew on sqlite", Config{DB: "sqlite:x.db", Deadlines: 0.3, Faults: []Fault{FaultSkew}, WorkerCommand: cmd}, "skew fault on SQLite"},
		{"negative clock tolerance", Config{DB: "memory:", ClockTolerance: -time.Second}, "ClockTolerance -1s is negative"},
		{"fewer keys than queues", Config{DB: "memory:", Keys: 2, PerKey: []int{1, 2}, Ordered: true}, "fewer than the 3 keyed queues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid-input error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is more than one line: %q", err)
			}
		})
	}
	if _, err := (Config{DB: "postgres://u@h:5/db", WorkerCommand: cmd}).withDefaults(); err != nil {
		t.Errorf("the defaults on postgres: %v", err)
	}
}

func TestParseFaults(t *testing.T) {
	for in, want := range map[string]string{"none": "", "": "", "kill, pause,kill": "kill,pause", "auto": "<nil>"} {
		fs, err := ParseFaults(in)
		if err != nil {
			t.Fatalf("ParseFaults(%q): %v", in, err)
		}
		got := faultList(fs)
		if fs == nil {
			got = "<nil>"
		}
		if got != want {
			t.Errorf("ParseFaults(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := ParseFaults("kill,fire"); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), `"fire"`) {
		t.Errorf("ParseFaults of an unknown fault: %v", err)
	}
}

func TestProxiedURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s%40cret@db.example:5432/app?jobq_schema=x": "postgres://app:s%40cret@127.0.0.1:9/app?jobq_schema=x",
		"redis://:pw@cache:6379/5?key_prefix=v":                     "redis://:pw@127.0.0.1:9/5?key_prefix=v",
		"postgres://db.example/app":                                 "postgres://127.0.0.1:9/app",
	} {
		if _, err := proxyTarget(in); err != nil {
			t.Errorf("proxyTarget(%q): %v", in, err)
		}
		if got := proxiedURL(in, "127.0.0.1:9"); got != want {
			t.Errorf("proxiedURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got, _ := proxyTarget("postgres://db.example/app"); got != "db.example:5432" {
		t.Errorf("proxyTarget without a port = %q", got)
	}
}

func TestRunFailsWhenWorkersCannotStart(t *testing.T) {
	t.Parallel()
	cfg := short(storetest.Durable[0].URL(t))
	cfg.Faults = []Fault{}
	cfg.WorkerCommand = []string{"/bin/sh", "-c", "echo cannot start >&2; exit 3"}
	start := time.Now()
	rep, err := Run(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "exited by itself") || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("Run with workers that exit at once: %v, %v; want an error quoting their output", rep, err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("it took %s to give up", took)
	}
}

// keyedShort turns a short run into the keyed workload: 12 keys over a
// queue of key limit 1, one of limit 2 and an ordered one.
func keyedShort(cfg Config) Config {
	cfg.Keys, cfg.PerKey, cfg.Ordered = 12, []int{1, 2}, true
	return cfg
}

// plannedHeadReplays counts the jobs cfg's seed plans to fail for good on
// the ordered queue with a later job of their key behind them: each holds
// its key until the verifier replays it, drawing as the producer does.
func plannedHeadReplays(cfg Config) int {
	rng, keys := seeded(cfg.Seed, streamWorkload), keyPlanner(cfg.keyQueues("q"), cfg.Keys, seeded(cfg.Seed, streamKeys))
	permLast := map[string]bool{} // by key: its last job so far fails for good
	n := 0
	for seq := range int64(cfg.Jobs) {
		p := planJob(rng, "", seq, cfg.SlowShare, cfg.Lease)
		keys(seq, &p)
		if !p.Ord {
			continue
		}
		if permLast[p.Key] {
			n++
		}
		permLast[p.Key] = p.Perm
	}
	return n
}

func TestRunMemoryKeys(t *testing.T) {
	t.Parallel()
	cfg := keyedShort(short("memory:"))
	cfg.Faults, cfg.WorkerCommand = []Fault{}, nil
	// The seed is fixed so that its plan holds an ordered key's head
	// failing for good with jobs behind it: the replay must happen.
	cfg.Seed = 7
	if n := plannedHeadReplays(cfg); n == 0 {
		t.Fatalf("seed %d plans no held head to replay: pick another", cfg.Seed)
	}
	rep := mustVerify(t, cfg)
	if rep.Keys != cfg.Keys || rep.OrderedKeys != cfg.Keys/3 || rep.KeyReplayed == 0 || rep.OrderedDone == 0 {
		t.Errorf("%d keys ran (want %d), %d ordered (want %d), %d heads replayed, %d ordered jobs done", rep.Keys, cfg.Keys, rep.OrderedKeys, cfg.Keys/3, rep.KeyReplayed, rep.OrderedDone)
	}
	if rep.KeyMostRunning[1] != 1 || rep.KeyMostRunning[2] < 1 || rep.KeyMostRunning[2] > 2 || rep.OrderedMostRunning != 1 {
		t.Errorf("most running at once %v, ordered %d", rep.KeyMostRunning, rep.OrderedMostRunning)
	}
}

func TestRunSQLiteKeysKillPause(t *testing.T) {
	t.Parallel()
	cfg := keyedShort(short(storetest.Durable[0].URL(t), FaultKill, FaultPause))
	if !keepsKeys(t, cfg.DB) {
		t.Skipf("sqlite: keeps no keys in this build (backend.KeyController): its keys are not merged yet")
	}
	rep := mustVerify(t, cfg)
	wantInjected(t, rep, "kill", "pause")
}

// keepsKeys reports whether the backend at url implements keys.
func keepsKeys(t *testing.T, url string) bool {
	t.Helper()
	b, err := backend.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, ok := backend.As[backend.KeyController](b)
	return ok
}
