package jobqtest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// Recorder wraps a backend (memory, sync, sqlite, postgres, redis) and
// records, per job type, what a request did with the queue: the jobs it
// asked the backend to store, the handlers that ran, and the enqueue
// points it reached without storing anything. It keeps the same ledger for
// a named step that is not a job (the controller's own "save"): the test
// records it as called with Ran, and places parts on the request's path
// with OnPath. A workflow's tasks (EnqueueWorkflow) are recorded as
// enqueues of their types, one per task. Observe and Classify read what
// was recorded since the recorder was made or last Reset; RunQueue runs
// the stored jobs in the test's goroutine.
//
// Give Backend() (not the wrapped backend) to the code under test's client,
// and the recorder's ClientHooks first in its ClientConfig.Hooks (NewClient
// does both). Backend() records the inserts every backend takes
// (Client.Enqueue, EnqueueMany); the client hooks record the rest: an
// enqueue refused before it reached the backend (by a hook or as bad
// input), Client.Skip, EnqueueTx, the workflows' tasks, and the handlers
// the sync backend runs inside the enqueue. Without the hooks those are
// invisible, and such a type reads as not wired.
//
// Backend() implements no optional capability itself: it is a
// backend.Unwrapper, and jobq finds every capability of the wrapped
// backend (Inline, TxInserter, Workflower, Notifier, Canceller, ...) with
// backend.As, whose calls go straight to the wrapped backend. Code of your
// own that needs one should use backend.As too; a direct type assertion
// on Backend() fails. Jobs that schedule ticks insert are not recorded:
// they are the workers' enqueues, not a request's.
//
// A Recorder is safe for concurrent use.
type Recorder struct {
	inner  backend.Backend
	inline bool
	b      backend.Backend

	mu        sync.Mutex
	enqueues  []Enqueue
	runs      []recordedRun
	runSeen   map[runKey]bool
	unhandled map[runKey]bool // attempts that found no handler for their type
	marks     []Skip          // Client.Skip, MarkSkipped and refusals before the backend
	reached   map[string]int
	queues    map[string]bool // every queue a job was stored in, kept across Reset
	elapse    bool            // RunQueue is running: retry delays are written as 0
}

// runKey identifies one attempt: by its claim's fencing token, since a
// replayed or released job runs the same (id, attempt) again.
type runKey struct {
	id      int64
	attempt int
	token   int64 // 0 inline
	inline  bool
}

// recordedRun is a Run with the key of its attempt (zero for a step).
type recordedRun struct {
	Run
	k runKey
}

// jobKey is the key of the attempt of j a worker runs.
func jobKey(j *jobq.Job) runKey {
	return runKey{id: j.ID, attempt: j.Attempt, token: j.Token}
}

// Enqueue is one job the code under test asked the backend to insert.
type Enqueue struct {
	Type      string
	Queue     string
	Payload   json.RawMessage
	UniqueKey string
	Delay     time.Duration
	RunAt     time.Time
	Metadata  map[string]string
	// ID is the stored job's ID, or for a duplicate the live job holding
	// its unique key; 0 when the insert failed, and for a workflow task
	// that waited for its dependencies (its job is made at its release).
	ID int64
	// Workflow is the ID of the workflow this job is a task of
	// (EnqueueWorkflow, EnqueueWorkflowTx), Task the task's name; 0 and
	// "" for a job enqueued alone.
	Workflow int64
	Task     string
	// Waiting: a workflow task with dependencies, stored to run once they
	// have ended.
	Waiting bool
	// Duplicate: nothing was stored, a live job holds UniqueKey.
	Duplicate bool
	// Err is the insert call's error: nothing of that call was stored (on
	// the sync backend: a handler of the call failed).
	Err error
	// Inline: the backend runs jobs inside the insert (sync) and stores
	// nothing.
	Inline bool
	// InTx: inserted through EnqueueTx, inside the caller's transaction.
	InTx bool
	// NotCommitted (InTx only): when the recorder was read, the job had
	// not run and the backend did not have it: its transaction rolled
	// back, or has not committed yet.
	NotCommitted bool
}

// Stored reports whether the backend kept the job for a worker: the insert
// succeeded, was not a duplicate, the backend is not inline, and a
// transaction it was inserted in committed.
func (e Enqueue) Stored() bool { return e.Enqueued() && !e.Inline }

// Enqueued reports whether the enqueue succeeded: stored, or on the sync
// backend run without error.
func (e Enqueue) Enqueued() bool { return e.Err == nil && !e.Duplicate && !e.NotCommitted }

// Run is one attempt of a handler that started while the recorder watched,
// or one call of a step of the request that is not a job (see Ran).
type Run struct {
	JobID int64
	// Type is the job's type, or the step's name.
	Type    string
	Queue   string
	Attempt int
	// Inline: it ran inside the enqueue (sync backend); otherwise a worker
	// ran it (RunQueue, or a Worker given WorkerHooks).
	Inline bool
	// Step: not a job but a named step the request called, recorded with
	// Ran; JobID, Queue and Attempt are zero.
	Step bool
}

// Skip is an enqueue point the request reached that stored and ran nothing.
type Skip struct {
	Type   string
	Queue  string
	Reason string
}

// NewRecorder wraps inner. It does not take ownership: closing Backend()
// closes inner, and so does closing inner itself.
func NewRecorder(inner backend.Backend) *Recorder {
	r := &Recorder{inner: inner, runSeen: map[runKey]bool{}, unhandled: map[runKey]bool{}, reached: map[string]int{}, queues: map[string]bool{}}
	_, r.inline = backend.As[backend.Inline](inner)
	// A tick of a schedule (ScheduleStore.ScheduleTick, reached through
	// As) inserts its job unrecorded: the scheduler's jobs are the
	// workers' own, not something a request did.
	r.b = &recBackend{Backend: inner, r: r}
	return r
}

// Backend is the wrapped backend to give the code under test (through a
// client, see NewClient) and workers.
func (r *Recorder) Backend() backend.Backend { return r.b }

// Unwrap returns the backend the recorder wraps.
func (r *Recorder) Unwrap() backend.Backend { return r.inner }

// NewClient returns a client on Backend() with the recorder's ClientHooks
// before cfg's own hooks, failing t when cfg is refused.
func (r *Recorder) NewClient(t testing.TB, cfg jobq.ClientConfig) *jobq.Client {
	t.Helper()
	cfg.Hooks = append([]jobq.ClientHooks{r.ClientHooks()}, cfg.Hooks...)
	c, err := jobq.NewClient(r.b, cfg)
	if err != nil {
		t.Fatalf("jobqtest: new client: %v", err)
	}
	return c
}

// ClientHooks returns the hooks through which the recorder sees what does
// not pass through Backend()'s own inserts: enqueue points that never
// reach the backend (a refusal by a later hook or as bad input, and
// Client.Skip), EnqueueTx, the tasks of EnqueueWorkflow and
// EnqueueWorkflowTx, and on the sync backend the handlers run inside the
// enqueue. Put them first in ClientConfig.Hooks, so they see every job
// before another hook can refuse it.
func (r *Recorder) ClientHooks() jobq.ClientHooks {
	return jobq.ClientHooks{
		BeforeEnqueue: func(ctx context.Context, job *jobq.EnqueueInfo) error {
			r.mu.Lock()
			r.reached[job.Type]++
			r.mu.Unlock()
			return nil
		},
		AfterEnqueue: func(ctx context.Context, job jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
			switch {
			case job.Insert == nil:
				if err != nil {
					r.mu.Lock()
					r.marks = append(r.marks, Skip{Type: job.Type, Queue: job.Queue, Reason: "refused before the backend: " + err.Error()})
					r.mu.Unlock()
				}
			case job.InTx || job.Task != "":
				// Found with backend.As, these inserts bypass Backend().
				r.recordHooked(job, res, err)
			}
			// Otherwise Backend().JobInsertMany recorded it, with the
			// backend's answer.
		},
		Skipped: func(ctx context.Context, job jobq.EnqueueInfo, reason string) {
			r.MarkSkipped(job.Type, job.Queue, reason)
		},
		InlineStarted: func(ctx context.Context, j *jobq.Job) {
			r.recordRun(Run{JobID: j.ID, Type: j.Type, Queue: j.Queue, Attempt: j.Attempt, Inline: true}, inlineKey(j))
		},
		InlineFinished: func(ctx context.Context, j *jobq.Job, err error) {
			r.endRun(inlineKey(j), err)
		},
	}
}

// inlineKey is the key of the attempt of j the sync backend runs: its IDs
// are the backend's own, apart from a worker's.
func inlineKey(j *jobq.Job) runKey {
	return runKey{id: j.ID, attempt: j.Attempt, token: j.Token, inline: true}
}

// WorkerHooks returns the hooks that record the attempts a Worker starts,
// for tests that run a real Worker on Backend() instead of RunQueue (which
// installs them itself). A job the worker gave back for want of a handler
// for its type (jobq.EventDeferred) is recorded among the attempts that
// found no handler (see Observation.Unhandled), once the backend applied
// it.
func (r *Recorder) WorkerHooks() jobq.WorkerHooks {
	return jobq.WorkerHooks{
		Started: func(ctx context.Context, j *jobq.Job) {
			r.recordRun(Run{JobID: j.ID, Type: j.Type, Queue: j.Queue, Attempt: j.Attempt}, jobKey(j))
		},
		Finished: func(ev jobq.Event) {
			if ev.Job != nil {
				r.endRun(jobKey(ev.Job), ev.Err)
			}
		},
		Written: func(ev jobq.Event) {
			if ev.Kind == jobq.EventDeferred && ev.Job != nil {
				j := ev.Job
				r.recordRun(Run{JobID: j.ID, Type: j.Type, Queue: j.Queue, Attempt: j.Attempt}, jobKey(j))
				r.endRun(jobKey(j), ev.Err)
			}
		},
	}
}

// MarkSkipped records that the request reached the enqueue point of typ
// and stored nothing, for code that cannot call Client.Skip (a fake, a
// branch in the test itself). queue may be empty. reason reads back
// exactly as given (Skip.Reason in Observation.Skips).
func (r *Recorder) MarkSkipped(typ, queue, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reached[typ]++
	r.marks = append(r.marks, Skip{Type: typ, Queue: queue, Reason: reason})
}

// Ran records that the request called the named part itself, a step that
// is not a job (the controller's own "save"), so that Classify answers
// Ran for it as for a job type whose handler ran. Call it where the step
// is called, once per call (Observation.Runs counts them).
func (r *Recorder) Ran(part string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, recordedRun{Run: Run{Type: part, Step: true}})
}

// OnPath places each named part, a job type or a step, on the request's
// path: the request is meant to reach it. A part on the path that was
// neither called (Ran, or a handler of it ran) nor deferred is Skipped; a
// part never placed there, never reached and never run is NotWired. It
// counts in Observation.Reached like an enqueue point the client reached
// (an Enqueue or Client.Skip through the recorder's client hooks puts its
// type on the path by itself).
func (r *Recorder) OnPath(parts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, part := range parts {
		r.reached[part]++
	}
}

// Reset forgets everything recorded, to observe the next request alone.
// Jobs stored before it stay in the backend (RunQueue still runs them).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqueues, r.runs, r.marks = nil, nil, nil
	r.runSeen = map[runKey]bool{}
	r.unhandled = map[runKey]bool{}
	r.reached = map[string]int{}
}

// Enqueues returns every insert recorded since the last Reset, in order.
// A job inserted in a transaction (EnqueueTx, EnqueueWorkflowTx) that has
// not run is looked up in the backend, to tell a commit from a rollback
// (NotCommitted).
func (r *Recorder) Enqueues() []Enqueue {
	r.mu.Lock()
	es := append([]Enqueue(nil), r.enqueues...)
	ran := map[int64]bool{}
	for _, run := range r.runs {
		if !run.Inline && !run.Step {
			ran[run.JobID] = true
		}
	}
	r.mu.Unlock()
	wfs := map[int64]wfLookup{} // one WorkflowGet per workflow, not per task
	for i, e := range es {
		if !e.InTx || e.Err != nil || e.Duplicate || (e.ID != 0 && ran[e.ID]) {
			continue
		}
		if e.Workflow != 0 {
			ok, err := r.workflowCommitted(context.Background(), e, wfs)
			switch {
			case errors.Is(err, backend.ErrNotFound):
				es[i].NotCommitted = true
			case err == nil:
				es[i].NotCommitted = !ok
			}
			continue
		}
		// A backend may give a rolled-back insert's ID to a later job
		// (SQLite does), so the job found must also be this one. Any other
		// error leaves the job counted as stored: unknown is not absent.
		row, err := r.inner.JobGet(context.Background(), e.ID)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			es[i].NotCommitted = true
		case err == nil:
			es[i].NotCommitted = row.Type != e.Type || row.Queue != e.Queue || row.UniqueKey != e.UniqueKey
		}
	}
	return es
}

// Runs returns every handler attempt and every step (see Ran) recorded
// since the last Reset, in order. An attempt that found no handler for its
// type is not among them: no handler started.
func (r *Recorder) Runs() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Run
	for _, run := range r.runs {
		if run.Step || !r.unhandled[run.k] {
			out = append(out, run.Run)
		}
	}
	return out
}

// recordRun notes that the attempt k started.
func (r *Recorder) recordRun(run Run, k runKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runSeen[k] {
		return // the same worker hooks installed twice
	}
	r.runSeen[k] = true
	r.runs = append(r.runs, recordedRun{Run: run, k: k})
}

// endRun notes how the attempt k ended: err says whether it found no
// handler for its type.
func (r *Recorder) endRun(k runKey, err error) {
	if !errors.Is(err, jobq.ErrNoHandler) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runSeen[k] {
		r.unhandled[k] = true
	}
}

// recordInserts notes one JobInsertMany call's jobs and results.
func (r *Recorder) recordInserts(params []backend.InsertParams, res []backend.InsertResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range params {
		e := enqueueOf(p, err)
		if i < len(res) {
			e.ID, e.Duplicate = res[i].ID, res[i].Duplicate
		}
		r.appendEnqueue(e)
	}
}

// recordHooked notes one job an AfterEnqueue hook heard of: inserted in a
// transaction, or a workflow's task. A task without a job ID once stored
// waits for its dependencies: the backend releases the others at once.
func (r *Recorder) recordHooked(job jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
	e := enqueueOf(*job.Insert, err)
	e.ID, e.Duplicate, e.InTx = res.ID, res.Duplicate, job.InTx
	e.Workflow, e.Task, e.Waiting = job.Workflow, job.Task, job.Task != "" && err == nil && res.ID == 0
	r.mu.Lock()
	defer r.mu.Unlock()
	r.appendEnqueue(e)
}

// enqueueOf is the Enqueue of p, whose insert call returned err, with
// copies of what the caller may reuse.
func enqueueOf(p backend.InsertParams, err error) Enqueue {
	return Enqueue{
		Type: p.Type, Queue: p.Queue, Payload: append(json.RawMessage(nil), p.Payload...),
		UniqueKey: p.UniqueKey, Delay: p.Delay, RunAt: p.RunAt, Metadata: maps.Clone(p.Metadata),
		Err: err,
	}
}

// appendEnqueue adds e under r.mu, noting the queue of a job stored.
func (r *Recorder) appendEnqueue(e Enqueue) {
	e.Inline = r.inline
	if e.Err == nil && !e.Duplicate && !r.inline {
		r.queues[e.Queue] = true
	}
	r.enqueues = append(r.enqueues, e)
}

// storedQueues lists the queues jobs were stored in, sorted.
func (r *Recorder) storedQueues() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.queues))
	for q := range r.queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// storedQueueCount is len(storedQueues()) without building the list:
// Drain asks it before every attempt to see whether a new queue appeared.
func (r *Recorder) storedQueueCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queues)
}

func (r *Recorder) setElapse(on bool) {
	r.mu.Lock()
	r.elapse = on
	r.mu.Unlock()
}

// recBackend is the recorder's backend.Backend: every method passes
// through, JobInsertMany is recorded, and while RunQueue runs retry
// delays are written as elapsed. It implements no optional capability,
// so it never needs to match the wrapped backend's set: backend.As finds
// them through Unwrap.
type recBackend struct {
	backend.Backend
	r *Recorder
}

// Unwrap returns the wrapped backend, for backend.As.
func (b *recBackend) Unwrap() backend.Backend { return b.Backend }

// JobInsertMany records the jobs and their results. Every backend has
// it, so a client without the recorder's hooks is recorded too.
func (b *recBackend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	res, err := b.Backend.JobInsertMany(ctx, params)
	b.r.recordInserts(params, res, err)
	return res, err
}

// JobComplete writes retries as due at once while RunQueue runs, so the
// test never waits out a backoff; the attempt report keeps the policy's
// delay.
func (b *recBackend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	b.r.mu.Lock()
	elapse := b.r.elapse
	b.r.mu.Unlock()
	if elapse {
		out := make([]backend.Outcome, len(params.Outcomes))
		for i, o := range params.Outcomes {
			if o.Kind == backend.OutcomeRetry {
				o.RetryDelay = 0
			}
			out[i] = o
		}
		params.Outcomes = out
	}
	return b.Backend.JobComplete(ctx, params)
}
