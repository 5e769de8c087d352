package jobq

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
)

// Job is what a handler sees of the job it runs.
type Job struct {
	ID          int64
	Queue       string
	Type        string
	Payload     json.RawMessage
	Attempt     int // 1 on the first try
	MaxAttempts int
	Priority    int
	CreatedAt   time.Time
	LastError   string // the previous attempt's error, empty on the first try
	// Metadata is what the enqueuer attached (see the Metadata option);
	// nil when nothing was. Handlers and middleware read it; changing it
	// changes nothing stored.
	Metadata map[string]string
	// Token is this claim's fencing token: no other claim of the job has
	// it, and every write of this attempt's outcome is refused unless the
	// job is still held under it. A handler whose side effects must be
	// fenced too (a write to another store, say) can carry it there.
	Token int64
	// WorkflowID and Task name the workflow and the task this job runs
	// for (see EnqueueWorkflow), so a handler shared by several tasks can
	// tell which one it is running; the worker's log lines carry them
	// too. 0 and "" for a job enqueued on its own.
	WorkflowID int64
	Task       string
	// Key is the key the job was enqueued with (see the Key option), ""
	// for none.
	Key string
}

func jobFromRow(r *backend.JobRow) *Job {
	return &Job{
		ID: r.ID, Queue: r.Queue, Type: r.Type, Payload: json.RawMessage(r.Payload),
		Attempt: r.Attempts, MaxAttempts: r.MaxAttempts, Priority: r.Priority,
		CreatedAt: r.CreatedAt, LastError: r.LastError, Metadata: r.Metadata, Token: r.Token,
		WorkflowID: r.WorkflowID, Task: r.Task, Key: r.Key,
	}
}

type jobCtxKey struct{}

// jobCtx is what a handler's context carries about the attempt it runs.
type jobCtx struct {
	job     *Job
	ref     backend.JobRef
	backend backend.Backend
	// completingInTx, when set, tells the lease extender that CompleteTx
	// is about to delete the job inside the handler's transaction (see
	// runner.LeaseExtender.MarkInTx): the heartbeat goes on, since the
	// transaction may roll back and the handler work on, but a heartbeat
	// that finds the row gone must not cancel the handler after its commit.
	completingInTx func()
	// completedInTx is set once CompleteTx deleted the job inside the
	// handler's transaction; the worker then writes no outcome of its own.
	completedInTx atomic.Bool
	// result is what SetResult recorded last (nil: none); the worker
	// sends it with the attempt's done outcome only (attachResult).
	result atomic.Pointer[[]byte]
	// maxResult is the worker's WorkerConfig.MaxResultBytes; 0 (a job
	// the sync backend runs inside Enqueue) is DefaultResultBytes.
	maxResult int
	// deps are the task's dependency outcomes once read (depsRead), kept
	// for the attempt so a fan-in reads them from the backend once.
	depsMu   sync.Mutex
	deps     []backend.TaskOutcome
	depsRead bool
	// reporter is the backend's ProgressReporter, nil without one (then
	// SetProgress does nothing), and log where a refused write is told.
	reporter backend.ProgressReporter
	log      *slog.Logger
	// progress writes SetProgress's values, started by the first
	// (progress.go); progressEnded is set when the attempt ends, after
	// which SetProgress writes nothing.
	progressMu    sync.Mutex
	progress      *progressWriter
	progressEnded bool
}

// JobFromContext returns the job a handler's context belongs to, for typed
// handlers that need its ID or attempt number. ok is false outside a handler.
func JobFromContext(ctx context.Context) (job *Job, ok bool) {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return nil, false
	}
	return jc.job, true
}
