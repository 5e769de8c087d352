package jobq

import (
	"context"
	"encoding/json"
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
}

func jobFromRow(r *backend.JobRow) *Job {
	return &Job{
		ID: r.ID, Queue: r.Queue, Type: r.Type, Payload: json.RawMessage(r.Payload),
		Attempt: r.Attempts, MaxAttempts: r.MaxAttempts, Priority: r.Priority,
		CreatedAt: r.CreatedAt, LastError: r.LastError, Metadata: r.Metadata,
	}
}

type jobCtxKey struct{}

// jobCtx is what a handler's context carries about the attempt it runs.
type jobCtx struct {
	job     *Job
	ref     backend.JobRef
	backend backend.Backend
	// stopHeartbeat, when set, stops extending the job's lease: CompleteTx
	// calls it before deleting the job, so a heartbeat that finds the row
	// gone cannot cancel the handler in the middle of its commit.
	stopHeartbeat func()
	// completedInTx is set once CompleteTx deleted the job inside the
	// handler's transaction; the worker then writes no outcome of its own.
	completedInTx atomic.Bool
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
