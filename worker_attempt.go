package jobq

import (
	"context"
	"errors"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/runner"
)

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
	// EventDeferred: the worker has no handler for the job's type, so it
	// gave the job back untouched, due again after RetryDelay, with the
	// attempt not counted (backend.OutcomeDefer), for a worker that has
	// the handler. No handler started: only the Written (or Stale) hooks
	// hear of it, and RunOne returns it; Err matches ErrNoHandler.
	EventDeferred
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
	case EventDeferred:
		return "deferred"
	}
	return "unknown"
}

// Event describes one finished attempt (see WorkerHooks.Finished).
type Event struct {
	Kind       EventKind
	Job        *Job
	Err        error         // the handler's error; nil for EventDone
	RetryDelay time.Duration // EventRetry and EventDeferred only
	Duration   time.Duration // how long the handler ran
}

// errGoexit is the error of an attempt whose handler called
// runtime.Goexit instead of returning.
var errGoexit = errors.New("the handler called runtime.Goexit (as testing's FailNow does) instead of returning")

// attemptHolder is where the running worker and RunOne differ in an
// attempt: how its claim is held while the handler runs, and how its
// outcome is written. The running worker (*run) heartbeats the claim and
// queues the outcome for its completer; RunOne (oneShot) holds the claim
// without heartbeats and writes the outcome itself before returning.
type attemptHolder interface {
	// completingInTx: the handler's CompleteTx is about to delete the job
	// in the handler's transaction (see jobCtx.completingInTx).
	completingInTx(ref backend.JobRef)
	// handlerReturned: the handler returned (or called runtime.Goexit),
	// so the claim needs no more heartbeats.
	handlerReturned(ref backend.JobRef)
	// cancelledWhileRunning says whether the handler's context, ctx, was
	// cancelled because the job was cancelled while it ran.
	cancelledWhileRunning(ctx context.Context) bool
	// write writes item, whose attempt the worker decided is kind, or
	// hands it to whatever will, and returns what became of the job:
	// kind, or what the write made it (EventAbandoned, EventCancelled).
	// An error means it was not written: the Finished hooks are skipped,
	// and RunOne returns it.
	write(ctx context.Context, item runner.Item, kind EventKind) (EventKind, error)
}

// attempt is one run of a claimed job's handler, the same for the running
// worker and RunOne but for its holder.
type attempt struct {
	w      *Worker
	holder attemptHolder
	row    *backend.JobRow
	jc     *jobCtx
	// ctx is the handler's context; the cause of workCtx's end tells a
	// shutdown (ErrShutdown: the job is released, not failed). RunOne
	// has one context for both.
	ctx, workCtx context.Context
	start        time.Time
}

// runAttempt runs one attempt of the claimed row: the Claimed and Started
// hooks, the handler with its timeout, middleware and panic recovery
// (Registry.run), then the decided outcome, written through h, and the
// Finished hooks. It returns the attempt's Event, and h's write error.
func (w *Worker) runAttempt(ctx, workCtx context.Context, row *backend.JobRow, h attemptHolder) (Event, error) {
	entry, known := w.reg.lookup(row.Type)
	job := w.jobOf(row, entry, known)
	ref := row.Ref()
	if !known {
		return w.deferUnhandled(ctx, row, job, h)
	}
	fire(w.hooks, claimedHook, ClaimedEvent{Job: job, Wait: waitTime(row)})
	a := &attempt{w: w, holder: h, row: row, ctx: ctx, workCtx: workCtx,
		jc: &jobCtx{job: job, ref: ref, backend: w.b, completingInTx: func() { h.completingInTx(ref) }, maxResult: w.cfg.MaxResultBytes,
			reporter: w.progress, log: w.log}}
	w.busy.Add(1)
	fire(w.hooks, startedHook, startedEvent{ctx, job})
	a.start = time.Now()
	returned := false
	defer func() {
		// A handler that calls runtime.Goexit (t.FailNow in a test's
		// handler) never returns, but this runs: its attempt ends like a
		// panicking one's, and the goroutine then ends.
		if !returned {
			_, _ = a.end(errGoexit)
		}
	}()
	err := w.reg.run(ctx, a.jc, w.cfg.JobTimeout)
	returned = true
	return a.end(err)
}

// end ends the attempt whose handler returned herr: it decides the
// outcome, has the holder write it, and tells the hooks.
func (a *attempt) end(herr error) (Event, error) {
	took := time.Since(a.start)
	w, row, jc := a.w, a.row, a.jc
	w.busy.Add(-1)
	jc.stopProgress()
	a.holder.handlerReturned(jc.ref)

	item, ev := w.decide(a.workCtx, row, jc.job, herr)
	if a.holder.cancelledWhileRunning(a.ctx) {
		// Whatever the handler returned, the backend refuses it and ends
		// the job cancelled; the outcome is only the holder's report.
		ev = Event{Kind: EventCancelled, Job: jc.job, Err: herr}
		item.Release = false
		item.Outcome = backend.Outcome{Ref: jc.ref, Kind: backend.OutcomeFail, Error: backend.CancelledError}
	}
	jc.attachResult(&item.Outcome)
	// The record of a failed attempt says how long it ran and where.
	item.Outcome.Duration, item.Outcome.Worker = took, w.cfg.Name
	ev.Duration = took
	item.Job, item.Err, item.Took = jc.job, herr, took
	// A job the handler completed in its own transaction is gone: writing
	// "done" again would only be refused by the fence.
	inTx := herr == nil && jc.completedInTx.Load()
	if !inTx {
		var err error
		if ev.Kind, err = a.holder.write(a.ctx, item, ev.Kind); err != nil {
			return ev, err
		}
	}
	fire(w.hooks, finishedHook, ev)
	if inTx {
		fire(w.hooks, writtenHook, ev) // written by the handler's transaction
	}
	return ev, nil
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
func (w *Worker) jobOf(row *backend.JobRow, h handlerEntry, ok bool) *Job {
	job := jobFromRow(row)
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
		item.Outcome.Keep = w.cfg.Retention.keepCompleted(row.Type)
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
