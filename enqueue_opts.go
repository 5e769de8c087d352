package jobq

import (
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// EnqueueOption adjusts one Enqueue call.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	queue       string
	priority    int
	maxAttempts int
	delay       time.Duration
	runAt       time.Time
	uniqueKey   string
	uniqueBy    *UniqueBy // Unique's parts; nil: the key is uniqueKey alone
	key         string
	metadata    map[string]string
	// onConflict and the debounce bounds: Replace and Debounce.
	onConflict            backend.ConflictMode
	debounce, debounceMax time.Duration
	keepLast              bool      // Replace(KeepLast())
	deadline              time.Time // Deadline; zero: none
	// deps are a workflow task's dependencies (After, AfterEnded);
	// hasDeps is set by either option, even naming no task, so a plain
	// enqueue that was given one is refused rather than silently run
	// without waiting.
	deps    []backend.Dep
	hasDeps bool
}

// Queue puts the job on the named queue. Defaults to "default". Names are 1
// to 128 letters, digits, '_', '-', '.' or ':', starting with a letter or
// digit.
func Queue(name string) EnqueueOption { return func(o *enqueueOptions) { o.queue = name } }

// Priority orders jobs within a queue: higher runs first. Defaults to 0;
// allowed range -1000..1000.
func Priority(p int) EnqueueOption { return func(o *enqueueOptions) { o.priority = p } }

// MaxAttempts is how many times the job is tried before it moves to
// failed_jobs. Defaults to ClientConfig.MaxAttempts (3). A type that
// declares HandlerOptions.MaxAttempts has that limit whatever a job says:
// workers apply it, and a client with the registry refuses another value
// here rather than store one that would be ignored.
func MaxAttempts(n int) EnqueueOption { return func(o *enqueueOptions) { o.maxAttempts = n } }

// Delay makes the job available d after it is enqueued (backend clock).
func Delay(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.delay = d } }

// RunAt makes the job available at t. It wins over Delay.
func RunAt(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.runAt = t } }

// UniqueKey makes the enqueue idempotent: while a job with the same key is
// pending or reserved, Enqueue returns that job's ID and ErrDuplicate
// instead of adding another. Once the job is done or failed the key is free.
func UniqueKey(key string) EnqueueOption { return func(o *enqueueOptions) { o.uniqueKey = key } }

// Replace changes what a duplicate does (see UniqueKey and Unique):
// instead of being dropped, it gives the waiting job holding its unique
// key (pending, scheduled or retrying) its payload and due time, keeping
// that job's ID; Enqueue still returns the ID with ErrDuplicate, and
// EnqueueResult.Replaced says the job took them. A running holder is left
// alone and the new job is dropped, as without Replace. Refused for a
// keyed job (Key), whose turn among its key's jobs is fixed at insert,
// and for a workflow task. With KeepLast, a running holder is not left
// alone but followed.
func Replace(opts ...ReplaceOption) EnqueueOption {
	return func(o *enqueueOptions) {
		o.onConflict, o.debounce, o.debounceMax, o.keepLast = backend.ConflictReplace, 0, 0, false
		for _, opt := range opts {
			opt(o)
		}
	}
}

// ReplaceOption adjusts Replace.
type ReplaceOption func(*enqueueOptions)

// KeepLast makes a duplicate of a running job a new job, its follow-up,
// instead of dropping it: the follow-up takes the identity over, so later
// duplicates replace it while it waits, and at most one waits, as
// BullMQ's keepLastIfActive. "Run again after the current run, with the
// latest payload." Memory and Redis do it; SQLite and PostgreSQL refuse
// it with ErrNotSupported for now.
func KeepLast() ReplaceOption { return func(o *enqueueOptions) { o.keepLast = true } }

// Debounce runs the job d after the last of a burst of enqueues of it,
// but no later than maxWait after the first: the job is inserted due d
// from now, and each duplicate (see UniqueKey and Unique) while it waits
// gives it its payload and pushes its due time to d from then, never past
// maxWait after the job was created, so a steady stream of enqueues
// still runs it. A running holder is left alone and the duplicate
// dropped. d must be positive and maxWait at least d; Delay and RunAt
// are refused with it, and so is what Replace refuses.
func Debounce(d, maxWait time.Duration) EnqueueOption {
	return func(o *enqueueOptions) {
		o.onConflict, o.debounce, o.debounceMax, o.keepLast = backend.ConflictDebounce, d, maxWait, false
	}
}

// Deadline is the latest time the job may start: a job no worker has
// claimed by t is never run. The next lease sweep of any worker moves it
// to the failed jobs with the error "deadline exceeded: not started by
// <t>", where it can be inspected, replayed (which clears the deadline)
// or purged, and it is counted as expired in metrics; it is never
// retried. A job already running at t is not stopped: the deadline is
// about starting. A retry whose next attempt would start after t
// expires too. The backend's clock decides: t must be after it at
// enqueue and no earlier than the job's due time (Delay, RunAt), or
// Enqueue fails with ErrInvalidInput and writes nothing. Refused for a
// keyed job (Key), with Replace or Debounce, for a workflow task, and by
// backends without it (Redis, for now: see docs/backends.md) with
// ErrNotSupported.
func Deadline(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.deadline = t } }

// conflictMode checks Replace, Debounce and Deadline against the other
// options and gives a debounced job its first due time.
func (o *enqueueOptions) conflictMode(workflow bool) error {
	if workflow && !o.deadline.IsZero() {
		return &backend.InputError{Field: "deadline", Reason: "is not for workflow tasks: a task's job is made when its dependencies end"}
	}
	if o.onConflict == backend.ConflictSkip {
		return nil
	}
	if o.uniqueKey == "" {
		return &backend.InputError{Field: "on conflict", Reason: fmt.Sprintf("%s needs UniqueKey or Unique: without a unique key nothing is a duplicate", o.onConflict)}
	}
	if workflow {
		return &backend.InputError{Field: "on conflict", Reason: fmt.Sprintf("%s is not for workflow tasks", o.onConflict)}
	}
	if o.onConflict == backend.ConflictDebounce {
		if o.delay != 0 || !o.runAt.IsZero() {
			return &backend.InputError{Field: "on conflict", Reason: "Debounce sets the due time: drop Delay and RunAt"}
		}
		o.delay = o.debounce
	}
	return nil
}

// Key names what the job acts on (an account, a tenant, a ledger), so the
// queue's key rules apply to it: jobs of one key take turns with other
// keys' jobs, at most the queue's key limit of them run at once, and an
// ordered queue runs them one at a time in enqueue order (see
// Inspector.SetQueueKeys and docs/keys.md). A payload that implements
// Keyed gives its own key when this option is absent. Up to 255 bytes of
// UTF-8 text; "" is no key. Backends without keys (see ErrNotSupported)
// refuse a keyed job.
func Key(key string) EnqueueOption { return func(o *enqueueOptions) { o.key = key } }

// Keyed is a payload that derives its key from its own fields, so every
// enqueue of it carries the key without a Key option:
//
//	func (c Charge) JobKey() string { return "account:" + c.AccountID }
//
// A Key option given to the enqueue wins.
type Keyed interface {
	JobKey() string
}

// Metadata attaches string pairs to the job: stored with it on every
// backend, readable by the handler (Job.Metadata), kept in failed jobs and
// on replay. Trace context and tags travel here; data belongs in the
// payload. Later calls add to (and override keys of) earlier ones. Limits:
// 64 keys, 4 KiB of keys and values together, UTF-8 text without NUL;
// beyond them Enqueue fails with ErrInvalidInput and writes nothing.
func Metadata(m map[string]string) EnqueueOption {
	return func(o *enqueueOptions) {
		if len(m) == 0 {
			return
		}
		if o.metadata == nil {
			o.metadata = make(map[string]string, len(m))
		}
		for k, v := range m {
			o.metadata[k] = v
		}
	}
}

// After makes a workflow task wait until the named tasks of the same
// workflow have succeeded; if one of them fails or is cancelled, this task
// is cancelled without running (and so are the tasks that wait on it with
// After), since its input will never exist. Use it for tasks that consume
// their dependencies' results. It applies only to jobs added to a
// Workflow: Enqueue and its siblings refuse it.
func After(names ...string) EnqueueOption {
	return func(o *enqueueOptions) { o.addDeps(backend.DepCancel, names) }
}

// AfterEnded makes a workflow task wait until the named tasks have ended,
// however they ended, and run then: for clean-up, reports and joins that
// must hear of every branch, failed ones included (Dependencies tells the
// handler how each ended). It applies only to jobs added to a Workflow.
func AfterEnded(names ...string) EnqueueOption {
	return func(o *enqueueOptions) { o.addDeps(backend.DepContinue, names) }
}

func (o *enqueueOptions) addDeps(policy backend.DepPolicy, names []string) {
	o.hasDeps = true
	for _, n := range names {
		o.deps = append(o.deps, backend.Dep{Task: n, Policy: policy})
	}
}
