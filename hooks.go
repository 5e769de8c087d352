package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/backend"
)

// WorkerHooks observe what a worker does with its jobs. They are the seam
// that metrics, tracing and logging packages plug into without touching the
// runtime: WorkerConfig.Hooks takes any number of them, called in order.
// Every field is optional. Hooks run synchronously on the worker's own
// goroutines (the job's, for Claimed, Started and Finished): keep them fast
// and never block in them. A panicking hook is a bug in the hook; the
// worker does not recover it.
type WorkerHooks struct {
	// Claimed: the worker claimed the job and is about to run it. A job
	// of a type the worker has no handler for is not run: Claimed,
	// Started and Finished skip it, and Written reports it given back
	// (EventDeferred).
	Claimed func(ClaimedEvent)
	// Started: the handler is about to be called, with the handler's
	// context (middleware runs inside it).
	Started func(ctx context.Context, job *Job)
	// Finished: an attempt ended and the worker decided what becomes of
	// the job (Event.Kind); the write to the backend is queued, not yet
	// done. It reports what the attempt did: its run time, its slot
	// freed.
	Finished func(Event)
	// Written: the backend applied an attempt's outcome, once the write
	// returned (on the worker's writer, which waits for it: keep it
	// quick; it may come before the same attempt's Finished, which runs
	// on the handler's goroutine): Event.Kind is what became of the job, and
	// is EventCancelled when the backend ended the job cancelled instead
	// of applying the outcome (its cancel was requested as the handler
	// returned). Not called for an outcome the fence refused (Stale is),
	// nor for one never written (EventAbandoned, or writes given up at
	// shutdown). Counts of what became of jobs belong here: an outcome
	// counted at Finished may never take effect.
	Written func(Event)
	// Rescued: this worker's lease sweep moved a job whose holder stopped
	// heartbeating, back to pending or (attempts spent) to failed jobs,
	// or a pending job whose deadline passed (RescuedEvent.Expired) to
	// failed jobs.
	Rescued func(RescuedEvent)
	// Stale: the backend refused an outcome of this worker, or a release
	// at shutdown, because the attempt no longer held the job (its lease
	// was lost and the job was rescued or re-claimed).
	Stale func(StaleEvent)
}

// ClaimedEvent describes a claimed job.
type ClaimedEvent struct {
	Job *Job
	// Wait is how long the job was due before it was claimed (the
	// backend's claim time minus the job's available time, both by the
	// backend's clock; 0 when the backend did not say).
	Wait time.Duration
}

// RescuedEvent describes a job a lease sweep moved.
type RescuedEvent struct {
	JobID   int64
	Attempt int   // the attempt whose lease expired
	Token   int64 // that claim's fencing token (Job.Token)
	Queue   string
	Type    string
	Failed  bool // moved to failed jobs: its attempts were spent, or it expired
	// Expired: the job was not started by its deadline (see Deadline)
	// and moved to failed jobs without an attempt; Failed is set too.
	Expired bool
}

// StaleEvent describes an outcome the lease fence refused.
type StaleEvent struct {
	JobID   int64
	Attempt int
	Token   int64 // the refused claim's fencing token (Job.Token)
	// Resent: the write went out again after a send that failed, whose
	// reply may have been lost after the backend applied it. Refused
	// now, it may be that earlier send's own work rather than a lease
	// that was lost.
	Resent bool
	Queue  string
	Type   string
}

// ClientHooks observe (and may annotate) what a client enqueues:
// ClientConfig.Hooks takes any number of them, called in order. Every
// field is optional.
type ClientHooks struct {
	// BeforeEnqueue runs for each job before it is validated and stored.
	// It may add to the job's Metadata (a tracer injects its context
	// there); an error refuses the whole call, and nothing is written.
	BeforeEnqueue func(ctx context.Context, job *EnqueueInfo) error
	// AfterEnqueue runs once for every job BeforeEnqueue ran for (so
	// whatever BeforeEnqueue started can always be finished): after the
	// insert, with the job's result, or when the call failed (a hook's
	// refusal, bad input, the backend's error) with that error. For
	// EnqueueTx the insert is part of the caller's transaction, which may
	// still roll back.
	AfterEnqueue func(ctx context.Context, job EnqueueInfo, res EnqueueResult, err error)
	// Skipped: the caller reached the point where it would enqueue a job
	// of this type and decided not to (Client.Skip), with its reason.
	// Nothing was stored; BeforeEnqueue and AfterEnqueue do not run.
	Skipped func(ctx context.Context, job EnqueueInfo, reason string)
	// InlineStarted: on a backend that runs each job inside its insert
	// (sync), the handler of a job this client enqueued is about to run,
	// with the handler's context: what WorkerHooks.Started is for a
	// worker's attempt, since no worker runs these jobs. It fires inside
	// Enqueue, between BeforeEnqueue and AfterEnqueue.
	InlineStarted func(ctx context.Context, job *Job)
	// InlineFinished: that handler returned err (nil when it succeeded;
	// otherwise the enqueue fails with it, and an unknown type's err
	// matches ErrNoHandler). It follows every InlineStarted, unless the
	// handler called runtime.Goexit.
	InlineFinished func(ctx context.Context, job *Job, err error)
}

// EnqueueInfo is what client hooks see of a job being enqueued.
type EnqueueInfo struct {
	Type  string
	Queue string
	// Metadata is the job's metadata; BeforeEnqueue may set keys in it
	// (it is never nil there).
	Metadata map[string]string
	// Context is the job's own context: the call's, as earlier hooks'
	// BeforeEnqueue left it. BeforeEnqueue may replace it with a context
	// carrying what its AfterEnqueue needs (a tracer's span); later hooks
	// and every AfterEnqueue of the job then receive it, as their ctx and
	// here. It is per job, so a batch's jobs never share it.
	Context context.Context
	// InTx: the job is inserted inside the caller's transaction
	// (EnqueueTx, EnqueueWorkflowTx), so it exists only if that commits.
	InTx bool
	// Task is the job's task name in its workflow (EnqueueWorkflow,
	// EnqueueWorkflowTx); "" for a job enqueued alone.
	Task string
	// Workflow is, in AfterEnqueue, the ID of the workflow a task was
	// stored in; 0 for a job alone and when the call failed.
	Workflow int64
	// Insert is, in AfterEnqueue, the job exactly as the client gave it
	// to the backend (payload, unique key, delay, ...), set whenever the
	// call reached the backend, whatever it answered: a hook that must
	// tell the backend's refusal from the client's (a hook, bad input:
	// Insert is nil) reads it. Nil in BeforeEnqueue and Skipped. Read it
	// only: it is the client's own.
	Insert *backend.InsertParams
}

// Middleware wraps a handler: it may act before and after next, change
// the context, or return without calling it. Registry.Use installs it
// around every handler of the registry. It wraps each type's handler once,
// before the type's first attempt, and the handler it returns runs every
// attempt after: work per attempt belongs in that handler, not in the
// wrapping.
type Middleware func(next HandlerFunc) HandlerFunc
