package jobq

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jobq/jobq/backend"
)

// WorkerConfig configures a Worker. Zero fields take the documented
// defaults; a negative or inconsistent value is an error from NewWorker.
type WorkerConfig struct {
	// Queues to work, in no particular order (priority then age decide
	// within and across them). Defaults to [DefaultQueue].
	Queues []string
	// Concurrency is how many jobs run at once, 1..MaxConcurrency.
	// Defaults to DefaultConcurrency.
	Concurrency int
	// ClaimBatch is the most jobs claimed in one backend call. Defaults to
	// Concurrency, at most MaxDefaultClaimBatch; more than Concurrency is
	// refused.
	ClaimBatch int
	// JobTimeout bounds one attempt unless its type sets
	// HandlerOptions.Timeout. Defaults to DefaultJobTimeout.
	JobTimeout time.Duration
	// Retry is the backoff for failed attempts unless the type overrides it.
	// Defaults to DefaultRetryBase, DefaultRetryMax and DefaultRetryJitter.
	Retry RetryPolicy
	// Lease is how long a claimed job is held without a heartbeat before
	// other workers may rescue it. Defaults to DefaultLease.
	Lease time.Duration
	// HeartbeatInterval is how often held leases are extended. Defaults to
	// Lease/3; must be shorter than Lease.
	HeartbeatInterval time.Duration
	// SweepInterval is how often this worker looks for expired leases.
	// Defaults to DefaultSweepInterval.
	SweepInterval time.Duration
	// PollInterval is how often an idle worker looks for due jobs when no
	// notification wakes it (scheduled jobs, retries, other processes'
	// enqueues on SQLite): each wait is drawn between half of it and all
	// of it, so that workers polling one store take turns rather than one
	// always polling just before another. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// ClaimCooldown is the longest a worker with a known backlog waits for
	// half a batch of free slots before claiming fewer, and how long it
	// waits after a claim that found several jobs but not a full batch, so
	// the next claim carries more. Defaults to DefaultClaimCooldown;
	// negative disables it.
	ClaimCooldown time.Duration
	// WorkflowRetention is how long workflows that ended are kept, with
	// their tasks and results, before the prune loop (see Retention: one
	// worker at a time, every PruneInterval) deletes them: long enough to
	// inspect a finished run, short enough that the workflow tables do
	// not grow forever. A failed workflow is kept while a failed task of
	// it may still be replayed (its failed job is in the failed jobs),
	// then pruned as the others, its age counted from when it ended;
	// running ones never are. Defaults to DefaultWorkflowRetention;
	// negative keeps them forever. Only backends that run workflows
	// (backend.Workflower) have any.
	WorkflowRetention time.Duration
	// ShutdownTimeout is how long in-flight jobs may run on after Run's
	// context is cancelled before their contexts are cancelled and they are
	// released back to pending. Defaults to DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// CancelPollInterval is how often a worker holding jobs asks the
	// backend which of them were cancelled, so a cancel reaches the
	// handler's context (cause ErrJobCancelled) within about this long on
	// any machine. Defaults to DefaultCancelPollInterval; negative
	// disables the poll, and cancels then reach handlers at the next
	// heartbeat. Only backends implementing backend.Canceller are polled.
	CancelPollInterval time.Duration
	// NoHandlerAlertAfter is how long a job of a type this worker has no
	// handler for may have existed (since it was enqueued) before the
	// worker, giving it back once more, logs at error level that no
	// worker seems able to run its type. Such jobs are never run nor
	// failed here: each is given back untouched, its attempt not counted,
	// for a worker that has the handler (see docs/operating.md, "Job
	// types no worker runs"). Defaults to DefaultNoHandlerAlertAfter.
	NoHandlerAlertAfter time.Duration
	// Retention keeps finished jobs and bounds failed ones; see
	// Retention. The zero value deletes completed jobs at once.
	Retention Retention
	// MaxResultBytes caps the result a handler may record with SetResult
	// (its JSON, in bytes): a larger one is refused with an error
	// wrapping ErrInvalidInput. At most MaxResultBytes, the limit every
	// backend accepts. Defaults to DefaultResultBytes (64 KiB). A plain
	// job's result is kept only with its completed job (Retention.Completed).
	MaxResultBytes int
	// Name identifies this worker in the record of each failed attempt
	// (Job errors, `jobq failed show`), so a person can tell which
	// machine or process ran it: set it where host and pid say little
	// (containers that all run as pid 1). At most backend.MaxWorkerBytes
	// bytes of valid UTF-8 without NUL. Defaults to "<hostname>:<pid>".
	Name string
	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Hooks observe the worker's jobs (metrics, tracing, tests), called in
	// order; see WorkerHooks.
	Hooks []WorkerHooks
	// Schedules are periodic jobs this worker enqueues (see Schedule and
	// docs/handlers.md, "Periodic jobs"). Run every worker process with the
	// same list: each tick is enqueued once across all of them. Without
	// schedules no scheduler runs. The sync backend has none (and no
	// workers).
	Schedules []Schedule
}

// The values WorkerConfig's zero fields take, exported so that programs
// and the command line built on the library state them once, here.
const (
	// DefaultQueue is the queue of a job enqueued without Queue, and the
	// one a worker without WorkerConfig.Queues serves.
	DefaultQueue = "default"
	// DefaultConcurrency is WorkerConfig.Concurrency's default.
	DefaultConcurrency = 10
	// MaxConcurrency is the most WorkerConfig.Concurrency may be: past
	// it, a value is far more likely a typo than a plan (run more
	// processes instead).
	MaxConcurrency = 10000
	// MaxDefaultClaimBatch bounds WorkerConfig.ClaimBatch's default
	// (Concurrency), so a worker with thousands of slots does not claim
	// thousands of jobs in one backend call unless asked to.
	MaxDefaultClaimBatch = 100
	// DefaultJobTimeout is WorkerConfig.JobTimeout's default: one attempt
	// of a type without HandlerOptions.Timeout may run this long.
	DefaultJobTimeout = 5 * time.Minute
	// DefaultLease is WorkerConfig.Lease's default: a dead worker's jobs
	// return to pending about this long (plus a sweep) after it died; a
	// live one heartbeats every Lease/3, so one late heartbeat loses
	// nothing.
	DefaultLease = 30 * time.Second
	// DefaultSweepInterval is WorkerConfig.SweepInterval's default.
	DefaultSweepInterval = 5 * time.Second
	// DefaultPollInterval is WorkerConfig.PollInterval's default: how late
	// an idle worker may notice a job no notification announced.
	DefaultPollInterval = time.Second
	// DefaultClaimCooldown is WorkerConfig.ClaimCooldown's default.
	DefaultClaimCooldown = 2 * time.Millisecond
	// DefaultWorkflowRetention is WorkerConfig.WorkflowRetention's
	// default, 7 days.
	DefaultWorkflowRetention = defaultWorkflowRetention
	// DefaultShutdownTimeout is WorkerConfig.ShutdownTimeout's default:
	// well within Kubernetes' default 30 s between SIGTERM and SIGKILL,
	// with room left for the final writes.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultNoHandlerAlertAfter is WorkerConfig.NoHandlerAlertAfter's
	// default: longer than a rolling deploy takes.
	DefaultNoHandlerAlertAfter = 10 * time.Minute
	// DefaultCancelPollInterval is WorkerConfig.CancelPollInterval's
	// default: how long a cancel may take to reach a running handler.
	DefaultCancelPollInterval = 250 * time.Millisecond
	// DefaultResultBytes is WorkerConfig.MaxResultBytes's default, 64
	// KiB: results are for IDs, counts and references, not outputs.
	DefaultResultBytes = backend.DefaultResultBytes
	// MaxResultBytes is the most WorkerConfig.MaxResultBytes may be, 1
	// MiB: the hard limit every backend accepts in one completion.
	MaxResultBytes = backend.MaxResultBytes
)

// withDefaults checks c and fills its zero fields with the defaults above.
func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	bad := func(format string, args ...any) (WorkerConfig, error) {
		return c, fmt.Errorf("%w: WorkerConfig."+format, append([]any{ErrInvalidInput}, args...)...)
	}
	if len(c.Queues) == 0 {
		c.Queues = []string{DefaultQueue}
	}
	for _, q := range c.Queues {
		if err := backend.ValidateQueue(q); err != nil {
			return c, fmt.Errorf("WorkerConfig.Queues: %w", err)
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"JobTimeout", &c.JobTimeout, DefaultJobTimeout},
		{"Lease", &c.Lease, DefaultLease},
		{"SweepInterval", &c.SweepInterval, DefaultSweepInterval},
		{"PollInterval", &c.PollInterval, DefaultPollInterval},
		{"ShutdownTimeout", &c.ShutdownTimeout, DefaultShutdownTimeout},
		{"NoHandlerAlertAfter", &c.NoHandlerAlertAfter, DefaultNoHandlerAlertAfter},
		{"HeartbeatInterval", &c.HeartbeatInterval, 0},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return bad("%s %s is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.HeartbeatInterval >= c.Lease {
		return bad("HeartbeatInterval %s must be shorter than Lease %s", c.HeartbeatInterval, c.Lease)
	}
	if c.ClaimCooldown == 0 {
		c.ClaimCooldown = DefaultClaimCooldown
	}
	if c.WorkflowRetention == 0 {
		c.WorkflowRetention = DefaultWorkflowRetention
	}
	if c.CancelPollInterval == 0 {
		c.CancelPollInterval = DefaultCancelPollInterval
	}
	if c.MaxResultBytes < 0 || c.MaxResultBytes > MaxResultBytes {
		return bad("MaxResultBytes %d is outside 1..%d (MaxResultBytes), or 0 for the default", c.MaxResultBytes, MaxResultBytes)
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultResultBytes
	}
	var err error
	if c.Retention, err = c.Retention.withDefaults(); err != nil {
		return c, err
	}
	if c.Concurrency < 0 || c.Concurrency > MaxConcurrency {
		return bad("Concurrency %d is outside 1..%d", c.Concurrency, MaxConcurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.ClaimBatch < 0 || c.ClaimBatch > c.Concurrency {
		return bad("ClaimBatch %d is outside 1..Concurrency (%d), or 0 for the default: a worker cannot hold more jobs than it runs at once", c.ClaimBatch, c.Concurrency)
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = min(c.Concurrency, MaxDefaultClaimBatch)
	}
	if err := c.Retry.validate("WorkerConfig.Retry"); err != nil {
		return c, err
	}
	c.Retry = c.Retry.withDefaults(defaultRetryPolicy)
	if err := c.Retry.validate("WorkerConfig.Retry (with defaults)"); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Name == "" {
		c.Name = defaultWorkerName()
	}
	if len(c.Name) > backend.MaxWorkerBytes || backend.WorkerText(c.Name) != c.Name {
		return bad("Name %q is over %d bytes or not valid UTF-8 without NUL", c.Name, backend.MaxWorkerBytes)
	}
	return c, nil
}

// defaultWorkerName is WorkerConfig.Name's default: the host and the
// process, what tells two workers apart on most deployments.
func defaultWorkerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return backend.WorkerText(fmt.Sprintf("%s:%d", host, os.Getpid()))
}
