package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/verify"
)

// verifyFlags are the verify command's knobs; zero-value meanings live in
// verify.Config.
type verifyFlags struct {
	cfg    verify.Config
	faults string
	quiet  bool
}

func (a *app) newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check, under injected faults, that --db never loses a job nor runs one in two places unfenced",
		Long: `Check jobq's two promises on your own deployment, Jepsen style:

  1. an acknowledged job is never lost: it ends done, or in failed jobs with
     its reason (delivery is at-least-once: an attempt may run again);
  2. a job runs in at most one place at a time, unless its holder lost its
     lease; then that holder's outcome is refused as stale (the fence, by
     claim token) and its handler's context is cancelled (jobq.ErrLeaseLost).

verify enqueues --jobs jobs of its own type on a queue of its own
(verify-<run id>; your queues are left alone) over most of --duration, runs
--procs worker processes (this executable, each a jobq worker with
--concurrency slots, a --lease of 2s) and injects --faults meanwhile:

  kill     SIGKILL a random worker every --kill-every; it is restarted
  pause    SIGSTOP a worker for --pause-for (longer than the lease) every
           --pause-every, then SIGCONT: its late outcomes must be refused
  proxy    postgres:// and redis:// only: the workers reach the server
           through a TCP proxy in verify that, every --proxy-cut-every, cuts
           every connection, blackholes them for longer than a lease (then
           delivers what it held late, or cuts), or adds latency
  restart  with --broker only: kill the private server (SIGKILL for Redis,
           an immediate stop for PostgreSQL) every --restart-every and start
           it again on the same data after --restart-down
  skew     set the workers' clocks --skew ahead (half of them) or behind:
           their history's wall times, and on SQLite, whose clock is the
           process's own, its leases and due times (expect many jobs run
           twice, fenced, and failed with "lease expired"); on PostgreSQL
           and Redis the server's clock decides, so nothing changes there
  replay   with --workflows only: every --replay-every, replay each failed
           workflow task of the run (once per job) as an operator would,
           while its siblings still run; a part planned to fail for good
           succeeds after its replay, so its workflow must then succeed

--faults auto (the default) is kill,pause on SQLite, kill,pause,proxy on
PostgreSQL and Redis, and restart too with --broker, and replay too with
--workflows; none is a clean run. memory: runs --procs workers inside this
process and takes no faults but replay.
--broker redis (or postgres) starts a private server on a free port in a
temporary directory (Redis with appendonly yes, appendfsync always;
PostgreSQL from initdb, as the postgres user when run as root) instead of
--db. Without --db (and JOBQ_DB) verify uses a temporary SQLite file. On
Redis a queue keeps one of its key prefix's 4,095 indexes for good and every
run makes a new queue: give verify a prefix of its own
(redis://host:6379/0?key_prefix=jobq-verify).

--keys N makes every job carry one of N keys, spread over a queue per
--per-key limit (at most that many attempts of one key at once) and, with
--ordered, an ordered queue (a key's jobs one at a time, in enqueue order; a
head that fails for good holds its key, and verify, acting as the operator,
replays it every --replay-every so that the key goes on). The checks then
also show that no key ran more attempts at once than its limit (counting
those whose outcome was applied or never refused), that each ordered key's
jobs started and completed in insertion order, replays included, and that no
key is left held without its failed head.

--unique N makes every job a request for an identity that N jobs of the run
ask for, enqueued with that identity's unique key, the later requests while
its job waits, runs or has ended (a duplicate answers the live job's ID; a
request after it ended makes a new job). The checks then also show that no
two jobs of one identity were ever live at once.

--deadlines F gives a share F (0 to 1) of the jobs a deadline (jobq.Deadline),
a third each 50ms to a quarter lease, a quarter lease to two leases, and 10
to 30 leases ahead, so that the queue's delays and the faults make some
expire. The checks then also show that no job was claimed after its
deadline (by the store's reserved time, and by when the worker's claim call
began, within --clock-tolerance of the store's clock), and that every job
that expired did so after its deadline, into failed jobs with the deadline
error, and was never claimed, held or done once expired. A backend without
deadlines is refused before anything is enqueued.

--workflows N makes the workload N workflows instead of lone jobs: each is
--fan-out parts (10) and a join that waits for all of them, and 2 % of them
have a part that fails for good. The checks then also show that every join
was claimed only after all its parts had succeeded, that exactly one join
completed per workflow that succeeded (none in one that failed), and that no
workflow is left running, with the stored counts checked every second
(WorkflowCheck). Its tasks get 10 attempts unless --max-attempts says
otherwise.

Every worker records each attempt's start and end, each claim, and what
became of each outcome in a history file; at the end, once the faults have
stopped and the queue has drained (--drain-timeout), verify checks the
history against the backend: no acknowledged job lost, no two attempts of a
job overlapping unless the earlier claim's outcome was refused (else an
UNFENCED OVERLAP: a stale write applied), exactly one terminal state per
job, no job claimed more than its attempts plus free releases allow, and
the backend's counts in agreement. It prints a progress line every 2s on
stderr, then a table of the checks and every anomaly with the history lines
behind it, and exits 0 when everything held, 1 when an anomaly was found
(the history is kept and named), 2 for a mistake in the command line. The
run's failed jobs are purged afterwards unless --keep.`,
		Example: `  jobq verify
  jobq verify --db postgres://app@db:5432/app --jobs 20000 --procs 4 --concurrency 25 --duration 60s
  jobq verify --broker redis --faults kill,pause,proxy,restart --duration 30s
  jobq verify --workflows 1000 --faults kill,replay --kill-every 200ms --duration 2m --slow 0
  jobq verify --keys 200 --per-key 1,2 --ordered --faults kill,pause --duration 60s
  jobq verify --unique 4 --jobs 8000 --faults kill,proxy --duration 60s
  jobq verify --deadlines 0.3 --jobs 8000 --duration 60s
  jobq verify --db memory: --faults none`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return err
			}
			return a.runVerify(cmd, f)
		},
	}
	fl := cmd.Flags()
	c := &f.cfg
	fl.IntVarP(&c.Jobs, "jobs", "n", 2000, "jobs to enqueue")
	fl.IntVar(&c.Workflows, "workflows", 0, "enqueue this many workflows (--fan-out parts and a join each) instead of --jobs")
	fl.IntVar(&c.FanOut, "fan-out", 10, "parts of each workflow, with --workflows")
	fl.IntVar(&c.Keys, "keys", 0, "spread the jobs over this many keys, on a queue per --per-key limit and with --ordered an ordered queue")
	fl.IntSliceVar(&c.PerKey, "per-key", nil, "key limits, one queue each (e.g. 1,2), with --keys")
	fl.BoolVar(&c.Ordered, "ordered", false, "with --keys, an ordered queue too, whose held keys verify replays as an operator would")
	fl.IntVar(&c.Unique, "unique", 0, "make each job one of this many requests for one identity (its unique key), to check that one job of an identity lives at a time")
	fl.Float64Var(&c.Deadlines, "deadlines", 0, "give this share (0 to 1) of the jobs a deadline, to check that none is claimed after it and expired ones never run")
	fl.DurationVar(&c.ClockTolerance, "clock-tolerance", 50*time.Millisecond, "with --deadlines, how far behind the workers' clock the store's may be")
	fl.IntVar(&c.Procs, "procs", 3, "worker processes (in-process workers on memory:)")
	fl.IntVar(&c.Concurrency, "concurrency", 10, "jobs each worker runs at once")
	fl.DurationVar(&c.Duration, "duration", 15*time.Second, "how long the faults go on (jobs are enqueued over the first 80 %)")
	fl.StringVar(&f.faults, "faults", "auto", "faults to inject: auto, none, or a list of kill,pause,proxy,restart,skew,replay")
	fl.DurationVar(&c.KillEvery, "kill-every", 500*time.Millisecond, "kill a worker process this often")
	fl.DurationVar(&c.PauseEvery, "pause-every", 5*time.Second, "pause a worker process this often")
	fl.DurationVar(&c.PauseFor, "pause-for", 0, "how long a pause lasts (default 2.5 leases)")
	fl.DurationVar(&c.ProxyCutEvery, "proxy-cut-every", 5*time.Second, "cut, blackhole or slow the workers' connections this often")
	fl.DurationVar(&c.ProxyLatency, "proxy-latency", 0, "latency the proxy adds to everything it forwards")
	fl.DurationVar(&c.RestartEvery, "restart-every", 10*time.Second, "restart the private broker this often")
	fl.DurationVar(&c.RestartDown, "restart-down", time.Second, "how long the private broker stays down")
	fl.DurationVar(&c.Skew, "skew", 10*time.Minute, "the skew fault's clock offset")
	fl.DurationVar(&c.ReplayEvery, "replay-every", 100*time.Millisecond, "look for failed workflow tasks (the replay fault), or held keys (--ordered), to replay this often")
	fl.DurationVar(&c.Lease, "lease", 2*time.Second, "the workers' lease (short, so rescues happen within the run)")
	fl.IntVar(&c.MaxAttempts, "max-attempts", 4, "every job's attempt limit")
	fl.Float64Var(&c.SlowShare, "slow", 0.02, "share of jobs that work 1 to 2.5 leases (the rest a few ms)")
	fl.DurationVar(&c.DrainTimeout, "drain-timeout", 0, "how long the queue may take to drain after the faults (default max(60s, 10 leases))")
	fl.StringVar(&c.Broker, "broker", "", "start a private redis or postgres server and verify it instead of --db")
	fl.Uint64Var(&c.Seed, "seed", 0, "seed of the workload and the faults' choices (default random; the report shows it)")
	fl.StringVar(&c.HistoryDir, "history", "", "keep the history in this new or empty directory")
	fl.BoolVar(&c.Keep, "keep", false, "keep the run's failed jobs and its history")
	fl.IntVar(&c.MaxAnomalies, "max-anomalies", 20, "anomalies listed with their history lines (the rest are counted)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	cmd.AddCommand(newVerifyWorkerCmd())
	return cmd
}

// newVerifyWorkerCmd is the worker process verify starts: its settings
// come in the environment (verify.WorkerEnv), not in flags.
func newVerifyWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "A worker process of jobq verify (started by it)",
		Hidden: true,
		Args:   exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !verify.IsWorker() {
				return usagef("jobq verify worker is started by jobq verify, which sets %s; run jobq verify", verify.WorkerEnv)
			}
			return verify.WorkerMain(cmd.Context())
		},
	}
}

// check refuses flags out of range before anything starts, naming the
// flag; what depends on the backend is verify.Run's to refuse.
func (f *verifyFlags) check(cmd *cobra.Command) error {
	c := &f.cfg
	for _, v := range []struct {
		name string
		v    int
	}{{"jobs", c.Jobs}, {"procs", c.Procs}, {"concurrency", c.Concurrency}, {"max-attempts", c.MaxAttempts}, {"max-anomalies", c.MaxAnomalies}} {
		if v.v <= 0 {
			return usagef("--%s %d must be greater than zero", v.name, v.v)
		}
	}
	if err := f.checkWorkflows(cmd); err != nil {
		return err
	}
	if err := f.checkKeys(cmd); err != nil {
		return err
	}
	if fl := cmd.Flags(); fl.Changed("unique") {
		switch {
		case c.Unique < 2:
			return usagef("--unique %d: give how many jobs ask for each identity, 2 or more", c.Unique)
		case fl.Changed("workflows") || fl.Changed("keys"):
			return usagef("--unique with --workflows or --keys: the unique workload is lone jobs without keys, so give one of them")
		}
	}
	if err := f.checkDeadlines(cmd); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"duration", c.Duration}, {"kill-every", c.KillEvery}, {"pause-every", c.PauseEvery},
		{"proxy-cut-every", c.ProxyCutEvery}, {"restart-every", c.RestartEvery}, {"restart-down", c.RestartDown},
		{"skew", c.Skew}, {"lease", c.Lease}, {"replay-every", c.ReplayEvery},
	} {
		if err := positive(cmd, d.name, d.v); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"pause-for", c.PauseFor}, {"drain-timeout", c.DrainTimeout}, {"proxy-latency", c.ProxyLatency}} {
		if d.v < 0 {
			return usagef("--%s %s is negative", d.name, d.v)
		}
	}
	if c.SlowShare < 0 || c.SlowShare > 1 {
		return usagef("--slow %v: use a share from 0 to 1", c.SlowShare)
	}
	if c.SlowShare == 0 {
		c.SlowShare = -1 // none, not the default
	}
	if c.Broker != "" && cmd.Flags().Changed("db") {
		return usagef("--broker %s starts a private server to verify instead of --db: give one of them", c.Broker)
	}
	faults, err := verify.ParseFaults(f.faults)
	if err != nil {
		return usagef("--faults %q: %s", f.faults, trimVerify(err.Error()))
	}
	c.Faults = faults
	return nil
}

// checkWorkflows turns --workflows and --fan-out into the Config's: a
// workflow run's jobs are its tasks (so --jobs is refused with it), and
// its attempt limit defaults to the Config's for workflows unless
// --max-attempts is given.
func (f *verifyFlags) checkWorkflows(cmd *cobra.Command) error {
	c := &f.cfg
	fl := cmd.Flags()
	if !fl.Changed("workflows") {
		if fl.Changed("fan-out") {
			return usagef("--fan-out %d needs --workflows: it is the number of parts of each workflow", c.FanOut)
		}
		c.FanOut = 0
		return nil
	}
	if c.Workflows <= 0 {
		return usagef("--workflows %d must be greater than zero", c.Workflows)
	}
	if c.FanOut <= 0 {
		return usagef("--fan-out %d must be greater than zero", c.FanOut)
	}
	if fl.Changed("jobs") {
		return usagef("--jobs and --workflows are both given: a workflow run's jobs are its workflows' tasks (--workflows × (--fan-out + 1)), so give one of them")
	}
	c.Jobs = 0
	if !fl.Changed("max-attempts") {
		c.MaxAttempts = 0 // the workflow default, 10
	}
	return nil
}

// checkKeys refuses --per-key and --ordered without --keys, and --keys
// with --workflows, naming the flags; the rest is verify.Config's to
// refuse.
func (f *verifyFlags) checkKeys(cmd *cobra.Command) error {
	c := &f.cfg
	fl := cmd.Flags()
	if !fl.Changed("keys") {
		switch {
		case fl.Changed("per-key"):
			return usagef("--per-key needs --keys: it gives the limits of the queues the keys are spread over")
		case c.Ordered:
			return usagef("--ordered needs --keys: it adds an ordered queue to those the keys are spread over")
		}
		return nil
	}
	if c.Keys <= 0 {
		return usagef("--keys %d must be greater than zero", c.Keys)
	}
	if fl.Changed("workflows") {
		return usagef("--keys and --workflows are both given: the keyed workload is lone jobs, so give one of them")
	}
	if len(c.PerKey) == 0 && !c.Ordered {
		return usagef("--keys %d needs --per-key (e.g. 1,2), --ordered, or both: the rules of the queues its keys are on", c.Keys)
	}
	return nil
}

// checkDeadlines refuses --deadlines out of range or with a workload it
// does not go with, and --clock-tolerance without it, naming the flags.
func (f *verifyFlags) checkDeadlines(cmd *cobra.Command) error {
	c := &f.cfg
	fl := cmd.Flags()
	if !fl.Changed("deadlines") {
		if fl.Changed("clock-tolerance") {
			return usagef("--clock-tolerance needs --deadlines: it is the deadline checks' allowance for the store's clock")
		}
		return nil
	}
	switch {
	case c.Deadlines <= 0 || c.Deadlines > 1:
		return usagef("--deadlines %v: give the share of jobs with a deadline, above 0 and at most 1", c.Deadlines)
	case fl.Changed("workflows") || fl.Changed("keys") || fl.Changed("unique"):
		return usagef("--deadlines with --workflows, --keys or --unique: the deadline workload is lone jobs, so give one of them")
	case c.ClockTolerance < 0:
		return usagef("--clock-tolerance %s is negative", c.ClockTolerance)
	}
	return nil
}

// trimVerify drops the "verify: " its errors start with, where the flag
// already says where the mistake is.
func trimVerify(s string) string {
	if len(s) > 8 && s[:8] == "verify: " {
		return s[8:]
	}
	return s
}

// verifyFailed ends 'jobq verify' with exit code 1 once the report, with
// its anomalies, is printed.
type verifyFailed struct {
	anomalies int
	history   string
}

func (e verifyFailed) Error() string {
	return fmt.Sprintf("verify: %d anomalies found (the history is in %s)", e.anomalies, e.history)
}

func (a *app) runVerify(cmd *cobra.Command, f verifyFlags) error {
	cfg := f.cfg
	if cfg.Broker == "" {
		db, cleanup, err := a.verifyURL(cmd)
		if err != nil {
			return err
		}
		defer cleanup()
		cfg.DB = db
	}
	if !f.quiet {
		cfg.Progress = a.errOut
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("verify: find this executable to start workers with: %w", err)
	}
	cfg.WorkerCommand = []string{exe, "verify", "worker"}
	rep, err := verify.Run(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(a.out); err != nil {
		return err
	}
	if !rep.OK() {
		return verifyFailed{anomalies: rep.AnomalyCount(""), history: rep.HistoryDir}
	}
	return nil
}

// verifyURL is --db, except that with neither --db nor JOBQ_DB verify
// gets a temporary SQLite file rather than filling ./jobq.db with its
// jobs.
func (a *app) verifyURL(cmd *cobra.Command) (url string, cleanup func(), err error) {
	if cmd.Flags().Changed("db") || os.Getenv("JOBQ_DB") != "" {
		return a.db, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "jobq-verify-db-")
	if err != nil {
		return "", nil, fmt.Errorf("create temporary directory: %w", err)
	}
	fmt.Fprintf(a.errOut, "jobq verify: no --db given, using a temporary SQLite file in %s\n", dir)
	return "sqlite:" + filepath.Join(dir, "verify.db"), func() { os.RemoveAll(dir) }, nil
}
