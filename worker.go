package jobq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/runner"
)

// WorkerConfig configures a Worker. Zero fields take the documented
// defaults; a negative or inconsistent value is an error from NewWorker.
type WorkerConfig struct {
	// Queues to work, in no particular order (priority then age decide
	// within and across them). Defaults to ["default"].
	Queues []string
	// Concurrency is how many jobs run at once. Defaults to 10.
	Concurrency int
	// ClaimBatch is the most jobs claimed in one backend call. Defaults to
	// Concurrency, at most 100; more than Concurrency is refused.
	ClaimBatch int
	// JobTimeout bounds one attempt unless its type sets
	// HandlerOptions.Timeout. Defaults to 5m.
	JobTimeout time.Duration
	// Retry is the backoff for failed attempts unless the type overrides it.
	// Defaults to base 10s, cap 1h, jitter 0.2.
	Retry RetryPolicy
	// Lease is how long a claimed job is held without a heartbeat before
	// other workers may rescue it. Defaults to 30s.
	Lease time.Duration
	// HeartbeatInterval is how often held leases are extended. Defaults to
	// Lease/3; must be shorter than Lease.
	HeartbeatInterval time.Duration
	// SweepInterval is how often this worker looks for expired leases.
	// Defaults to 5s.
	SweepInterval time.Duration
	// PollInterval is how often an idle worker looks for due jobs when no
	// notification wakes it (scheduled jobs, retries, other processes'
	// enqueues on SQLite). Defaults to 1s.
	PollInterval time.Duration
	// ClaimCooldown is the longest a worker with a known backlog waits for
	// half a batch of free slots before claiming fewer, and how long it
	// waits after a claim that found several jobs but not a full batch, so
	// the next claim carries more. Defaults to 2ms; negative disables it.
	ClaimCooldown time.Duration
	// WorkflowRetention is how long workflows that ended are kept, with
	// their tasks and results, before the prune loop (see Retention: one
	// worker at a time, every PruneInterval) deletes them: long enough to
	// inspect a finished run, short enough that the workflow tables do
	// not grow forever. A failed workflow is kept while a failed task of
	// it may still be replayed (its failed job is in the failed jobs),
	// then pruned as the others, its age counted from when it ended;
	// running ones never are. Defaults to 7 days; negative keeps them
	// forever. Only backends that run workflows (backend.Workflower) have
	// any.
	WorkflowRetention time.Duration
	// ShutdownTimeout is how long in-flight jobs may run on after Run's
	// context is cancelled before their contexts are cancelled and they are
	// released back to pending. Defaults to 10s.
	ShutdownTimeout time.Duration
	// CancelPollInterval is how often a worker holding jobs asks the
	// backend which of them were cancelled, so a cancel reaches the
	// handler's context (cause ErrJobCancelled) within about this long on
	// any machine. Defaults to 250ms; negative disables the poll, and
	// cancels then reach handlers at the next heartbeat. Only backends
	// implementing backend.Canceller are polled.
	CancelPollInterval time.Duration
	// Retention keeps finished jobs and bounds failed ones; see
	// Retention. The zero value deletes completed jobs at once.
	Retention Retention
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

// EventKind is what became of one attempt.
type EventKind int

// The kinds of Event.
const (
	EventDone     EventKind = iota + 1 // succeeded; the job is deleted
	EventRetry                         // failed; scheduled again after RetryDelay
	EventFailed                        // failed for good; moved to failed_jobs
	EventReleased                      // interrupted by shutdown; given back (see backend.Backend.JobRelease)
	// EventAbandoned: the handler returned after the worker stopped, so
	// its result was dropped: the job was released or its lease expires
	// and the sweep returns it.
	EventAbandoned
	// EventCancelled: the job was cancelled while its handler ran; its
	// context was cancelled with ErrJobCancelled and the job ended
	// cancelled, whatever the handler returned.
	EventCancelled
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventDone:
		return "done"
	case EventRetry:
		return "retry"
	case EventFailed:
		return "failed"
	case EventReleased:
		return "released"
	case EventAbandoned:
		return "abandoned"
	case EventCancelled:
		return "cancelled"
	}
	return "unknown"
}

// Event describes one finished attempt (see WorkerHooks.Finished).
type Event struct {
	Kind       EventKind
	Job        *Job
	Err        error         // the handler's error; nil for EventDone
	RetryDelay time.Duration // EventRetry only
	Duration   time.Duration // how long the handler ran
}

// minFlushTime is the least time the last outcomes and releases get to be
// written after the jobs stopped, however short ShutdownTimeout is: giving
// up early only leaves the jobs reserved until their lease expires.
const minFlushTime = 5 * time.Second

// completeLinger is how long the completer waits to fill a batch of
// outcomes when several are already waiting (see runner.Completer).
const completeLinger = 5 * time.Millisecond

// ErrShutdown is the cause of a handler's context cancelled because the
// worker's shutdown timeout ran out (context.Cause tells it apart).
var ErrShutdown = errors.New("worker shutting down")

// ErrLeaseLost is the cause of a handler's context cancelled because the
// job's lease was lost: another worker took the job over, or heartbeats
// failed until the lease ran out, so another worker may run it now. The
// handler should stop; whatever it returns is refused by the lease fence
// if the job was taken over.
var ErrLeaseLost = runner.ErrLeaseLost

// Worker claims jobs from its queues and runs their handlers. Create it with
// NewWorker and run it with Run.
type Worker struct {
	b       backend.Backend
	reg     *Registry
	cfg     WorkerConfig
	log     *slog.Logger
	hooks   hookList
	cron    []*cronEntry // checked WorkerConfig.Schedules; nil: no scheduler
	running atomic.Bool
	busy    atomic.Int64
	stale   atomic.Int64
	// warnedLimit holds the types whose jobs arrived with a stored
	// attempt limit other than the one they declare: warned once each.
	warnedLimit sync.Map
}

// NewWorker checks cfg and every handler's options and returns a worker
// for b running reg's handlers. A bad value is an error wrapping
// ErrInvalidInput that names the field and the limit.
func NewWorker(b backend.Backend, reg *Registry, cfg WorkerConfig) (*Worker, error) {
	if b == nil || reg == nil {
		return nil, fmt.Errorf("%w: NewWorker needs a backend and a registry", ErrInvalidInput)
	}
	if _, inline := b.(backend.Inline); inline {
		return nil, fmt.Errorf("%w: the sync backend runs jobs inside Enqueue; it has no workers", ErrInvalidInput)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := reg.check(cfg.Retry); err != nil {
		return nil, err
	}
	if _, ok := backend.As[backend.Retainer](b); !ok && cfg.Retention.asked() {
		return nil, fmt.Errorf("WorkerConfig.Retention: %w: %T keeps no finished jobs", ErrNotSupported, b)
	}
	entries, err := checkSchedules(b, reg, cfg.Schedules)
	if err != nil {
		return nil, err
	}
	hooks := append(hookList{logHooks(cfg.Logger)}, cfg.Hooks...) // outcomes logged first (log_hooks.go)
	return &Worker{b: b, reg: reg, cfg: cfg, log: cfg.Logger, hooks: hooks, cron: entries}, nil
}

func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	bad := func(format string, args ...any) (WorkerConfig, error) {
		return c, fmt.Errorf("%w: WorkerConfig."+format, append([]any{ErrInvalidInput}, args...)...)
	}
	if len(c.Queues) == 0 {
		c.Queues = []string{"default"}
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
		{"JobTimeout", &c.JobTimeout, 5 * time.Minute},
		{"Lease", &c.Lease, 30 * time.Second},
		{"SweepInterval", &c.SweepInterval, 5 * time.Second},
		{"PollInterval", &c.PollInterval, time.Second},
		{"ShutdownTimeout", &c.ShutdownTimeout, 10 * time.Second},
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
		c.ClaimCooldown = 2 * time.Millisecond
	}
	if c.WorkflowRetention == 0 {
		c.WorkflowRetention = defaultWorkflowRetention
	}
	if c.CancelPollInterval == 0 {
		c.CancelPollInterval = 250 * time.Millisecond
	}
	var err error
	if c.Retention, err = c.Retention.withDefaults(); err != nil {
		return c, err
	}
	if c.Concurrency < 0 || c.Concurrency > 10000 {
		return bad("Concurrency %d is outside 1..10000", c.Concurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.ClaimBatch < 0 || c.ClaimBatch > c.Concurrency {
		return bad("ClaimBatch %d is outside 1..Concurrency (%d), or 0 for the default: a worker cannot hold more jobs than it runs at once", c.ClaimBatch, c.Concurrency)
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = min(c.Concurrency, 100)
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
	return c, nil
}

// Busy is the number of handlers running now.
func (w *Worker) Busy() int { return int(w.busy.Load()) }

// Capacity is the most handlers the worker runs at once (its Concurrency).
func (w *Worker) Capacity() int { return w.cfg.Concurrency }

// Queues are the queues the worker serves.
func (w *Worker) Queues() []string { return append([]string(nil), w.cfg.Queues...) }

// StaleOutcomes counts the outcomes the lease fence refused since the
// worker started: jobs whose lease was lost and that another worker took
// over. A rising count means leases are too short for the handlers or the
// workers are starved.
func (w *Worker) StaleOutcomes() int64 { return w.stale.Load() }

// Run works jobs until ctx is cancelled, then shuts down gracefully: it
// claims nothing new, lets in-flight jobs finish for up to ShutdownTimeout,
// then cancels their contexts (cause ErrShutdown) and releases the
// unfinished ones at once (see backend.Backend.JobRelease for how often a
// release is free), writes every outcome and returns nil. A handler that
// ignores its cancellation for another ShutdownTimeout is abandoned: Run
// returns without it, and its late result is dropped and logged (its job
// returns when its lease expires). It returns an error only when the
// worker cannot run (already running). Backend errors while running are
// logged and retried with backoff; they never stop the worker.
//
// The worker's components start in this order and stop in the reverse:
// the completer (writes outcomes), the lease extender (heartbeats), the
// lease sweeper, the handlers, and the claimer. So on shutdown the claimer
// stops first; the handlers drain while their leases are still extended;
// then the sweeper and extender stop; and the completer, last, flushes
// every outcome and release, for up to max(ShutdownTimeout, 5s).
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("run worker: already running")
	}
	defer w.running.Store(false)
	r := w.newRun(ctx)
	defer r.abandonWrites()

	var g lifecycle.Group
	for _, c := range r.components() {
		g.Start(r.writeCtx, c)
	}
	// The claimer alone runs under ctx itself, so it stops claiming the
	// moment ctx ends, before Stop even begins.
	g.Start(ctx, lifecycle.Component{Name: "claimer", Run: r.runClaimer})
	w.log.Info("worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency)
	<-ctx.Done()
	w.log.Info("worker stopping: no new claims, waiting for in-flight jobs", "busy", w.Busy(), "timeout", w.cfg.ShutdownTimeout)
	g.Stop()
	w.log.Info("worker stopped")
	return nil
}

// run is the state of one call of Worker.Run.
type run struct {
	w *Worker
	// writeCtx outlives Run's context: the outcomes of the last jobs and
	// the releases are written after it is cancelled. abandonWrites ends
	// it when Run returns.
	writeCtx      context.Context
	abandonWrites context.CancelFunc
	// workCtx is the parent of every handler's context; cancelWork ends
	// it with ErrShutdown past the shutdown timeout.
	workCtx    context.Context
	cancelWork context.CancelCauseFunc

	completer *runner.Completer
	extender  *runner.LeaseExtender
	sweeper   *runner.LeaseSweeper
	claimer   *runner.Claimer
	watcher   *runner.CancelWatcher // nil: the backend cannot cancel, or polling is off
	pruner    *runner.Pruner        // nil: the backend keeps nothing

	inflight sync.WaitGroup
	jobs     chan runner.Claimed // unbuffered: a send succeeds only to an idle job goroutine
	draining chan struct{}       // closed when the claimer has stopped
}

func (w *Worker) newRun(ctx context.Context) *run {
	cfg := w.cfg
	r := &run{w: w, jobs: make(chan runner.Claimed), draining: make(chan struct{})}
	r.writeCtx, r.abandonWrites = context.WithCancel(context.WithoutCancel(ctx))
	r.workCtx, r.cancelWork = context.WithCancelCause(r.writeCtx)
	r.completer = runner.NewCompleter(w.b, 2*cfg.Concurrency, max(100, cfg.ClaimBatch), completeLinger, w.log, w.onStale)
	r.extender = runner.NewLeaseExtender(w.b, cfg.Lease, cfg.HeartbeatInterval, w.log)
	r.completer.OnCancelled(w.onCancelled)
	r.completer.OnWritten(w.onWritten)
	r.sweeper = runner.NewLeaseSweeper(w.b, cfg.SweepInterval, w.log, w.onSweep)
	if c, ok := backend.As[backend.Canceller](w.b); ok && cfg.CancelPollInterval > 0 {
		r.watcher = runner.NewCancelWatcher(c, r.extender, cfg.CancelPollInterval, w.log)
	}
	r.pruner = w.pruner()
	r.claimer = runner.NewClaimer(w.b, runner.ClaimerConfig{
		Queues: cfg.Queues, Concurrency: cfg.Concurrency, Batch: cfg.ClaimBatch,
		Lease: cfg.Lease, Poll: cfg.PollInterval, Cooldown: cfg.ClaimCooldown,
		Log: w.log, Dispatch: r.dispatch,
	})
	return r
}

// components lists the worker's background components in start order
// (see Run), but for the claimer, which Run starts last.
func (r *run) components() []lifecycle.Component {
	cfg := r.w.cfg
	cs := []lifecycle.Component{
		{Name: "completer", Run: r.completer.Run, Drain: r.completer.Close, Grace: max(cfg.ShutdownTimeout, minFlushTime)},
		{Name: "lease extender", Run: r.extender.Run},
	}
	if r.watcher != nil {
		cs = append(cs, lifecycle.Component{Name: "cancel watcher", Run: r.watcher.Run})
	}
	if r.pruner != nil {
		cs = append(cs, lifecycle.Component{Name: "pruner", Run: r.pruner.Run})
	}
	cs = append(cs,
		lifecycle.Component{Name: "lease sweeper", Run: r.sweeper.Run},
		lifecycle.Component{Name: "handlers", Run: r.runHandlers, Drain: func() { close(r.draining) }, Grace: cfg.ShutdownTimeout},
	)
	// The scheduler only inserts jobs, so it needs none of the others;
	// without schedules it does not exist (no loop, no goroutine).
	// NewWorker refused schedules on a backend without a schedule store.
	if store, ok := backend.As[backend.ScheduleStore](r.w.b); ok && len(r.w.cron) > 0 {
		sched := newScheduler(store, r.w.cron, r.w.log)
		cs = append(cs, lifecycle.Component{Name: "scheduler", Run: sched.Run})
	}
	return cs
}

// runClaimer subscribes to the backend's wake-ups (when it has them) and
// claims until ctx ends.
func (r *run) runClaimer(ctx context.Context) {
	if n, ok := backend.As[backend.Notifier](r.w.b); ok {
		ch, unsubscribe := n.Subscribe(r.w.cfg.Queues)
		defer unsubscribe()
		r.claimer.SetWake(ch)
	}
	r.claimer.Run(ctx)
}

// runHandlers is the handlers' stage of the shutdown: once drained (the
// claimer has stopped) it returns when the last handler has; when ctx ends
// first (the shutdown timeout ran out) it cancels the handlers and gives
// them another ShutdownTimeout before abandoning them.
func (r *run) runHandlers(ctx context.Context) {
	drained := make(chan struct{})
	go func() {
		<-r.draining
		r.inflight.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		return
	case <-ctx.Done():
	}
	r.w.log.Warn("shutdown timeout: cancelling in-flight jobs and releasing them", "busy", r.w.Busy())
	r.cancelWork(ErrShutdown)
	t := time.NewTimer(r.w.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		// A handler that ignores its context cannot be stopped; its job
		// stays reserved and the lease sweep rescues it. Its late result
		// is dropped (see execute).
		r.w.log.Error("handlers ignored cancellation; abandoning them", "busy", r.w.Busy())
	}
}

// dispatch hands a claimed job to an idle job goroutine, or starts one.
// Job goroutines live on between jobs (see runJobs): a goroutine per job
// paid for its creation and, with deep handlers or middleware (tracing),
// for growing its stack again every time; on the SQLite drain benchmark
// with tracing that was a tenth of the CPU.
func (r *run) dispatch(c runner.Claimed) {
	r.inflight.Add(1)
	select {
	case r.jobs <- c:
	default:
		go r.runJobs(c)
	}
}

// runJobs executes c, then every job dispatch hands it, until the claimer
// has stopped (draining) and it is idle. At most Concurrency of them run,
// since a job is only claimed into a free slot.
func (r *run) runJobs(c runner.Claimed) {
	for {
		r.runOne(c)
		select {
		case c = <-r.jobs:
		case <-r.draining:
			return
		}
	}
}

// runOne executes c and frees its slot, even when the handler ended the
// goroutine with runtime.Goexit: deferred calls still run then, and
// dispatch starts a new job goroutine for the next job.
func (r *run) runOne(c runner.Claimed) {
	defer func() {
		r.claimer.Done()
		r.inflight.Done()
	}()
	r.execute(c)
}

// errGoexit is the error of an attempt whose handler called
// runtime.Goexit instead of returning.
var errGoexit = errors.New("the handler called runtime.Goexit (as testing's FailNow does) instead of returning")

// execute runs one attempt and queues its outcome. Everything that tracks
// the attempt is keyed by its ref (job ID and claim token).
func (r *run) execute(c runner.Claimed) {
	w, row := r.w, c.Row
	ref := row.Ref()
	job := w.jobOf(row)
	ctx, cancel := context.WithCancelCause(r.workCtx)
	defer cancel(nil)
	r.extender.Add(ref, c.LeaseDeadline, cancel)
	defer r.extender.Remove(ref)
	w.hooks.claimed(ClaimedEvent{Job: job, Wait: waitTime(row)})

	jc := &jobCtx{job: job, ref: ref, backend: w.b, completingInTx: func() { r.extender.MarkInTx(ref) }}
	w.busy.Add(1)
	w.hooks.started(ctx, job)
	start := time.Now()
	returned := false
	defer func() {
		// A handler that calls runtime.Goexit never returns, but this
		// runs: its attempt ends like a panicking one's, and the
		// goroutine then ends (runOne frees the slot).
		if !returned {
			r.finish(ctx, c, jc, errGoexit, time.Since(start))
		}
	}()
	err := w.reg.run(ctx, jc, w.cfg.JobTimeout)
	returned = true
	r.finish(ctx, c, jc, err, time.Since(start))
}

// finish ends the attempt whose handler returned err after took: it stops
// its heartbeat and queues its outcome, telling the hooks.
func (r *run) finish(ctx context.Context, c runner.Claimed, jc *jobCtx, err error, took time.Duration) {
	w, row, ref, job := r.w, c.Row, jc.ref, jc.job
	w.busy.Add(-1)
	r.extender.Remove(ref)

	item, ev := w.decide(r.workCtx, row, job, err)
	if errors.Is(context.Cause(ctx), ErrJobCancelled) {
		// Whatever the handler returned, the backend refuses it and ends
		// the job cancelled; the outcome is only the holder's report.
		ev = Event{Kind: EventCancelled, Job: job, Err: err}
		item.Release = false
		item.Outcome = backend.Outcome{Ref: ref, Kind: backend.OutcomeFail, Error: backend.CancelledError}
	}
	jc.attachResult(&item.Outcome)
	ev.Duration = took
	item.Job, item.Err, item.Took = job, err, took
	// A job the handler completed in its own transaction is gone: writing
	// "done" again would only be refused by the fence.
	inTx := err == nil && jc.completedInTx.Load()
	if !inTx && !r.completer.Submit(item) {
		w.log.Warn("job finished after the worker stopped; its result is dropped (the job returns when its lease expires)",
			"job_id", ref.ID, "attempt", ref.Attempt, "outcome", ev.Kind)
		ev.Kind = EventAbandoned
	}
	w.hooks.finished(ev)
	if inTx {
		w.hooks.written(ev) // written by the handler's transaction
	}
}

// waitTime is how long a claimed job was due before its claim, by the
// backend's clock.
func waitTime(row *backend.JobRow) time.Duration {
	if row.ReservedAt.IsZero() || row.AvailableAt.IsZero() {
		return 0
	}
	return max(0, row.ReservedAt.Sub(row.AvailableAt))
}

// jobOf is the handler's view of a claimed row, with the attempt limit
// that applies: the one the type declares (HandlerOptions.MaxAttempts)
// whatever the job was stored with, since a job enqueued without the
// registry (jobq enqueue, the HTTP API, a client of another program) was
// given the client's default. A stored limit that differs is warned about
// once per type: the lease sweep, which knows only the stored limit, fails
// a job whose worker died during its last stored attempt.
func (w *Worker) jobOf(row *backend.JobRow) *Job {
	job := jobFromRow(row)
	h, ok := w.reg.lookup(row.Type)
	if !ok || h.opts.MaxAttempts == 0 || h.opts.MaxAttempts == row.MaxAttempts {
		return job
	}
	job.MaxAttempts = h.opts.MaxAttempts
	if _, warned := w.warnedLimit.LoadOrStore(row.Type, true); !warned {
		w.log.Warn("a job was stored with another attempt limit than its type declares: the type's applies; enqueue through a client that has the registry so both agree (a worker dying during the stored limit's last attempt still ends the job there)",
			"type", row.Type, "job", row.ID, "stored_max_attempts", row.MaxAttempts, "type_max_attempts", h.opts.MaxAttempts)
	}
	return job
}

// decide turns a handler's result into the write for the backend. The
// error text is normalised here, once, so what hooks see is what is
// stored.
func (w *Worker) decide(workCtx context.Context, row *backend.JobRow, job *Job, err error) (runner.Item, Event) {
	ref := row.Ref()
	ev := Event{Job: job, Err: err}
	item := runner.Item{Outcome: backend.Outcome{Ref: ref}, Queue: row.Queue, Type: row.Type}
	switch {
	case err == nil:
		ev.Kind = EventDone
		item.Outcome.Kind = backend.OutcomeDone
		item.Outcome.Keep = w.cfg.Retention.Completed > 0
		return item, ev
	case errors.Is(context.Cause(workCtx), ErrShutdown):
		ev.Kind = EventReleased
		item.Release = true
		return item, ev
	case IsPermanent(err) || row.Attempts >= job.MaxAttempts:
		ev.Kind = EventFailed
		item.Outcome.Kind, item.Outcome.Error = backend.OutcomeFail, errorText(err)
		return item, ev
	}
	delay, asked := retryAfter(err)
	if !asked {
		policy := w.cfg.Retry
		if h, ok := w.reg.lookup(row.Type); ok {
			policy = h.opts.Retry.withDefaults(policy)
		}
		delay = policy.Delay(row.Attempts)
	}
	ev.Kind, ev.RetryDelay = EventRetry, delay
	item.Outcome.Kind, item.Outcome.RetryDelay, item.Outcome.Error = backend.OutcomeRetry, delay, errorText(err)
	return item, ev
}

// onStale counts and reports outcomes the lease fence refused.
func (w *Worker) onStale(items []runner.Item) {
	w.stale.Add(int64(len(items)))
	resent := 0
	for _, it := range items {
		if it.Resent {
			resent++
		}
		w.hooks.stale(StaleEvent{JobID: it.Outcome.Ref.ID, Attempt: it.Outcome.Ref.Attempt, Token: it.Outcome.Ref.Token,
			Queue: it.Queue, Type: it.Type, Resent: it.Resent})
	}
	if resent < len(items) {
		w.log.Warn("job outcomes refused by the lease fence: the jobs were taken over", "jobs", len(items)-resent)
	}
	if resent > 0 {
		w.log.Warn("job outcomes sent again after a failed send were refused by the lease fence: the failed send applied them, or the jobs were taken over",
			"jobs", resent)
	}
}

// onCancelled reports outcomes that ended their jobs cancelled: those of
// handlers stopped by the cancel (EventCancelled) and those of handlers
// that returned before they heard of it.
func (w *Worker) onCancelled(items []runner.Item) {
	for _, it := range items {
		w.log.Debug("job ended cancelled",
			"job_id", it.Outcome.Ref.ID, "attempt", it.Outcome.Ref.Attempt, "queue", it.Queue, "type", it.Type)
		w.hooks.written(writtenEvent(it, EventCancelled))
	}
}

// onSweep reports the jobs this worker's sweep moved.
func (w *Worker) onSweep(res backend.SweepResult) {
	for _, j := range res.Jobs {
		w.hooks.rescued(RescuedEvent{JobID: j.Ref.ID, Attempt: j.Ref.Attempt, Token: j.Ref.Token, Queue: j.Queue, Type: j.Type, Failed: j.Failed})
	}
}

// hookList calls each hook of a kind in order.
type hookList []WorkerHooks

func (l hookList) claimed(e ClaimedEvent) {
	for _, h := range l {
		if h.Claimed != nil {
			h.Claimed(e)
		}
	}
}

func (l hookList) started(ctx context.Context, j *Job) {
	for _, h := range l {
		if h.Started != nil {
			h.Started(ctx, j)
		}
	}
}

func (l hookList) finished(e Event) {
	for _, h := range l {
		if h.Finished != nil {
			h.Finished(e)
		}
	}
}

func (l hookList) rescued(e RescuedEvent) {
	for _, h := range l {
		if h.Rescued != nil {
			h.Rescued(e)
		}
	}
}

func (l hookList) written(e Event) {
	for _, h := range l {
		if h.Written != nil {
			h.Written(e)
		}
	}
}

// onWritten reports the outcomes and releases the backend applied.
func (w *Worker) onWritten(items []runner.Item) {
	for _, it := range items {
		w.hooks.written(writtenEvent(it, writtenKind(it)))
	}
}

// writtenKind is what became of the job of an applied item.
func writtenKind(it runner.Item) EventKind {
	if it.Release {
		return EventReleased
	}
	switch it.Outcome.Kind {
	case backend.OutcomeDone:
		return EventDone
	case backend.OutcomeRetry:
		return EventRetry
	}
	return EventFailed
}

// writtenEvent is the Written event of an item the worker queued.
func writtenEvent(it runner.Item, kind EventKind) Event {
	job, _ := it.Job.(*Job)
	ev := Event{Kind: kind, Job: job, Err: it.Err, Duration: it.Took}
	if kind == EventRetry {
		ev.RetryDelay = it.Outcome.RetryDelay
	}
	return ev
}

func (l hookList) stale(e StaleEvent) {
	for _, h := range l {
		if h.Stale != nil {
			h.Stale(e)
		}
	}
}
