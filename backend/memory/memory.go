// Package memory is an in-process jobq backend with the same semantics as
// the durable ones: for tests, examples and single-process programs that can
// afford to lose their queue when they exit.
//
// Every time it uses (due times, leases, failed_at) comes from Options.Now,
// so tests of the runtime can drive it with a fake clock. Open it directly
// with New, or through backend.Open("memory:") once this package is imported.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/limitwake"
	"github.com/jobq/jobq/internal/wakeup"
)

func init() {
	backend.Register("memory", open)
}

// open serves backend.Open for "memory:" (or "memory://"). Each call makes a
// new, empty backend: two Opens never share jobs.
func open(ctx context.Context, url string, opts backend.OpenOptions) (backend.Backend, error) {
	if opts.Existing {
		return nil, &backend.InputError{Field: "backend URL", Reason: "memory: holds no jobs before it is opened and loses them when the process exits; use sqlite: or postgres:// for a store that outlives one command"}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open memory backend: %w", err)
	}
	_, rest, _ := strings.Cut(url, ":")
	if rest != "" && rest != "//" {
		return nil, &backend.InputError{Field: "backend URL", Reason: fmt.Sprintf("%q: the memory backend takes no path or options; use \"memory:\"", url)}
	}
	return New(Options{}), nil
}

// Options configures a memory backend. The zero value is ready to use.
type Options struct {
	// Now is the backend's clock: every due time, lease and failed_at is
	// read from it, never from time.Now directly, so tests can inject a fake
	// clock and move it forward. It must be safe for concurrent use.
	// Defaults to time.Now.
	Now func() time.Time
}

// Backend keeps jobs in process memory behind one mutex. It implements
// backend.Backend and backend.Notifier. Its memory is bounded by the live
// and failed jobs it holds: done jobs are dropped at once.
type Backend struct {
	now func() time.Time

	mu        sync.Mutex
	closed    bool
	lastJobID int64                     // also the jobs ever inserted: each insert takes the next ID
	jobs      map[int64]*backend.JobRow // live jobs, pending or reserved
	reserved  map[int64]*backend.JobRow // the reserved subset, for the sweep
	// deadlined holds the live jobs with a deadline, for the sweep (see
	// deadline.go); expired lists the jobs a claim moved to failed jobs
	// for their deadline, which the next sweep reports.
	deadlined map[int64]*backend.JobRow
	expired   []backend.SweptJob
	queues    map[string]*queue
	unique    map[string]int64 // unique key -> live job holding it
	// uniqueStates holds the set of each live job inserted with one
	// (InsertParams.UniqueStates); absent: every state.
	uniqueStates map[int64]backend.UniqueStates
	lastFailed   int64
	// lastToken is the last claim token handed out: one sequence for
	// every job, so a job's tokens only grow whatever becomes of it
	// (failed, replayed) without storing them apart.
	lastToken int64
	failed    []*backend.FailedJob // ascending ID
	// failedByJob finds a failed job by the ID it had while live, the one
	// its callers name it by; a job has at most one failed row.
	failedByJob map[int64]*backend.FailedJob
	finished    map[int64]*backend.FinishedJob // kept completed and cancelled jobs, see retention.go
	pruneTurn   pruneTurn
	subs        wakeup.Set
	control     map[string]*control             // paused or limited queues, see queues.go
	limits      *limitwake.Tracker              // wakes a rate-limited queue when its next window starts
	schedules   map[string]*backend.ScheduleRow // see schedule.go
	// wf holds the workflows and the index from a task's job ID to its
	// task, which the paths that end a job consult (see workflow.go).
	wf workflowStore
}

var (
	_ backend.Backend          = (*Backend)(nil)
	_ backend.Notifier         = (*Backend)(nil)
	_ backend.QueueController  = (*Backend)(nil)
	_ backend.Canceller        = (*Backend)(nil)
	_ backend.Retainer         = (*Backend)(nil)
	_ backend.InsertCounter    = (*Backend)(nil)
	_ backend.KeyController    = (*Backend)(nil)
	_ backend.ProgressReporter = (*Backend)(nil)
)

// New returns an empty memory backend.
func New(opts Options) *Backend {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	b := &Backend{
		now:          now,
		jobs:         map[int64]*backend.JobRow{},
		reserved:     map[int64]*backend.JobRow{},
		deadlined:    map[int64]*backend.JobRow{},
		queues:       map[string]*queue{},
		unique:       map[string]int64{},
		uniqueStates: map[int64]backend.UniqueStates{},
		failedByJob:  map[int64]*backend.FailedJob{},
		finished:     map[int64]*backend.FinishedJob{},
		control:      map[string]*control{},
	}
	b.limits = limitwake.New(func(q string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.wakeOne(q)
	})
	return b
}

// Close drops every job and makes later calls return backend.ErrClosed. It
// is idempotent. Open subscriptions stay valid but are never woken again.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.limits.Close()
	b.jobs, b.reserved, b.queues, b.unique = nil, nil, nil, nil
	b.deadlined, b.expired = nil, nil
	b.failed, b.failedByJob, b.finished = nil, nil, nil
	b.wf = workflowStore{}
	return nil
}

// lock takes the mutex for one call named op, refusing when ctx is done or
// the backend is closed. On success the caller must unlock b.mu.
func (b *Backend) lock(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	return nil
}

// queue returns the index of name, creating it.
func (b *Backend) queue(name string) *queue {
	q, ok := b.queues[name]
	if !ok {
		q = newQueue()
		b.queues[name] = q
	}
	return q
}

// dropIfEmpty forgets a queue that holds nothing, so memory follows the
// live jobs rather than every queue name ever seen.
func (b *Backend) dropIfEmpty(name string) {
	if q, ok := b.queues[name]; ok && q.empty() {
		delete(b.queues, name)
	}
}

// addPending makes j a live pending job.
func (b *Backend) addPending(j *backend.JobRow, now time.Time) {
	b.jobs[j.ID] = j
	if j.UniqueKey != "" {
		b.unique[j.UniqueKey] = j.ID
	}
	if j.Key != "" {
		b.keyJoined(j)
	}
	b.queue(j.Queue).addPending(j, now)
}

// keeps reports whether the live job id, holding a unique key, keeps p,
// a new job of the key, out at now (backend.UniqueStates).
// Called with b.mu held.
func (b *Backend) keeps(id int64, p *backend.InsertParams, now time.Time) bool {
	j := b.jobs[id]
	if j == nil {
		// Only a completed job kept with its key holds it from the
		// finished jobs (backend.UniqueCompleted).
		return b.finished[id] != nil
	}
	return b.uniqueStates[id].Keeps(p, j.Status != backend.StatePending, j.Attempts, j.AvailableAt, now)
}

// holdsCompleted reports whether the reserved job j, about to complete
// and be kept, keeps its unique key (backend.UniqueCompleted).
// Called with b.mu held.
func (b *Backend) holdsCompleted(j *backend.JobRow) bool {
	return j.UniqueKey != "" && b.unique[j.UniqueKey] == j.ID && b.uniqueStates[j.ID].HoldsCompleted()
}

// removeLive forgets a reserved job that is done or failed, freeing its
// unique key.
func (b *Backend) removeLive(j *backend.JobRow) {
	delete(b.jobs, j.ID)
	delete(b.reserved, j.ID)
	delete(b.deadlined, j.ID)
	if j.UniqueKey != "" && b.unique[j.UniqueKey] == j.ID {
		delete(b.unique, j.UniqueKey)
	}
	delete(b.uniqueStates, j.ID)
	b.queue(j.Queue).reserved--
	if j.Key != "" {
		b.keyReleased(j)
		b.keyLeft(j)
	}
	b.slotFreed(j.Queue)
	b.dropIfEmpty(j.Queue)
}

// held returns the reserved job that ref names, or nil when the fence fails
// (a cancelling job is no longer held: see cancelled).
func (b *Backend) held(ref backend.JobRef) *backend.JobRow {
	j := b.reserved[ref.ID]
	if j == nil || j.Token != ref.Token || j.Status != backend.StateReserved {
		return nil
	}
	return j
}

// recordError ends the held attempt of j with an error: LastError and a
// new entry of its Errors, which toFailed carries over when the job fails.
func recordError(j *backend.JobRow, msg string, took time.Duration, worker string, now time.Time) {
	j.LastError = msg
	j.Errors = backend.AppendAttemptError(j.Errors, backend.AttemptError{
		Attempt: j.Attempts, At: now, Duration: took, Worker: worker, Error: msg,
	})
}

// unreserve turns a reserved job back into a pending one due at availableAt.
func (b *Backend) unreserve(j *backend.JobRow, availableAt, now time.Time) {
	delete(b.reserved, j.ID)
	j.Status = backend.StatePending
	j.AvailableAt = availableAt
	j.ReservedAt = time.Time{}
	j.LeaseUntil = time.Time{}
	j.Progress = nil // it was the ended attempt's
	q := b.queue(j.Queue)
	q.reserved--
	if j.Key != "" {
		b.keyReleased(j)
	}
	q.addPending(j, now)
	b.slotFreed(j.Queue)
}

// toFailed moves a reserved job to failed_jobs with msg.
func (b *Backend) toFailed(j *backend.JobRow, msg string, now time.Time) {
	if j.Key != "" {
		// Counted before the job leaves, so its key stays indexed.
		b.keyOf(j).failed++
	}
	b.removeLive(j)
	b.addFailed(j, msg, now)
	// Every move to failed_jobs passes here: a task's job that fails ends
	// its task in the same critical section.
	b.taskJobEnded(j.ID, backend.TaskFailed, msg, nil, now)
	b.keyEnded(j, now)
}

// addFailed stores the failed row of live job j, which left the live
// jobs, with msg.
func (b *Backend) addFailed(j *backend.JobRow, msg string, now time.Time) {
	b.lastFailed++
	f := &backend.FailedJob{
		ID:          b.lastFailed,
		JobID:       j.ID,
		Queue:       j.Queue,
		Type:        j.Type,
		Payload:     j.Payload,
		Attempts:    j.Attempts,
		MaxAttempts: j.MaxAttempts,
		Priority:    j.Priority,
		Error:       msg,
		Errors:      j.Errors,
		UniqueKey:   j.UniqueKey,
		Metadata:    j.Metadata,
		CreatedAt:   j.CreatedAt,
		FailedAt:    now,
		WorkflowID:  j.WorkflowID,
		Task:        j.Task,
		Key:         j.Key,
		Turn:        j.Turn,
	}
	b.failed = append(b.failed, f)
	b.failedByJob[f.JobID] = f
	b.queue(f.Queue).failed++
}

// cloneJob copies a row for a caller, so callers never share state with the
// backend.
func cloneJob(j *backend.JobRow) *backend.JobRow {
	c := *j
	c.Payload = append([]byte(nil), j.Payload...)
	c.Metadata = cloneMetadata(j.Metadata)
	c.Errors = slices.Clone(j.Errors)
	return &c
}

func cloneFailed(f *backend.FailedJob) *backend.FailedJob {
	c := *f
	c.Payload = append([]byte(nil), f.Payload...)
	c.Metadata = cloneMetadata(f.Metadata)
	c.Errors = slices.Clone(f.Errors)
	return &c
}

// cloneMetadata copies a metadata map on its way in or out, so neither the
// inserter nor a reader can change what is stored; an empty map is stored
// as none. Stored maps are never written to, so a live row and its failed
// row may share one.
func cloneMetadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
