package jobq

import (
	"context"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/runner"
)

// hookList is a worker's hooks in call order, its log hooks first
// (NewWorker).
type hookList []hookSet

// hookSet is one WorkerHooks with its Started hook adapted, once, to
// fire's one-argument shape: adapting it at each call would cost a
// closure per hook and attempt.
type hookSet struct {
	WorkerHooks
	started func(startedEvent) // nil when Started is
}

// startedEvent is Started's two arguments as one.
type startedEvent struct {
	ctx context.Context
	job *Job
}

func newHookList(hooks []WorkerHooks) hookList {
	l := make(hookList, len(hooks))
	for i, h := range hooks {
		l[i].WorkerHooks = h
		if f := h.Started; f != nil {
			l[i].started = func(e startedEvent) { f(e.ctx, e.job) }
		}
	}
	return l
}

// fire calls, in the list's order, the hook that pick selects from each
// set of hooks, skipping those that leave it unset. A panic in a hook is
// not recovered: WorkerHooks documents it as the hook's bug.
func fire[E any](l hookList, pick func(*hookSet) func(E), e E) {
	for i := range l {
		if h := pick(&l[i]); h != nil {
			h(e)
		}
	}
}

// The pickers fire takes, one per hook; named functions, so that passing
// one allocates nothing.
func claimedHook(h *hookSet) func(ClaimedEvent) { return h.Claimed }
func startedHook(h *hookSet) func(startedEvent) { return h.started }
func finishedHook(h *hookSet) func(Event)       { return h.Finished }
func writtenHook(h *hookSet) func(Event)        { return h.Written }
func rescuedHook(h *hookSet) func(RescuedEvent) { return h.Rescued }
func staleHook(h *hookSet) func(StaleEvent)     { return h.Stale }

// onStale counts and reports outcomes the lease fence refused.
func (w *Worker) onStale(items []runner.Item) {
	w.stale.Add(int64(len(items)))
	resent := 0
	for _, it := range items {
		if it.Resent {
			resent++
		}
		fire(w.hooks, staleHook, StaleEvent{JobID: it.Outcome.Ref.ID, Attempt: it.Outcome.Ref.Attempt, Token: it.Outcome.Ref.Token,
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
		fire(w.hooks, writtenHook, writtenEvent(it, EventCancelled))
	}
}

// onWritten reports the outcomes and releases the backend applied.
func (w *Worker) onWritten(items []runner.Item) {
	for _, it := range items {
		fire(w.hooks, writtenHook, writtenEvent(it, writtenKind(it)))
	}
}

// onSweep reports the jobs this worker's sweep moved.
func (w *Worker) onSweep(res backend.SweepResult) {
	for _, j := range res.Jobs {
		fire(w.hooks, rescuedHook, RescuedEvent{JobID: j.Ref.ID, Attempt: j.Ref.Attempt, Token: j.Ref.Token, Queue: j.Queue, Type: j.Type, Failed: j.Failed, Expired: j.Expired})
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
	case backend.OutcomeDefer:
		return EventDeferred
	}
	return EventFailed
}

// writtenEvent is the Written event of an item the worker queued.
func writtenEvent(it runner.Item, kind EventKind) Event {
	job, _ := it.Job.(*Job)
	ev := Event{Kind: kind, Job: job, Err: it.Err, Duration: it.Took}
	if kind == EventRetry || kind == EventDeferred {
		ev.RetryDelay = it.Outcome.RetryDelay
	}
	return ev
}
