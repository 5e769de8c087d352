package jobq

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/runner"
)

// ErrJobCancelled is the cause of a handler's context cancelled because
// its job was cancelled (Inspector.Cancel, 'jobq cancel'); context.Cause
// tells it apart. The handler should stop: whatever it returns, the job
// ends cancelled, never retried nor failed.
var ErrJobCancelled = runner.ErrJobCancelled

// Retention says how long a worker's backend keeps finished jobs, and
// bounds the failed jobs. Jobs are kept apart from the live ones (see
// backend.Retainer), so keeping them costs the claim nothing. The prune
// loop runs in every worker, but one process at a time prunes (the prune
// turn); workers sharing a backend should share one Retention, since the
// one holding the turn applies its own.
//
// Completed jobs are deleted at once unless Completed, or their type's
// TypeRetention.Completed, is set. Cancelled
// jobs are always recorded when cancelled (it is what lets a second cancel
// and the job's holder tell "cancelled" from "unknown") and pruned after
// Cancelled. A job its handler completed inside its own transaction
// (CompleteTx) is deleted by that transaction, never kept.
type Retention struct {
	// Completed keeps completed jobs this long, listable as "completed".
	// Zero (the default) deletes them at once, as before retention, but
	// those of the types Types keeps.
	Completed time.Duration
	// Cancelled keeps cancelled jobs this long. Defaults to 24h.
	Cancelled time.Duration
	// FailedMaxAge, when set, deletes failed jobs that failed longer ago.
	FailedMaxAge time.Duration
	// FailedMaxCount, when set, keeps only the newest this many failed
	// jobs.
	FailedMaxCount int
	// PruneInterval is how often the prune loop runs. Defaults to 1m.
	PruneInterval time.Duration
	// Types overrides what happens to completed jobs of some job types
	// (river#673): a chatty type whose results nobody reads need not
	// fill the kept jobs that Completed keeps for the others, and a
	// report's result may be kept for weeks while a ping's goes within
	// the hour.
	Types map[string]TypeRetention
}

// TypeRetention is one job type's retention (Retention.Types): set one of
// its fields.
type TypeRetention struct {
	// DeleteAtOnce deletes the type's completed jobs at their completion,
	// as with retention off, even when Completed keeps the others'. Wait
	// on such a job answers ErrJobGone once it completes.
	DeleteAtOnce bool
	// Completed keeps the type's completed jobs this long instead of
	// Retention.Completed, longer or shorter; with Retention.Completed
	// zero, this type's are kept and the others' deleted at once. The
	// prune takes each type by its own age.
	Completed time.Duration
}

// keepCompleted reports whether a completed job of type typ is kept
// (backend.Outcome.Keep).
func (r *Retention) keepCompleted(typ string) bool {
	if tr, ok := r.Types[typ]; ok {
		return tr.Completed > 0
	}
	return r.Completed > 0
}

// completedTypes is the ages of the types kept an age of their own, for
// the prune (backend.FinishedPruneParams.Types); nil for none. A type
// deleted at once is pruned with the others, which prunes the jobs it
// kept before it was.
func (r *Retention) completedTypes() map[string]time.Duration {
	var out map[string]time.Duration
	for typ, tr := range r.Types {
		if tr.Completed > 0 {
			if out == nil {
				out = map[string]time.Duration{}
			}
			out[typ] = tr.Completed
		}
	}
	return out
}

// defaultCancelledRetention is how long cancelled jobs are kept by default.
const defaultCancelledRetention = 24 * time.Hour

// defaultWorkflowRetention is how long ended workflows are kept by default
// (WorkerConfig.WorkflowRetention).
const defaultWorkflowRetention = 7 * 24 * time.Hour

// withDefaults checks r and fills its defaults.
func (r Retention) withDefaults() (Retention, error) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Completed", r.Completed}, {"Cancelled", r.Cancelled}, {"FailedMaxAge", r.FailedMaxAge}, {"PruneInterval", r.PruneInterval}} {
		if d.v < 0 {
			return r, fmt.Errorf("%w: WorkerConfig.Retention.%s %s is negative", ErrInvalidInput, d.name, d.v)
		}
	}
	if r.FailedMaxCount < 0 {
		return r, fmt.Errorf("%w: WorkerConfig.Retention.FailedMaxCount %d is negative", ErrInvalidInput, r.FailedMaxCount)
	}
	for typ, tr := range r.Types {
		switch {
		case typ == "":
			return r, fmt.Errorf("%w: WorkerConfig.Retention.Types: a job type is empty", ErrInvalidInput)
		case tr.Completed < 0:
			return r, fmt.Errorf("%w: WorkerConfig.Retention.Types[%q].Completed %s is negative", ErrInvalidInput, typ, tr.Completed)
		case tr.DeleteAtOnce && tr.Completed > 0:
			return r, fmt.Errorf("%w: WorkerConfig.Retention.Types[%q] sets both DeleteAtOnce and Completed: set one", ErrInvalidInput, typ)
		case !tr.DeleteAtOnce && tr.Completed == 0:
			// The zero value says nothing: most likely a field meant to
			// be set was not.
			return r, fmt.Errorf("%w: WorkerConfig.Retention.Types[%q] says nothing: set DeleteAtOnce or Completed", ErrInvalidInput, typ)
		}
	}
	// The worker reads it for every completion: a copy the caller
	// cannot change under it.
	r.Types = maps.Clone(r.Types)
	if r.Cancelled == 0 {
		r.Cancelled = defaultCancelledRetention
	}
	if r.PruneInterval == 0 {
		r.PruneInterval = time.Minute
	}
	return r, nil
}

// asked reports whether r asks for more than the defaults: something a
// backend without retention cannot do.
func (r Retention) asked() bool {
	return r.Completed > 0 || len(r.completedTypes()) > 0 || r.FailedMaxAge > 0 || r.FailedMaxCount > 0
}

// pruner returns the worker's prune loop, nil when b keeps nothing. It
// prunes ended workflows too when b runs them (every backend that does
// keeps finished jobs, so has the prune turn).
func (w *Worker) pruner() *runner.Pruner {
	ret, ok := backend.As[backend.Retainer](w.b)
	if !ok {
		return nil
	}
	r := w.cfg.Retention
	return runner.NewPruner(ret, w.b, runner.PrunerConfig{
		Interval: r.PruneInterval, Holder: pruneHolder(),
		Completed: r.Completed, CompletedTypes: r.completedTypes(), Cancelled: r.Cancelled,
		FailedMaxAge: r.FailedMaxAge, FailedMaxCount: r.FailedMaxCount,
		Workflows: max(0, w.cfg.WorkflowRetention),
	}, w.log)
}

// pruneHolder names this worker for the prune turn: host, pid and a random
// part, so two workers in one process are two holders.
func pruneHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
