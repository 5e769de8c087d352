package jobq

import (
	"context"
	"log/slog"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/redact"
)

// logHooks logs, through log, the outcome of every attempt once the
// backend applied it (WorkerHooks.Written), and every job a lease sweep or
// the lease fence took from this worker, one line each with the job's id,
// type, queue and attempt, so any one job's history can be followed in the
// logs. An outcome line of a workflow task's job also carries workflow_id
// and task, so that a failed task's line says which workflow to look at;
// a plain job's lines carry neither (nor do the lines of a rescue or a
// refused outcome, which the sweep and the fence report without them).
// Payloads and metadata are never logged: they may hold secrets.
// Error texts are logged as they are stored (errorText: URL credentials
// masked, valid UTF-8, at most 16 KiB). Levels follow how much an operator
// should care:
//
//   - done: debug (the normal case, too many lines for info);
//   - retry: warn, with the error and the delay before the next attempt;
//   - moved to failed jobs: error, with the error;
//   - released on shutdown, or cancelled: info;
//   - rescued by the sweep: warn, or error when its attempts were spent
//     and it moved to failed jobs;
//   - outcome refused by the lease fence: warn (it is not written, so it
//     has no outcome line); abandoned after the worker stopped: the
//     worker's own warning.
//
// NewWorker installs it ahead of the configured hooks. Lines below the
// logger's level cost one Enabled check.
func logHooks(log *slog.Logger) WorkerHooks {
	ctx := context.Background()
	jobAttrs := func(j *Job) []slog.Attr {
		attrs := []slog.Attr{
			slog.Int64("job_id", j.ID), slog.String("type", j.Type),
			slog.String("queue", j.Queue), slog.Int("attempt", j.Attempt),
		}
		if j.WorkflowID != 0 {
			attrs = append(attrs, slog.Int64("workflow_id", j.WorkflowID), slog.String("task", j.Task))
		}
		return attrs
	}
	return WorkerHooks{
		Written: func(e Event) {
			var (
				level slog.Level
				msg   string
			)
			switch e.Kind {
			case EventDone:
				level, msg = slog.LevelDebug, "job done"
			case EventRetry:
				level, msg = slog.LevelWarn, "job failed; will retry"
			case EventFailed:
				level, msg = slog.LevelError, "job failed; moved to failed jobs"
			case EventReleased:
				level, msg = slog.LevelInfo, "job interrupted by shutdown; given back"
			case EventCancelled:
				level, msg = slog.LevelInfo, "job cancelled"
			case EventDeferred:
				// Paced lines at warn or error say it (worker_unhandled.go).
				level, msg = slog.LevelDebug, "job given back untouched: no handler for its type here"
			default:
				level, msg = slog.LevelDebug, "job "+e.Kind.String()
			}
			if !log.Enabled(ctx, level) {
				return
			}
			attrs := append(jobAttrs(e.Job), slog.Duration("duration", e.Duration))
			switch e.Kind {
			case EventRetry:
				attrs = append(attrs, slog.Int("max_attempts", e.Job.MaxAttempts), slog.Duration("retry_in", e.RetryDelay), slog.String("error", errorText(e.Err)))
			case EventDeferred:
				attrs = append(attrs, slog.Duration("due_in", e.RetryDelay))
			case EventFailed:
				attrs = append(attrs, slog.Int("max_attempts", e.Job.MaxAttempts), slog.String("error", errorText(e.Err)))
			}
			log.LogAttrs(ctx, level, msg, attrs...)
		},
		Rescued: func(e RescuedEvent) {
			level, msg := slog.LevelWarn, "job's lease expired; back to pending"
			if e.Failed {
				level, msg = slog.LevelError, "job's lease expired with its attempts spent; moved to failed jobs"
			}
			log.LogAttrs(ctx, level, msg, slog.Int64("job_id", e.JobID), slog.String("type", e.Type),
				slog.String("queue", e.Queue), slog.Int("attempt", e.Attempt))
		},
		Stale: func(e StaleEvent) {
			log.LogAttrs(ctx, slog.LevelWarn, "job's outcome refused: its lease was lost and another worker took it over",
				slog.Int64("job_id", e.JobID), slog.String("type", e.Type), slog.String("queue", e.Queue), slog.Int("attempt", e.Attempt))
		},
	}
}

// errorText is a handler's error as it is stored and logged: with the
// credentials of URLs in it masked (a failed webhook's error quotes its
// URL), then cut to backend.ErrorText's limit. Masked after the cut, a
// password the cut parted from the '@' that marks it stayed in view.
func errorText(err error) string { return backend.ErrorText(redact.Default.Text(err.Error())) }
