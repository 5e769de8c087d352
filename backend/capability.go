package backend

import "context"

// Optional capabilities. The runtime discovers each with As, which sees
// through wrappers (see Unwrapper); it falls back as documented when a
// backend lacks one.

// Notifier is implemented by backends that can tell idle workers that jobs
// were inserted (in process for memory and sqlite, LISTEN/NOTIFY on
// Postgres). Without it, or when notifications are lost, workers find new
// jobs by polling at their PollInterval. A notification is only a hint: the
// worker still claims through JobClaim.
type Notifier interface {
	// Subscribe returns a channel that receives a value (coalesced: a
	// buffer of one, never blocking the sender) soon after jobs are inserted
	// or made available again (retry with no delay, release, rescue,
	// replay) in any of queues. cancel stops the subscription and must be
	// called; it is idempotent.
	Subscribe(queues []string) (ch <-chan struct{}, cancel func())
}

// Inline is implemented by the sync backend, which stores nothing and runs
// each job's handler inside JobInsertMany. The client binds its handler
// registry through SetRunner before the first insert. A backend without
// Inline stores jobs for workers to claim.
type Inline interface {
	// SetRunner installs the function that runs one job. The error it
	// returns is what JobInsertMany returns to the enqueuer.
	SetRunner(run func(ctx context.Context, job *JobRow) error)
}

// Migrator is implemented by backends with a versioned schema. Opening such
// a backend applies pending migrations unless told not to; Migrate lets the
// command line do it explicitly and report the version.
type Migrator interface {
	// Migrate applies every pending migration idempotently and returns the
	// schema version now in force. It returns ErrSchemaTooNew, changing
	// nothing, when the store's schema is newer than this build knows.
	Migrate(ctx context.Context) (version int, err error)
}

// TxInserter is implemented by SQL backends that can insert jobs inside a
// transaction the caller owns, so the jobs exist if and only if that
// transaction commits. tx is the driver's transaction type (for Postgres a
// pgx.Tx or a *sql.Tx); any other type is refused with ErrInvalidInput.
type TxInserter interface {
	JobInsertManyTx(ctx context.Context, tx any, params []InsertParams) ([]InsertResult, error)
}

// TxCompleter is implemented by SQL backends that let a handler mark its own
// job done inside its own transaction, so the handler's writes and the
// completion commit together. It returns ErrNotFound when the attempt is no
// longer held (the fence failed); the caller should then roll back.
type TxCompleter interface {
	JobCompleteTx(ctx context.Context, tx any, ref JobRef) error
}

// InsertCounter is implemented by backends that can tell how many jobs were
// ever inserted into the store: a count that only grows, which the admin
// dashboard differentiates into jobs enqueued per minute. Job IDs cannot
// stand in for it: on Redis they are timestamps, not a sequence.
type InsertCounter interface {
	// JobsInserted returns the number of jobs inserted into the store
	// since it was created (or, on Redis, since the build that added the
	// counter first wrote it). It never decreases: completing, failing,
	// cancelling, pruning or purging jobs leaves it as it is. It may run
	// ahead of the jobs actually written (an ID sequence's gaps: a rolled
	// back insert, a duplicate refused by its unique key on Postgres), so
	// only its growth over time means something. A replay of failed jobs
	// re-creates them under their old IDs and does not count: they were
	// counted when first inserted. It only reads.
	JobsInserted(ctx context.Context) (int64, error)
}

// FinishNotifier is implemented by backends that can tell a process that
// jobs finished (completed, failed or cancelled), so that Client.Wait
// looks again at once instead of at its next poll: in process for memory
// and sqlite (whose watcher also sees other processes' commits),
// LISTEN/NOTIFY on Postgres, PUBLISH on Redis. Like Notifier's, a
// notification is only a hint, coalesced, and may be lost: it does not
// say which jobs finished, and waiters keep polling.
type FinishNotifier interface {
	// SubscribeFinished returns a channel that receives a value
	// (coalesced: a buffer of one, never blocking the sender) soon after a
	// call that finished jobs committed, anywhere in the store: one hint
	// per JobComplete call that applied a done or fail outcome, per
	// Cancel, per LeaseSweep that failed or cancelled jobs, never one per
	// job, so the completion path pays nothing per job for it. cancel
	// stops the subscription and must be called; it is idempotent.
	SubscribeFinished() (ch <-chan struct{}, cancel func())
}

// FinishedTopic is the name under which backends file the subscriptions of
// FinishNotifier among their queues' (internal/wakeup.Set): it is no valid
// queue name ('!' cannot start one), so no queue's hint wakes a waiter and
// no worker hears of finished jobs.
const FinishedTopic = "!finished"

// Finishes reports whether outcomes finish any job (a done or a fail
// outcome), so a backend sends FinishNotifier's hint only for those calls:
// a batch of retries finishes nothing.
func Finishes(outcomes []Outcome) bool {
	for i := range outcomes {
		if k := outcomes[i].Kind; k == OutcomeDone || k == OutcomeFail {
			return true
		}
	}
	return false
}
