package verify

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// Fault is one kind of fault Run injects while the workers run.
type Fault string

// The faults.
const (
	// FaultKill sends SIGKILL to a random worker process every KillEvery;
	// it is restarted at once.
	FaultKill Fault = "kill"
	// FaultPause stops a worker process (SIGSTOP) every PauseEvery for
	// PauseFor, longer than its lease, then lets it go on (SIGCONT): the
	// zombie's late outcomes must be refused as stale.
	FaultPause Fault = "pause"
	// FaultProxy puts a TCP proxy between the workers and the broker
	// (PostgreSQL or Redis) that, every ProxyCutEvery, cuts every
	// connection, blackholes them for longer than a lease (then delivers
	// what it held late, or cuts), or adds latency.
	FaultProxy Fault = "proxy"
	// FaultRestart kills the broker Run started itself (Config.Broker)
	// every RestartEvery and starts it again on the same data after
	// RestartDown.
	FaultRestart Fault = "restart"
	// FaultSkew sets the worker processes' clocks Skew ahead (even
	// slots) or behind (odd slots): their history's wall times and, on
	// SQLite, whose clock is the process's own, the backend's leases and
	// due times. On PostgreSQL and Redis the database's clock decides, so
	// skew changes nothing there, which is what it shows.
	FaultSkew Fault = "skew"
	// FaultReplay, with the workflow workload only, is an operator's: the
	// verifier lists the run's failed workflow tasks every ReplayEvery
	// and replays each (FailedReplay) as soon as it sees it, once per
	// job, while its siblings still run. The part planned to fail for
	// good succeeds after its replay, so its workflow must then succeed.
	FaultReplay Fault = "replay"
)

// AllFaults lists every fault, in the order reports show them.
var AllFaults = []Fault{FaultKill, FaultPause, FaultProxy, FaultRestart, FaultSkew, FaultReplay}

// ParseFaults reads a comma-separated list of faults: "none" (or "") for
// a clean run (an empty, non-nil list), "auto" for the defaults of the
// backend (nil), or names from AllFaults.
func ParseFaults(s string) ([]Fault, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "auto":
		return nil, nil
	case "", "none":
		return []Fault{}, nil
	}
	out := []Fault{}
	seen := map[Fault]bool{}
	for _, part := range strings.Split(s, ",") {
		f := Fault(strings.TrimSpace(part))
		known := false
		for _, k := range AllFaults {
			known = known || f == k
		}
		if !known {
			return nil, &configError{msg: fmt.Sprintf("unknown fault %q: use none, auto, or a comma-separated list of %s", part, faultList(AllFaults))}
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

func faultList(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// Config is one verification run. The zero value, with DB and
// WorkerCommand set, is a short run with the backend's default faults.
type Config struct {
	// DB is the backend to verify: sqlite:PATH, postgres://…, redis://…
	// or memory:. Verify works on a queue of its own ("verify-" and the
	// run's ID) and leaves other queues alone. Required unless Broker is
	// set.
	DB string
	// Broker, "redis" or "postgres", starts a private server of that kind
	// on a free port in a temporary directory (Redis with appendonly yes
	// and appendfsync always; PostgreSQL from initdb, run as the postgres
	// user when verify runs as root) and verifies it; the restart fault
	// needs it. DB must then be empty.
	Broker string

	// Jobs is how many jobs to enqueue. Defaults to 2000; with
	// Workflows it is Workflows × (FanOut + 1) and must be left 0.
	Jobs int
	// Workflows, when set, makes the workload workflows instead of lone
	// jobs: each is FanOut parts (default 10) and a join that waits for
	// all of them, every task a verification job. The checks then also
	// show that a join ran only after all its parts succeeded, that
	// exactly one join completed per workflow that succeeded, and that no
	// workflow was left running. A share of the workflows (2 %) has a
	// part failing for good: they must end failed with their join never
	// run.
	Workflows int
	FanOut    int
	// Keys, when set, makes the workload keyed: every job carries one of
	// Keys keys (jobq.Key), "k0", "k1", …, each key on one of the run's
	// keyed queues: one per limit of PerKey, whose rules are
	// KeyRules{Limit: N}, and with Ordered one more whose rules are
	// KeyRules{Ordered: true} (the default hold policy). Keys go to the
	// queues in turn, and jobs to keys as the seed draws them. The checks
	// then also show that no more than a queue's limit of one key's
	// attempts ran at once, that each ordered key's jobs ran one at a time
	// and completed in insertion order, and that no key was left held
	// without its failed head. The backend must keep keys
	// (backend.KeyController); one that does not is ErrNotSupported.
	Keys   int
	PerKey []int
	// Unique, when 2 or more, makes every job a request for an identity
	// that Unique jobs of the run ask for, a few batches apart (see
	// uniqueWindow), so the later requests of an identity come while its
	// job waits, runs, or has already ended. A
	// request while the job lives answers its ID as a duplicate; one after
	// it ended makes a new job of the identity. The checks then also show
	// that no two jobs of one identity were ever live at once. Not with
	// Workflows or Keys.
	Unique int
	// Deadlines, from 0 to 1, is the share of jobs enqueued with a
	// deadline (jobq.Deadline), set when the job's batch is first sent: a
	// third of them 50ms to a quarter lease ahead (the workers' poll and a
	// busy queue make many of these expire), a third a quarter lease to
	// two leases ahead (a kill, pause or cut of their holder makes some
	// expire) and a third 10 to 30 leases ahead. The checks then also show
	// that no job was claimed after its deadline, by the store's clock or
	// by the claiming worker's (within ClockTolerance), and that every job
	// that expired into the failed jobs did so after its deadline, with
	// backend.DeadlineError, and was never claimed once expired nor ended
	// by an attempt. A backend without deadlines is refused before
	// anything is enqueued. Not with Workflows, Keys or Unique, nor with
	// the skew fault on SQLite (each worker's clock would be the store's).
	Deadlines float64
	// ClockTolerance is how far behind the workers' clock the store's may
	// be: the deadline checks that compare a worker's reading (when its
	// claim call began) with the store's (a deadline, an expiry) allow
	// it. Defaults to 50ms: on SQLite the clock is the worker's own, and a
	// PostgreSQL or Redis server on the same machine reads the same clock;
	// raise it for a server elsewhere.
	ClockTolerance time.Duration
	// Ordered adds the ordered queue. The verifier then acts as the
	// operator of its held keys: every ReplayEvery it lists them and
	// replays each one's failed head that has jobs waiting behind it, so
	// that a job planned to fail for good succeeds after its replay, in
	// its place, and the key goes on.
	Ordered bool
	// Procs is how many worker processes run at once (on memory:,
	// in-process workers). Defaults to 3.
	Procs int
	// Concurrency is each worker's jobq.WorkerConfig.Concurrency.
	// Defaults to 10.
	Concurrency int
	// Duration is how long the faults go on; jobs are enqueued over the
	// first 80 % of it. Defaults to 15s.
	Duration time.Duration
	// DrainTimeout bounds the wait, after the faults stop, for every job
	// to be done or failed. Defaults to max(60s, 10 leases).
	DrainTimeout time.Duration

	// Faults to inject. nil: the backend's defaults (kill and pause; and
	// proxy on PostgreSQL and Redis; and restart with Broker; and replay
	// with Workflows, memory: included). Empty (non-nil): none, a clean
	// run.
	Faults []Fault
	// KillEvery defaults to 500ms.
	KillEvery time.Duration
	// PauseEvery defaults to 5s; PauseFor to 2.5 leases. One worker is
	// paused at a time.
	PauseEvery time.Duration
	PauseFor   time.Duration
	// ProxyCutEvery defaults to 5s. ProxyLatency is added to every chunk
	// the proxy forwards, all along (default none); its latency fault
	// adds a quarter lease for two leases.
	ProxyCutEvery time.Duration
	ProxyLatency  time.Duration
	// RestartEvery defaults to 10s; RestartDown, how long the broker
	// stays down, to 1s.
	RestartEvery time.Duration
	RestartDown  time.Duration
	// Skew is the skew fault's clock offset. Defaults to 10m.
	Skew time.Duration
	// ReplayEvery is how often the replay fault looks for failed
	// workflow tasks to replay, and with Ordered how often the verifier
	// looks for held keys. Defaults to 100ms.
	ReplayEvery time.Duration

	// Lease is the workers' lease, short so that rescues happen within
	// the run; they heartbeat every third of it and sweep every quarter.
	// Defaults to 2s.
	Lease time.Duration
	// MaxAttempts is every job's attempt limit. Defaults to 4, and to 10
	// with Workflows: a task whose attempts the kills spend fails its
	// whole workflow.
	MaxAttempts int
	// SlowShare is the share of jobs that work one to two and a half
	// leases (the rest work a few milliseconds). Defaults to 0.02; a
	// negative value means none.
	SlowShare float64
	// Seed makes the workload's plan (durations, failures) and the
	// faults' choices repeatable. 0 picks one, which the report shows.
	Seed uint64

	// WorkerCommand starts a worker process: the program and its
	// arguments, a program that calls WorkerMain (see IsWorker); Run adds
	// WorkerEnv to its environment. Required unless DB is memory:.
	WorkerCommand []string
	// HistoryDir keeps the history there (it must not exist, or be
	// empty). Default: a temporary directory, removed after a run that
	// found nothing (kept, and named in the report, after one that did).
	HistoryDir string
	// Keep leaves the run's failed jobs in the backend and its history on
	// disk; by default the failed jobs are purged once checked.
	Keep bool
	// Progress receives a line every ProgressEvery (default 2s) while
	// the run goes on: enqueued, done, failed, in flight, faults. nil:
	// none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// MaxAnomalies caps the anomalies the report lists with their
	// history lines (the rest are counted). Defaults to 20.
	MaxAnomalies int
}

// configError is a Config (or a command line) that cannot run: it says
// what to change, and wraps jobq.ErrInvalidInput.
type configError struct{ msg string }

func (e *configError) Error() string { return "verify: " + e.msg }
func (e *configError) Unwrap() error { return jobq.ErrInvalidInput }

// withDefaults fills the zero fields and refuses what cannot run, with an
// error wrapping jobq.ErrInvalidInput that says what to change.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, &configError{msg: fmt.Sprintf(format, args...)}
	}
	switch c.Broker {
	case "", "redis", "postgres":
	default:
		return bad("broker %q: use redis or postgres (a private server verify starts), or leave it empty to verify the backend DB names", c.Broker)
	}
	if c.Broker != "" && c.DB != "" {
		return bad("both a broker (%s) and a backend URL are set: a private broker is verified instead of DB, so give one of them", c.Broker)
	}
	if c.Broker == "" && c.DB == "" {
		return bad("no backend URL: set DB (sqlite:PATH, postgres://…, redis://…, memory:) or a private Broker")
	}
	scheme := c.Broker
	if scheme == "" {
		scheme = schemeOf(c.DB)
	}
	switch scheme {
	case "sqlite", "postgres", "redis", "memory":
	case "sync":
		return bad("the sync backend runs each job inside Enqueue and has no workers; verify sqlite:, postgres://, redis:// or memory:")
	default:
		return bad("backend URL scheme %q: verify sqlite:PATH, postgres://…, redis://… or memory:", scheme)
	}
	if c.Workflows < 0 || c.FanOut < 0 {
		return bad("Workflows %d and FanOut %d must not be negative", c.Workflows, c.FanOut)
	}
	if c.Workflows > 0 {
		if c.Jobs != 0 {
			return bad("both Jobs (%d) and Workflows (%d) are set: a workflow run's jobs are its workflows' tasks, so give one of them", c.Jobs, c.Workflows)
		}
		if c.FanOut == 0 {
			c.FanOut = 10
		}
		if c.FanOut+1 > backend.MaxWorkflowTasks {
			return bad("FanOut %d: a workflow holds at most %d tasks, the join included", c.FanOut, backend.MaxWorkflowTasks)
		}
		if c.Workflows > 1_000_000 {
			return bad("Workflows %d: use at most 1000000", c.Workflows)
		}
		c.Jobs = c.Workflows * (c.FanOut + 1)
		if c.MaxAttempts == 0 {
			c.MaxAttempts = 10
		}
	} else if c.FanOut != 0 {
		return bad("FanOut %d without Workflows: set Workflows too", c.FanOut)
	}
	if err := c.checkKeys(); err != nil {
		return c, err
	}
	if err := c.checkUnique(); err != nil {
		return c, err
	}
	if err := c.checkDeadlines(scheme); err != nil {
		return c, err
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"Jobs", &c.Jobs, 2000}, {"Procs", &c.Procs, 3}, {"Concurrency", &c.Concurrency, 10},
		{"MaxAttempts", &c.MaxAttempts, 4}, {"MaxAnomalies", &c.MaxAnomalies, 20},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return bad("%s %d is negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.Concurrency > 10000 {
		return bad("Concurrency %d is over a worker's limit of 10000", c.Concurrency)
	}
	if c.Procs > 256 {
		return bad("Procs %d: use at most 256 worker processes", c.Procs)
	}
	if c.MaxAttempts > 1000 {
		return bad("MaxAttempts %d is over jobq's limit of 1000", c.MaxAttempts)
	}
	if c.Lease == 0 {
		c.Lease = 2 * time.Second
	}
	if c.Lease < 100*time.Millisecond {
		return bad("Lease %s is too short to heartbeat: use at least 100ms", c.Lease)
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Duration", &c.Duration, 15 * time.Second},
		{"DrainTimeout", &c.DrainTimeout, max(time.Minute, 10*c.Lease)},
		{"KillEvery", &c.KillEvery, 500 * time.Millisecond},
		{"PauseEvery", &c.PauseEvery, 5 * time.Second},
		{"PauseFor", &c.PauseFor, c.Lease * 5 / 2},
		{"ProxyCutEvery", &c.ProxyCutEvery, 5 * time.Second},
		{"RestartEvery", &c.RestartEvery, 10 * time.Second},
		{"RestartDown", &c.RestartDown, time.Second},
		{"Skew", &c.Skew, 10 * time.Minute},
		{"ReplayEvery", &c.ReplayEvery, 100 * time.Millisecond},
		{"ProgressEvery", &c.ProgressEvery, 2 * time.Second},
		{"ProxyLatency", &c.ProxyLatency, 0},
		{"ClockTolerance", &c.ClockTolerance, 50 * time.Millisecond},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return bad("%s %s is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.PauseFor <= c.Lease {
		return bad("PauseFor %s must be longer than the lease %s, or the paused worker keeps its jobs and nothing is tested", c.PauseFor, c.Lease)
	}
	if c.SlowShare > 1 {
		return bad("SlowShare %v is over 1: it is the share of slow jobs", c.SlowShare)
	}
	if c.SlowShare == 0 {
		c.SlowShare = 0.02
	}
	if c.SlowShare < 0 {
		c.SlowShare = 0
	}
	if c.Faults == nil {
		c.Faults = defaultFaults(scheme, c.Broker != "", c.Workflows > 0)
	}
	for _, f := range c.Faults {
		if err := faultApplies(f, scheme, c); err != nil {
			return c, err
		}
	}
	if scheme != "memory" {
		if !multiProcess {
			return bad("worker processes need a unix system; only memory: runs here")
		}
		if len(c.WorkerCommand) == 0 {
			return bad("no WorkerCommand: name the program that runs verify.WorkerMain in its worker processes (jobq verify uses its own executable)")
		}
	}
	return c, nil
}

// checkUnique refuses a unique workload that cannot run, saying what to
// change.
func (c Config) checkUnique() error {
	bad := func(format string, args ...any) error {
		return &configError{msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Unique == 0:
		return nil
	case c.Unique < 2:
		return bad("Unique %d: give how many jobs ask for each identity, 2 or more", c.Unique)
	case c.Unique > 1000:
		return bad("Unique %d: use at most 1000 jobs per identity", c.Unique)
	case c.Workflows > 0 || c.Keys > 0:
		return bad("Unique with Workflows or Keys: the unique workload is lone jobs without keys, so give one of them")
	}
	return nil
}

// checkDeadlines refuses a deadline workload that cannot run, saying
// what to change. The fault list is not filled in yet: a skew fault is
// only ever asked for.
func (c Config) checkDeadlines(scheme string) error {
	bad := func(format string, args ...any) error {
		return &configError{msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Deadlines < 0 || c.Deadlines > 1:
		return bad("Deadlines %v: give the share of jobs with a deadline, from 0 to 1", c.Deadlines)
	case c.Deadlines == 0:
		return nil
	case c.Workflows > 0 || c.Keys > 0 || c.Unique > 0:
		return bad("Deadlines with Workflows, Keys or Unique: the deadline workload is lone jobs without keys or shared identities (a workflow task or a keyed job takes no deadline), so give one of them")
	case scheme == "sqlite" && c.has(FaultSkew):
		return bad("Deadlines with the skew fault on SQLite: each worker's clock is the store's there, so a deadline would mean another moment to each; skew PostgreSQL or Redis workers, whose server's clock decides")
	}
	return nil
}

// uniqueWindow is how many identities the unique workload asks for side
// by side: job seq asks for one of the uniqueWindow identities of its
// window of uniqueWindow × Unique jobs, so an identity's requests come
// uniqueWindow jobs apart, a few batches, while its job may still wait or
// run; and the last ones come after it may have ended.
const uniqueWindow = 50

// identityOf is the identity job seq of the unique workload asks for.
func (c Config) identityOf(seq int64) int64 {
	span := int64(uniqueWindow * c.Unique)
	return seq/span*uniqueWindow + seq%uniqueWindow
}

// maxKeys bounds Config.Keys: a key names a tenant of the workload, and
// the checks hold each key's attempts in memory.
const maxKeys = 1_000_000

// checkKeys refuses a keyed workload that cannot run, saying what to
// change.
func (c Config) checkKeys() error {
	bad := func(format string, args ...any) error {
		return &configError{msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Keys < 0:
		return bad("Keys %d is negative", c.Keys)
	case c.Keys == 0 && len(c.PerKey) > 0:
		return bad("PerKey %v without Keys: set Keys (--keys N), the number of keys the jobs are spread over", c.PerKey)
	case c.Keys == 0 && c.Ordered:
		return bad("Ordered without Keys: set Keys (--keys N), the number of keys the jobs are spread over")
	case c.Keys == 0:
		return nil
	case c.Workflows > 0:
		return bad("both Keys (%d) and Workflows (%d) are set: the keyed workload is lone jobs, so give one of them", c.Keys, c.Workflows)
	case c.Keys > maxKeys:
		return bad("Keys %d: use at most %d", c.Keys, maxKeys)
	case len(c.PerKey) == 0 && !c.Ordered:
		return bad("Keys %d without PerKey or Ordered: give the limits of the keyed queues (PerKey, --per-key 1,2), Ordered (--ordered), or both", c.Keys)
	}
	seen := map[int]bool{}
	for _, n := range c.PerKey {
		if n < 1 || n > backend.MaxKeyLimit {
			return bad("PerKey %d: a key limit is from 1 to %d", n, backend.MaxKeyLimit)
		}
		if seen[n] {
			return bad("PerKey %v names the limit %d twice: each limit is one queue", c.PerKey, n)
		}
		seen[n] = true
	}
	if n := len(c.PerKey) + boolInt(c.Ordered); c.Keys < n {
		return bad("Keys %d is fewer than the %d keyed queues: give each queue a key at least", c.Keys, n)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keyQueue is one queue of the keyed workload and its key rules.
type keyQueue struct {
	name  string
	rules backend.KeyRules
}

// keyQueues are the keyed workload's queues, named after the run's queue
// base: one per limit of PerKey, in its order, then the ordered one.
func (c Config) keyQueues(base string) []keyQueue {
	var qs []keyQueue
	for _, n := range c.PerKey {
		qs = append(qs, keyQueue{name: fmt.Sprintf("%s-limit%d", base, n), rules: backend.KeyRules{Limit: n}})
	}
	if c.Ordered {
		qs = append(qs, keyQueue{name: base + "-ordered", rules: backend.KeyRules{Ordered: true}})
	}
	return qs
}

// defaultFaults are the faults of a run that names none.
func defaultFaults(scheme string, broker, workflows bool) []Fault {
	var fs []Fault
	switch scheme {
	case "memory":
		fs = []Fault{}
	case "sqlite":
		fs = []Fault{FaultKill, FaultPause}
	default:
		fs = []Fault{FaultKill, FaultPause, FaultProxy}
		if broker {
			fs = append(fs, FaultRestart)
		}
	}
	if workflows {
		fs = append(fs, FaultReplay)
	}
	return fs
}

// faultApplies refuses a fault the backend cannot have, saying why.
func faultApplies(f Fault, scheme string, c Config) error {
	bad := func(why string) error {
		return &configError{msg: fmt.Sprintf("fault %s %s", f, why)}
	}
	if f == FaultReplay {
		// The verifier replays, through its own backend: no worker
		// process is touched, so memory: takes it too.
		if c.Workflows == 0 {
			return bad("needs the workflow workload: it replays failed workflow tasks while their siblings run; set Workflows (--workflows N)")
		}
		return nil
	}
	if scheme == "memory" {
		return bad("needs worker processes, and memory: runs every worker inside this process on one clock; verify memory: with no faults, or a durable backend (sqlite:PATH, postgres://…, redis://…) with them")
	}
	switch f {
	case FaultProxy:
		if scheme == "sqlite" {
			return bad("does not apply to sqlite: the workers open the database file themselves, so there is no connection to cut; use it with postgres:// or redis://")
		}
		if c.Broker == "" {
			if _, err := proxyTarget(c.DB); err != nil {
				return bad(err.Error())
			}
		}
	case FaultRestart:
		if c.Broker == "" {
			return bad("needs a broker that verify started itself, which it may kill: set Broker (--broker redis or --broker postgres) instead of a backend URL")
		}
	}
	return nil
}

// proxyTarget is the host:port of a server URL that the proxy stands in
// for; an error says why the URL cannot be proxied.
func proxyTarget(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("cannot rewrite the backend URL: it does not parse")
	}
	q := u.Query()
	switch schemeOf(raw) {
	case "postgres":
		if q.Has("host") || q.Has("port") || q.Has("hostaddr") || strings.Contains(u.Host, ",") {
			return "", fmt.Errorf("needs a postgres:// URL with one host:port in its authority (not host= or port= parameters, nor several hosts)")
		}
		if u.Host == "" || strings.HasPrefix(u.Hostname(), "/") {
			return "", fmt.Errorf("needs a TCP host in the postgres:// URL, not a Unix socket")
		}
		return hostPort(u, "5432"), nil
	case "redis":
		if q.Get("cluster") == "true" || q.Has("addr") {
			return "", fmt.Errorf("does not apply to a Redis Cluster: its nodes redirect clients to their own addresses, around the proxy")
		}
		if u.Scheme == "rediss" {
			return "", fmt.Errorf("does not apply to rediss:// (TLS): the server's certificate would not match the proxy's address")
		}
		return hostPort(u, "6379"), nil
	}
	return "", fmt.Errorf("needs a postgres:// or redis:// backend")
}

func hostPort(u *url.URL, defPort string) string {
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = defPort
	}
	return net.JoinHostPort(host, port)
}

// proxiedURL is raw with its host:port replaced by addr.
func proxiedURL(raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // proxyTarget refused it already
	}
	u.Host = addr
	return u.String()
}

// has reports whether the run injects fault f.
func (c Config) has(f Fault) bool {
	for _, x := range c.Faults {
		if x == f {
			return true
		}
	}
	return false
}
