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
	b   backend.Backend
	reg *Registry
	// progress is b's ProgressReporter, nil without one (SetProgress then
	// does nothing).
	progress backend.ProgressReporter
	cfg      WorkerConfig
	log      *slog.Logger
	hooks    hookList
	cron     []*cronEntry // checked WorkerConfig.Schedules; nil: no scheduler
	// held is true while a call of Run or RunOne has the worker: one at
	// a time, since Run claims by its free slots and counts Busy as its
	// own, which an attempt beside it would break.
	held  atomic.Bool
	busy  atomic.Int64
	stale atomic.Int64
	// warnedLimit holds the types whose jobs arrived with a stored
	// attempt limit other than the one they declare: warned once each.
	warnedLimit sync.Map
	// unhandled paces the log lines about jobs given back for want of a
	// handler (see deferUnhandled).
	unhandled unhandledLog
}

// NewWorker checks cfg and every handler's options and returns a worker
// for b running reg's handlers. A bad value is an error wrapping
// ErrInvalidInput that names the field and the limit.
func NewWorker(b backend.Backend, reg *Registry, cfg WorkerConfig) (*Worker, error) {
	if b == nil || reg == nil {
		return nil, fmt.Errorf("%w: NewWorker needs a backend and a registry", ErrInvalidInput)
	}
	if _, inline := backend.As[backend.Inline](b); inline {
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
	hooks := newHookList(append([]WorkerHooks{logHooks(cfg.Logger)}, cfg.Hooks...)) // outcomes logged first (log_hooks.go)
	progress, _ := backend.As[backend.ProgressReporter](b)
	return &Worker{b: b, reg: reg, progress: progress, cfg: cfg, log: cfg.Logger, hooks: hooks, cron: entries}, nil
}

// hold takes the worker for a call of Run or RunOne, in one step, so two
// calls cannot both pass a check before either takes it. It reports
// false when another call has it.
func (w *Worker) hold() bool { return w.held.CompareAndSwap(false, true) }

// release gives back what hold took.
func (w *Worker) release() { w.held.Store(false) }

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
// worker cannot run: Run or RunOne is already running on it. Backend
// errors while running are logged and retried with backoff; they never
// stop the worker.
//
// The worker's components start in this order and stop in the reverse:
// the completer (writes outcomes), the lease extender (heartbeats), the
// lease sweeper, the handlers, and the claimer. So on shutdown the claimer
// stops first; the handlers drain while their leases are still extended;
// then the sweeper and extender stop; and the completer, last, flushes
// every outcome and release, for up to max(ShutdownTimeout, 5s).
func (w *Worker) Run(ctx context.Context) error {
	if !w.hold() {
		return errors.New("run worker: already running")
	}
	defer w.release()
	r := w.newRun(ctx)
	defer r.abandonWrites()

	var g lifecycle.Group
	for _, c := range r.components() {
		g.Start(r.writeCtx, c)
	}
	// The claimer alone runs under ctx itself, so it stops claiming the
	// moment ctx ends, before Stop even begins.
	g.Start(ctx, lifecycle.Component{Name: "claimer", Run: r.runClaimer})
	w.log.Info("worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency, "types", w.reg.Types())
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
		Runnable: func(row *backend.JobRow) bool { _, ok := w.reg.lookup(row.Type); return ok },
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
		// is dropped (see run.write).
		r.w.log.Error("handlers ignored cancellation; abandoning them", "busy", r.w.Busy())
	}
}

// dispatch hands a claimed job to an idle job goroutine, or starts one.
// Job goroutines live on between jobs (see runJobs): a goroutine per job
// paid for its creation and, with deep handlers or middleware (tracing),
// for growing its stack again every time: a noticeable share of the CPU
// on the SQLite drain benchmark with tracing (docs/performance.md).
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

// execute runs one attempt of c under a context of its own, its lease
// extended until the handler returns. Everything that tracks the attempt
// is keyed by its ref (job ID and claim token).
func (r *run) execute(c runner.Claimed) {
	ref := c.Row.Ref()
	ctx, cancel := context.WithCancelCause(r.workCtx)
	defer cancel(nil)
	r.extender.Add(ref, c.LeaseDeadline, cancel)
	defer r.extender.Remove(ref)
	_, _ = r.w.runAttempt(ctx, r.workCtx, c.Row, r) // the run's holder never fails a write
}

// The running worker's attemptHolder: the lease extender holds the claim
// and the completer writes the outcome.

func (r *run) completingInTx(ref backend.JobRef) { r.extender.MarkInTx(ref) }

func (r *run) handlerReturned(ref backend.JobRef) { r.extender.Remove(ref) }

// cancelledWhileRunning: only the lease extender (a heartbeat's refusal,
// or the cancel watcher) cancels a handler's context with ErrJobCancelled.
func (r *run) cancelledWhileRunning(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrJobCancelled)
}

// write queues item for the completer, which reports it to the Written
// or Stale hooks once applied. After the worker stopped it is dropped.
func (r *run) write(_ context.Context, item runner.Item, kind EventKind) (EventKind, error) {
	if !r.completer.Submit(item) {
		r.w.log.Warn("job finished after the worker stopped; its result is dropped (the job returns when its lease expires)",
			"job_id", item.Outcome.Ref.ID, "attempt", item.Outcome.Ref.Attempt, "outcome", kind)
		return EventAbandoned, nil
	}
	return kind, nil
}
