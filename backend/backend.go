// Package backend defines the seam between jobq's runtime and the stores that
// keep jobs: the Backend interface, the rows it returns, the parameter structs
// of its methods and the sentinel errors every implementation maps its driver's
// errors to.
//
// Each implementation lives in its own package and proves itself by calling
// backendtest.Run, the conformance suite, unchanged. A behaviour the suite
// does not test is not part of the contract. The URL schemes of Open:
//
//	sqlite:     backend/sqlite     the embedded default, one file
//	postgres:// backend/postgres   many worker machines, SKIP LOCKED claims
//	redis://    backend/redis      many worker machines, Lua scripts (Cluster too)
//	memory:     backend/memory     one process, tests
//	sync:       backend/inline     runs each handler inside Enqueue, tests
//
// # Capabilities
//
// Beyond Backend, a store may implement optional interfaces, each found
// with As (so through wrappers that implement only Unwrap):
//
//	                    memory sqlite postgres redis sync
//	Notifier              x      x       x       x
//	Migrator                     x       x       x
//	TxInserter                   x       x
//	TxCompleter                  x       x
//	WorkflowTxInserter           x       x
//	InsertCounter         x      x       x       x
//	Canceller             x      x       x       x
//	QueueController       x      x       x       x     x
//	Retainer              x      x       x       x
//	ScheduleStore         x      x       x       x
//	Workflower            x      x       x       x
//	KeyController         x      x       x       x
//	ProgressReporter      x      x       x       x
//	Inline                                             x
//
// Adding one: docs/architecture.md has the checklist (the interface here,
// the backends, an area of the conformance suite, the Inspector, the
// command line and the admin API).
//
// # The lifecycle
//
// A job is inserted pending. JobClaim moves due pending jobs to reserved,
// counts the attempt (attempts+1) and gives them a lease. The holder then ends
// the attempt through JobComplete with one of three outcomes: done (the row is
// deleted), retry (back to pending, available after a delay) or fail (moved to
// failed_jobs atomically). A holder may extend its lease (JobExtendLease) or
// give the job back untouched (JobRelease, which un-counts the attempt).
// LeaseSweep returns reserved jobs whose lease expired to pending, or moves them
// to failed_jobs when their attempts are spent. JobState names these
// states, and the ones derived from them (scheduled, cancelling, completed,
// cancelled), in the words every surface shows.
//
// # The fence
//
// Every claim gives the job a fencing token (JobRow.Token) that no earlier
// claim of the same job had: tokens of one job only grow, through releases,
// lease sweeps, failure and replay alike. Every write by a holder (complete,
// retry, fail, release, extend, and the cancel paths) names the claim by its
// JobRef and applies only while the job is still reserved under that token,
// so once the job was given back, rescued or re-claimed, a stale holder's
// write (a late one, or a retried one whose first reply was lost) changes
// nothing. The attempt number is not the fence: a free release un-counts
// it, so two claims of one job can carry the same (ID, Attempt).
//
// Times that decide eligibility and leases are taken from the backend's own
// clock (the database clock on a shared server), never from the caller.
package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Backend is a durable (or, for memory and sync, in-process) job store.
// Every method is safe for concurrent use. A method's context bounds only that
// call.
type Backend interface {
	// JobInsertMany inserts jobs in one transaction: all of them or none.
	// Every item is validated first (see ValidateInsert); one invalid item
	// fails the whole call with an error wrapping ErrInvalidInput and nothing
	// is written. An item whose UniqueKey matches a pending or reserved job
	// (or an earlier item of the same call) is not inserted; its result
	// carries the existing job's ID and Duplicate = true, and its
	// OnConflict mode applies to that job (see ConflictMode), in the same
	// atomic step.
	JobInsertMany(ctx context.Context, params []InsertParams) ([]InsertResult, error)

	// JobClaim reserves up to params.Max due pending jobs from params.Queues
	// in claim order, in one atomic step: no two callers ever receive the
	// same job while it is reserved. Claim order is priority (higher
	// first), then due time (AvailableAt, earlier first: when the job
	// became available, so a retried, released or rescued job waits behind
	// the jobs that were due before it came back, and a scheduled one
	// behind the jobs due before its time), then ID (older first); due
	// times compare at the backend's resolution (a microsecond on the
	// durable ones).
	// Each returned row has Attempts already incremented, Status reserved,
	// LeaseUntil = now + params.Lease and a Token greater than any earlier
	// claim of the job had. It returns an empty slice, not an error, when
	// nothing is due.
	JobClaim(ctx context.Context, params ClaimParams) ([]*JobRow, error)

	// JobComplete applies the outcomes of finished attempts, in as few
	// round trips as the backend can. Each outcome is fenced: it applies only
	// if the job is still reserved under the ref's Token. Outcomes that no
	// longer match are skipped and their refs returned in Stale; that is not
	// an error. Sending the same outcome again (a retry of a call whose
	// reply was lost) applies nothing twice: the first one ended the claim,
	// so the second is stale. It must not keep params.Outcomes after it returns: the
	// worker reuses the slice for its next batch.
	JobComplete(ctx context.Context, params CompleteParams) (CompleteResult, error)

	// JobExtendLease sets lease_until = now + params.Lease for each held job
	// that is still reserved under the ref's Token. It returns the refs
	// whose lease was lost (the job was rescued, re-claimed or is gone).
	JobExtendLease(ctx context.Context, params ExtendLeaseParams) ([]JobRef, error)

	// JobRelease gives held jobs back at once: used on shutdown for jobs
	// whose attempt was interrupted rather than failed. Fenced like
	// JobComplete: refs that no longer match are skipped and returned in
	// Stale, and those of jobs whose cancel was requested end cancelled
	// and are returned in Cancelled, so the caller reports each attempt as
	// what became of it.
	//
	// A release is free at most MaxFreeReleases times per job: the job goes
	// back to pending, available now, with the attempt un-counted
	// (attempts-1) and Releases+1. From then on a release counts the attempt
	// like a failure, so a job that always outlives the shutdown grace
	// cannot escape its attempt limit: Releases+1, and with attempts left it
	// goes back to pending, available now, with last_error ReleasedError;
	// with none left it moves to failed_jobs with that error. A counted
	// release appends that error to the job's Errors (Duration 0, no
	// Worker: the holder reports none); a free one adds nothing.
	JobRelease(ctx context.Context, refs []JobRef) (CompleteResult, error)

	// LeaseSweep finds reserved jobs whose lease_until has passed. Those with
	// attempts < max_attempts go back to pending, available now; the others
	// move to failed_jobs with the error "lease expired", each appending
	// it to the job's Errors (Duration 0, no Worker). At most
	// params.Limit jobs are handled per call (0 means a backend default).
	// It also moves pending jobs whose deadline has passed to failed_jobs
	// (see DeadlineError), within the same limit. The result names every
	// job it moved (SweepResult.Jobs). A call that
	// fails after part of its work committed (PostgreSQL sweeps tasks'
	// jobs in a second transaction) returns that part with the error.
	LeaseSweep(ctx context.Context, params SweepParams) (SweepResult, error)

	// JobGet returns one live job (pending or reserved) by ID, or ErrNotFound.
	JobGet(ctx context.Context, id int64) (*JobRow, error)

	// QueueStats counts jobs per queue and state: pending (due now),
	// scheduled (pending, available later), reserved, and failed (rows in
	// failed_jobs), with the due time of the oldest due job. Queues with
	// no jobs in any state are omitted. Sorted by queue name.
	QueueStats(ctx context.Context) ([]QueueStats, error)

	// FailedList lists failed jobs matching params, the last to fail first
	// (highest FailedJob.ID first, the order paging follows), at most
	// params.Limit of them (0 means 100).
	FailedList(ctx context.Context, params FailedListParams) ([]*FailedJob, error)

	// FailedGet returns the failed job whose job ID (the ID it had while
	// live, which a replay keeps) is jobID, or ErrNotFound. A job is never
	// both live and failed and a replay removes its failed row, so a job
	// ID names at most one failed job. The ID of a failed row
	// (FailedJob.ID) names nothing here.
	FailedGet(ctx context.Context, jobID int64) (*FailedJob, error)

	// FailedReplay moves the matching failed jobs back to the jobs table as
	// pending, available now, attempts and releases reset to 0, keeping
	// their original job ID, queue, type, payload, priority, max attempts
	// and metadata, and their Errors (the history of the attempts before
	// the replay), but no deadline (a job that expired would expire again
	// at once); each failed_jobs row is deleted in the same transaction
	// that re-creates its job, so a job is never in both tables nor in
	// neither. A replayed job whose unique key is now held by a live job is
	// left in failed_jobs and counted in Skipped. Replaying a job ID that
	// is not among the failed jobs returns ErrNotFound. A replay by filter
	// works in chunks of at most ChunkSize jobs per transaction, so it
	// never holds a lock for the whole table; a job failing meanwhile may
	// or may not be included.
	FailedReplay(ctx context.Context, params FailedReplayParams) (ReplayResult, error)

	// FailedPurge deletes the matching failed jobs and returns how many.
	// Like FailedReplay, a purge by filter works in chunks of at most
	// ChunkSize jobs per transaction.
	FailedPurge(ctx context.Context, params FailedPurgeParams) (int, error)

	// Close releases the backend's resources. It is idempotent. Calls after
	// Close return ErrClosed.
	Close() error
}

// JobRow is one live job.
type JobRow struct {
	ID          int64
	Queue       string
	Type        string
	Payload     []byte
	Attempts    int // tries made so far, including the one in progress
	MaxAttempts int
	Priority    int
	// Status is the job's stored status: StatePending (due now or later:
	// scheduled is AvailableAt in the future, read against a clock, so it
	// is never stored), StateReserved or StateCancelling. Done jobs are
	// deleted or kept apart (FinishedJob) and failed ones live in
	// failed_jobs, so no live row has another state.
	Status      JobState
	AvailableAt time.Time
	ReservedAt  time.Time // zero unless reserved
	LeaseUntil  time.Time // zero unless reserved
	CreatedAt   time.Time
	LastError   string // the error of the previous failed attempt, if any
	// Errors is the history of the job's failed attempts, oldest first,
	// at most MaxAttemptErrors (the oldest dropped): its last entry's
	// Error is LastError. A replay keeps it (attempts start again from 0,
	// the record of the attempts before stays). Nil when none failed.
	// JobGet fills it; the rows of JobClaim may leave it nil (a handler
	// reads LastError, and every claim would pay to read the history).
	Errors    []AttemptError
	UniqueKey string // empty when the job has none
	// Releases counts the times JobRelease gave the job back (see
	// MaxFreeReleases); 0 for a new or replayed job.
	Releases int
	// Metadata is the string map given at insert (trace context, users'
	// tags); nil when there is none.
	Metadata map[string]string
	// Token is the fencing token of the job's latest claim (see the
	// package doc): for a reserved job, the one its holder's writes must
	// name. 0 for a job never claimed. Opaque: compare tokens of one job
	// only, for equality or order.
	Token int64
	// WorkflowID and Task name the workflow task whose job this is (see
	// Workflower), so that what a worker logs of an attempt can say which
	// task it ran: 0 and "" for a job that is no task's. A backend that
	// implements Workflower fills them in every JobClaim (those of
	// limited and rate-limited queues too), JobGet and JobList, and keeps
	// them through failure and replay. Most jobs are no task's: the claim
	// of one may cost no more than reading one more column or field.
	WorkflowID int64
	Task       string
	// Key is the job's key, "" for none, and Turn its place in the
	// rotation between its queue's keys (see KeyController), 0 for a job
	// without a key.
	Key  string
	Turn int64
	// Deadline is the latest time the job may start, zero for none.
	Deadline time.Time
	// Progress is what the holder of the job's current claim last
	// reported (see ProgressReporter), nil for none and whenever the job
	// is not held. JobGet and Retainer.JobList fill it; JobClaim never
	// does.
	Progress *Progress
}

// Ref returns the fence that identifies this claim of the job.
func (j *JobRow) Ref() JobRef { return JobRef{ID: j.ID, Attempt: j.Attempts, Token: j.Token} }

// JobRef names one claim of one job: the fence for writes by its holder.
// Backends decide by ID and Token; Attempt rides along for reports and
// logs, and a backend returns the refs it was given as they were given.
type JobRef struct {
	ID      int64
	Attempt int   // the attempt the claim counted
	Token   int64 // the claim's fencing token (JobRow.Token)
}

// InsertParams describes one job to insert. Validate with ValidateInsert.
type InsertParams struct {
	Queue       string
	Type        string
	Payload     []byte        // JSON; must be valid
	Priority    int           // higher runs first; MinPriority..MaxPriority
	MaxAttempts int           // >= 1
	Delay       time.Duration // available at now + Delay (backend clock); used when RunAt is zero
	RunAt       time.Time     // absolute time; wins over Delay when set
	UniqueKey   string        // optional; see Backend.JobInsertMany
	// Metadata travels with the job: returned by claims, kept in
	// failed_jobs and on replay. Optional; see ValidateMetadata for its
	// limits. An empty map is stored as none (nil when read back). A
	// backend never keeps the caller's map nor hands out one it stores:
	// changing a map after insert or after a read changes nothing stored.
	Metadata map[string]string
	// Key is the job's key (see KeyController), "" for none. Backends
	// implementing KeyController take one, and so does the sync backend,
	// which runs each job inside its enqueue; the others refuse a keyed
	// job with ErrNotSupported (see RefuseKeys), writing nothing.
	Key string
	// OnConflict says what to do when UniqueKey is held (see
	// ConflictMode); the zero value skips.
	OnConflict ConflictMode
	// Debounce and DebounceMax are ConflictDebounce's delay and bound.
	Debounce, DebounceMax time.Duration
	// KeepLast, with ConflictReplace or ConflictDebounce, makes a
	// duplicate of a running holder a new job, its follow-up, instead of
	// dropping it: the follow-up takes the key over, so later duplicates
	// change it while it waits (at most one waits), as BullMQ's
	// keepLastIfActive.
	KeepLast bool
	// UniqueStates is the set of states in which the job, holding
	// UniqueKey, keeps later inserts of the key out (see UniqueStates);
	// zero: every state.
	UniqueStates UniqueStates
	// Deadline is the latest time the job may start, zero for none (see
	// DeadlineError). It must be after the backend's clock at insert and
	// no earlier than the due time (CheckDeadlines). Backends without
	// deadlines refuse it with ErrNotSupported (RefuseDeadlines).
	Deadline time.Time
}

// InsertResult is the outcome of one InsertParams.
type InsertResult struct {
	ID        int64
	Duplicate bool // the job was not inserted: ID is the live job holding UniqueKey
	// Replaced says a duplicate's conflict mode changed the waiting job
	// holding the key (its payload and due time); false when it was
	// running, or the mode is skip.
	Replaced bool
}

// ClaimParams says which jobs to reserve and for how long.
type ClaimParams struct {
	Queues []string      // at least one
	Max    int           // at least 1
	Lease  time.Duration // > 0
}

// OutcomeKind is how an attempt ended.
type OutcomeKind int

// The ways an attempt can end.
const (
	// OutcomeDone: the job succeeded and is deleted.
	OutcomeDone OutcomeKind = iota + 1
	// OutcomeRetry: back to pending, available at now + RetryDelay, with
	// last_error = Error and an AttemptError appended to the job's Errors.
	OutcomeRetry
	// OutcomeFail: moved to failed_jobs with Error, whatever attempts
	// remain, an AttemptError appended to its Errors.
	OutcomeFail
	// OutcomeDefer: back to pending, available at now + RetryDelay, with
	// the attempt un-counted (attempts-1) and last_error and releases as
	// they were; Error is ignored and Errors unchanged. It is for a holder that could not start
	// the job at all (a worker without a handler for its type during a
	// rolling deploy): the job loses nothing however often it is deferred,
	// and a worker that can run it takes it once it is due.
	OutcomeDefer
)

// String names the kind for logs.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeFail:
		return "fail"
	case OutcomeDefer:
		return "defer"
	}
	return "unknown"
}

// Outcome is the end of one attempt, fenced by Ref.
type Outcome struct {
	Ref        JobRef
	Kind       OutcomeKind
	RetryDelay time.Duration // OutcomeRetry and OutcomeDefer only; >= 0
	// Error is the attempt's error text (OutcomeRetry and OutcomeFail).
	// Backends store ErrorText(Error): any string is accepted, invalid
	// UTF-8, NUL bytes and a megabyte of panic stack included (see
	// PrepareOutcomes).
	Error string
	// Result (OutcomeDone only) is the JSON the handler recorded, at most
	// MaxResultBytes: a workflow task's dependants read it (see
	// Workflower), and a kept job (Keep) stores it with its finished row
	// in the same step as the completion, under the same fence
	// (FinishedJob.Result). A job neither kept nor a task's drops it.
	Result []byte
	// Keep (OutcomeDone only) keeps the job among the finished jobs as
	// completed instead of deleting it; only backends implementing
	// Retainer honour it, the others delete the job as usual.
	Keep bool
	// Duration is how long the handler ran, >= 0 (0: unknown), and Worker
	// names the holder that ran it (WorkerText applies; "" : unknown).
	// OutcomeRetry and OutcomeFail record them, with Error, as the
	// attempt's AttemptError; the other kinds ignore them.
	Duration time.Duration
	Worker   string
}

// CompleteParams is a batch of outcomes.
type CompleteParams struct {
	Outcomes []Outcome
}

// CompleteResult reports which outcomes (of JobComplete) or releases (of
// JobRelease) were skipped by the fence, and which ended their jobs
// cancelled instead; every other ref was applied.
type CompleteResult struct {
	Stale []JobRef
	// Cancelled lists the outcomes refused because the job's cancel was
	// requested: whatever the outcome, those jobs ended cancelled (see
	// Canceller). Only backends implementing Canceller fill it.
	Cancelled []JobRef
}

// ExtendLeaseParams extends the leases of held jobs.
type ExtendLeaseParams struct {
	Refs  []JobRef
	Lease time.Duration // > 0
}

// SweepParams bounds one lease sweep.
type SweepParams struct {
	Limit int // jobs handled per call; 0 means 1000
}

// SweepResult counts what a sweep did and names the jobs it moved.
type SweepResult struct {
	Rescued int // returned to pending
	Failed  int // moved to failed_jobs: attempts spent
	// Cancelled counts jobs whose cancel was requested and whose holder
	// let the lease run out: they ended cancelled (see Canceller). They
	// are not in Jobs.
	Cancelled int
	// Expired counts pending jobs whose deadline passed, moved to
	// failed_jobs (see DeadlineError); they are not in Failed.
	Expired int
	// Jobs lists every job the sweep moved, Rescued + Failed + Expired
	// of them, in no particular order.
	Jobs []SweptJob
}

// SweptJob is one job a lease sweep moved.
type SweptJob struct {
	Ref    JobRef // the attempt whose lease expired
	Queue  string
	Type   string
	Failed bool // moved to failed_jobs; false: back to pending
	// Expired: a pending job whose deadline passed before it was
	// claimed, moved to failed_jobs (Failed is set too) with
	// DeadlineError; Ref is its last claim's, or 0s for one never
	// claimed.
	Expired bool
}

// QueueStats is the count of jobs in each state for one queue.
type QueueStats struct {
	Queue     string
	Pending   int64 // due now
	Scheduled int64 // pending but available later (delayed or backing off)
	Reserved  int64
	Failed    int64
	// OldestDue is the AvailableAt of the pending job that has been due
	// longest (by the backend's clock), zero when no job is due: now minus
	// it is how far behind the queue's workers are.
	OldestDue time.Time
}

// FailedJob is one row of failed_jobs: a job that gave up.
type FailedJob struct {
	// ID is the row's own ID (failed_jobs.id, Redis's failed ID): it
	// orders FailedList and is its paging cursor (BeforeID), and nothing
	// else. It is not the job's ID and no user needs it: every call that
	// names a failed job takes JobID.
	ID int64
	// JobID is the job's ID, the one it had while live and has again once
	// replayed: the ID every surface shows and takes for a failed job.
	JobID       int64
	Queue       string
	Type        string
	Payload     []byte
	Attempts    int
	MaxAttempts int
	Priority    int
	Error       string
	// Errors is the history of the job's failed attempts, oldest first,
	// at most MaxAttemptErrors, the attempt that failed it last (its
	// Error is Error); kept through replays, so a job failed again after
	// a replay shows the attempts of both runs.
	Errors    []AttemptError
	UniqueKey string
	Metadata  map[string]string // as given at insert; nil when none
	CreatedAt time.Time         // when the job was first enqueued
	FailedAt  time.Time
	// WorkflowID and Task name the workflow task whose job failed, as
	// JobRow's do, so that whoever reads a failed job can find the
	// workflow it stopped: 0 and "" for a job that is no task's. Filled by
	// FailedGet and FailedList on backends that implement Workflower. Once
	// its workflow was pruned, Task may be "" while WorkflowID stays.
	WorkflowID int64
	Task       string
	// Key and Turn are the job's, kept so that a replay puts the job back
	// in its place among its key's jobs (see KeyController).
	Key  string
	Turn int64
}

// FailedFilter selects failed jobs. Zero fields match everything.
type FailedFilter struct {
	Queue string
	Type  string
	// FailedBefore, when set, matches only jobs that failed before it
	// (compared with failed_at, which the backend's clock wrote).
	FailedBefore time.Time
	// OlderThan, when > 0, matches only jobs that failed more than this
	// long ago by the backend's clock (the database's on a server), so a
	// client whose clock is off purges what the operator meant. Negative
	// is refused with ErrInvalidInput.
	OlderThan time.Duration
	// Key, when set, matches only the jobs of that key (see
	// KeyController): replaying a held key's failed jobs by filter puts
	// them back in their order.
	Key string
	// KeepHeld, when set, matches no job that may hold its key: a keyed
	// job of a queue whose keys are ordered under KeyHold (see
	// KeyController). Retention sets it, so pruning failed jobs never
	// lets a held key go on without an operator's word.
	KeepHeld bool
}

// FailedListParams pages through failed jobs, the last to fail first.
type FailedListParams struct {
	Filter FailedFilter
	Limit  int // 0 means 100
	// BeforeID, when > 0, lists only rows whose FailedJob.ID is lower:
	// the last row's ID of a page gets the next. It is a cursor, not a
	// job ID.
	BeforeID int64
}

// FailedReplayParams selects failed jobs to replay: those whose job IDs
// (FailedJob.JobID) are listed in IDs when it is non-empty, otherwise
// every job matching Filter.
type FailedReplayParams struct {
	IDs    []int64
	Filter FailedFilter
}

// ReplayResult counts a replay.
type ReplayResult struct {
	Replayed int
	// Skipped counts jobs left in failed_jobs: their unique key is held
	// by a live job, or they are tasks of a workflow a user cancelled.
	Skipped int
	// ByType counts the replayed jobs per queue and type (their counts add
	// up to Replayed), in no particular order, each queue and type once:
	// what a replay by filter moved, for metrics.
	ByType []TypeCount
}

// TypeCount is a number of jobs of one queue and type.
type TypeCount struct {
	Queue string
	Type  string
	Count int
}

// FailedPurgeParams selects failed jobs to delete: those whose job IDs
// (FailedJob.JobID) are listed in IDs when it is non-empty, otherwise every
// job matching Filter (the zero Filter purges all).
type FailedPurgeParams struct {
	IDs    []int64
	Filter FailedFilter
	// KeepNewest, when > 0, bounds the dead-letter queue by count rather
	// than by age: of the jobs matching Filter, the KeepNewest that failed
	// last (highest FailedJob.ID) are kept and the rest deleted, so a queue
	// that keeps failing cannot grow failed_jobs without limit. It cannot
	// be combined with IDs, and a negative value is refused; both are an
	// *InputError (Field "keep newest") wrapping ErrInvalidInput, with
	// nothing deleted. Zero, the default, deletes every match.
	KeepNewest int
}

// Sentinel errors. Backends wrap their driver's errors so callers can branch
// with errors.Is on these alone.
var (
	// ErrNotFound: no job or failed job with that ID.
	ErrNotFound = errors.New("not found")
	// ErrInvalidInput: a parameter was refused before anything was written.
	ErrInvalidInput = errors.New("invalid input")
	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("backend closed")
	// ErrUnavailable: the store could not be reached or opened (connection
	// refused, unreadable or corrupt file, database locked past the timeout).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrSchemaTooNew: the store's schema is newer than this build knows.
	// The error is a *SchemaError.
	ErrSchemaTooNew = errors.New("schema is newer than this jobq")
	// ErrNoSchema: opened with OpenOptions.Existing (or, on PostgreSQL,
	// at any call that finds jobq's tables missing), the store holds no
	// jobq schema (a mistyped path or schema name), or an older one that
	// needs migrating. Nothing was created; migrating the store (see
	// Migrator) creates it. The error is a *SchemaError.
	ErrNoSchema = errors.New("no jobq schema")
)

// SchemaError is the error of a store whose jobq schema is missing, older
// or newer than this build: it carries what was found and what is needed
// as fields, so a caller (a command-line tool, a deployment check) can say
// what to do in its own words without matching the text, and the library
// says nothing about commands a user may not have. It unwraps to
// ErrSchemaTooNew when Have > Want and to ErrNoSchema otherwise.
type SchemaError struct {
	// Store names what was opened, fit to show: "sqlite PATH", a
	// PostgreSQL schema and server, a Redis server and key prefix. It
	// never holds a URL's secrets.
	Store string
	// Have is the schema version found, 0 when the store holds no jobq
	// schema at all.
	Have int
	// Want is the version this build needs (and knows up to).
	Want int
	// Missing optionally says what was not there when Have is 0 ("the
	// file does not exist").
	Missing string
}

// Error says which store, what it holds and what this build needs.
func (e *SchemaError) Error() string {
	switch {
	case e.Have > e.Want:
		return fmt.Sprintf("%s: %v: it is at version %d, this jobq knows up to %d", e.Store, ErrSchemaTooNew, e.Have, e.Want)
	case e.Have > 0:
		return fmt.Sprintf("%s: %v: it is at version %d, this jobq needs %d; migrating the store upgrades it", e.Store, ErrNoSchema, e.Have, e.Want)
	}
	missing := e.Missing
	if missing == "" {
		missing = "none found"
	}
	return fmt.Sprintf("%s: %v: %s; migrating the store creates it (version %d)", e.Store, ErrNoSchema, missing, e.Want)
}

// Unwrap keeps errors.Is(err, ErrNoSchema) and errors.Is(err,
// ErrSchemaTooNew) working for callers that only branch.
func (e *SchemaError) Unwrap() error {
	if e.Have > e.Want {
		return ErrSchemaTooNew
	}
	return ErrNoSchema
}

// ReleasedError is the last_error (or failed_jobs error) of a job whose
// release counted its attempt (see Backend.JobRelease).
const ReleasedError = "interrupted by worker shutdown"

// MaxFreeReleases is how many times JobRelease gives one job back without
// counting its attempt.
const MaxFreeReleases = 3

// ChunkSize bounds the jobs one transaction of a replay or purge by filter
// touches.
const ChunkSize = 1000
