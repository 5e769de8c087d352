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
	// Concurrency, at most 100.
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
	// ShutdownTimeout is how long in-flight jobs may run on after Run's
	// context is cancelled before their contexts are cancelled and they are
	// released back to pending. Defaults to 10s.
	ShutdownTimeout time.Duration
	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called after each attempt with what happened
	// (from the job's goroutine; keep it fast).
	OnEvent func(Event)
}

// EventKind is what became of one attempt.
type EventKind int

// The kinds of Event.
const (
	EventDone     EventKind = iota + 1 // succeeded; the job is deleted
	EventRetry                         // failed; scheduled again after RetryDelay
	EventFailed                        // failed for good; moved to failed_jobs
	EventReleased                      // interrupted by shutdown; back to pending, attempt not counted
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
	}
	return "unknown"
}

// Event describes one finished attempt.
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

// errShutdown is the cause given to handler contexts cancelled because the
// worker's shutdown timeout ran out.
var errShutdown = errors.New("worker shutting down")

// Worker claims jobs from its queues and runs their handlers. Create it with
// NewWorker and run it with Run.
type Worker struct {
	b       backend.Backend
	reg     *Registry
	cfg     WorkerConfig
	log     *slog.Logger
	running atomic.Bool
	busy    atomic.Int64
	stale   atomic.Int64
}

// NewWorker checks cfg and returns a worker for b running reg's handlers.
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
	return &Worker{b: b, reg: reg, cfg: cfg, log: cfg.Logger}, nil
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
	if c.Concurrency < 0 || c.Concurrency > 10000 {
		return bad("Concurrency %d is outside 1..10000", c.Concurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.ClaimBatch < 0 {
		return bad("ClaimBatch %d is negative", c.ClaimBatch)
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = min(c.Concurrency, 100)
	}
	c.ClaimBatch = min(c.ClaimBatch, c.Concurrency)
	if err := c.Retry.validate("WorkerConfig.Retry"); err != nil {
		return c, err
	}
	c.Retry = c.Retry.withDefaults(defaultRetryPolicy)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Busy is the number of handlers running now.
func (w *Worker) Busy() int { return int(w.busy.Load()) }

// StaleOutcomes counts the outcomes the lease fence refused since the
// worker started: jobs whose lease was lost and that another worker took
// over. A rising count means leases are too short for the handlers or the
// workers are starved.
func (w *Worker) StaleOutcomes() int64 { return w.stale.Load() }

// Run works jobs until ctx is cancelled, then shuts down gracefully: it
// claims nothing new, lets in-flight jobs finish for up to ShutdownTimeout,
// then cancels their contexts and releases the unfinished ones to pending at
// once, writes every outcome and returns nil. It returns an error only when
// the worker cannot run (already running). Backend errors while running are
// logged and retried with backoff; they never stop the worker.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("run worker: already running")
	}
	defer w.running.Store(false)
	cfg := w.cfg

	// Writes must outlive ctx: the outcomes of the last jobs and the
	// releases are written after it is cancelled.
	writeCtx, abandonWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer abandonWrites()
	workCtx, cancelWork := context.WithCancelCause(writeCtx)
	defer cancelWork(nil)

	var wake <-chan struct{}
	if n, ok := w.b.(backend.Notifier); ok {
		ch, unsubscribe := n.Subscribe(cfg.Queues)
		defer unsubscribe()
		wake = ch
	}
	completer := runner.NewCompleter(w.b, 2*cfg.Concurrency, max(100, cfg.ClaimBatch), completeLinger, w.log, func(refs []backend.JobRef) {
		w.stale.Add(int64(len(refs)))
		w.log.Warn("job outcomes refused by the lease fence: the jobs were taken over", "jobs", len(refs))
	})
	extender := runner.NewLeaseExtender(w.b, cfg.Lease, cfg.HeartbeatInterval, w.log)
	sweeper := runner.NewLeaseSweeper(w.b, cfg.SweepInterval, w.log, nil)

	var inflight sync.WaitGroup
	var claimer *runner.Claimer
	claimer = runner.NewClaimer(w.b, runner.ClaimerConfig{
		Queues: cfg.Queues, Concurrency: cfg.Concurrency, Batch: cfg.ClaimBatch,
		Lease: cfg.Lease, Poll: cfg.PollInterval, Cooldown: cfg.ClaimCooldown,
		Wake: wake, Log: w.log,
		Dispatch: func(row *backend.JobRow) {
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer claimer.Done()
				w.execute(workCtx, row, completer, extender)
			}()
		},
	})

	var loops sync.WaitGroup
	loops.Go(func() { completer.Run(writeCtx) })
	maintCtx, stopMaint := context.WithCancel(writeCtx)
	loops.Go(func() { extender.Run(maintCtx) })
	loops.Go(func() { sweeper.Run(maintCtx) })

	w.log.Info("worker started", "queues", cfg.Queues, "concurrency", cfg.Concurrency)
	claimer.Run(ctx)

	w.log.Info("worker stopping: no new claims, waiting for in-flight jobs", "busy", w.Busy(), "timeout", cfg.ShutdownTimeout)
	drained := make(chan struct{})
	go func() { inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(cfg.ShutdownTimeout):
		w.log.Warn("shutdown timeout: cancelling in-flight jobs and releasing them", "busy", w.Busy())
		cancelWork(errShutdown)
		select {
		case <-drained:
		case <-time.After(cfg.ShutdownTimeout):
			// A handler that ignores its context cannot be stopped; its
			// job stays reserved and the lease sweep rescues it.
			w.log.Error("handlers ignored cancellation; abandoning them", "busy", w.Busy())
		}
	}
	stopMaint()
	completer.Close()
	flushed := make(chan struct{})
	go func() { loops.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(max(cfg.ShutdownTimeout, minFlushTime)):
		w.log.Error("could not write the last outcomes in time; those jobs return after their lease")
		abandonWrites()
		<-flushed
	}
	w.log.Info("worker stopped")
	return nil
}

// execute runs one attempt and queues its outcome.
func (w *Worker) execute(workCtx context.Context, row *backend.JobRow, completer *runner.Completer, extender *runner.LeaseExtender) {
	ctx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	extender.Add(row.Ref(), cancel)
	jc := &jobCtx{job: jobFromRow(row), ref: row.Ref(), backend: w.b, stopHeartbeat: func() { extender.Remove(row.ID) }}
	w.busy.Add(1)
	start := time.Now()
	err := w.reg.run(ctx, jc, row, w.cfg.JobTimeout)
	took := time.Since(start)
	w.busy.Add(-1)
	extender.Remove(row.ID)

	item, ev := w.decide(workCtx, row, err)
	ev.Duration = took
	// A job the handler completed in its own transaction is gone: writing
	// "done" again would only be refused by the fence.
	if !(err == nil && jc.completedInTx.Load()) {
		completer.Submit(item)
	}
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(ev)
	}
}

// decide turns a handler's result into the write for the backend.
func (w *Worker) decide(workCtx context.Context, row *backend.JobRow, err error) (runner.Item, Event) {
	ref := row.Ref()
	ev := Event{Job: jobFromRow(row), Err: err}
	switch {
	case err == nil:
		ev.Kind = EventDone
		return runner.Item{Outcome: backend.Outcome{Ref: ref, Kind: backend.OutcomeDone}}, ev
	case errors.Is(context.Cause(workCtx), errShutdown):
		ev.Kind = EventReleased
		return runner.Item{Outcome: backend.Outcome{Ref: ref}, Release: true}, ev
	case IsPermanent(err) || row.Attempts >= row.MaxAttempts:
		ev.Kind = EventFailed
		return runner.Item{Outcome: backend.Outcome{Ref: ref, Kind: backend.OutcomeFail, Error: err.Error()}}, ev
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
	return runner.Item{Outcome: backend.Outcome{Ref: ref, Kind: backend.OutcomeRetry, RetryDelay: delay, Error: err.Error()}}, ev
}
