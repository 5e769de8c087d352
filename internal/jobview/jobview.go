// Package jobview is how jobq shows a job as JSON: the admin API and the
// command line's --json print the same objects, with secrets masked (see
// internal/redact), so a script reads one shape whichever it asks.
package jobview

import (
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/redact"
)

// Job is a job in any state, as GET /api/v1/jobs/{id} shows it; a failed
// one has the fuller view Failed too.
type Job struct {
	ID          int64           `json:"id"`
	State       jobq.JobState   `json:"state"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	CreatedAt   time.Time       `json:"created_at"`
	AvailableAt *time.Time      `json:"available_at,omitempty"`
	ReservedAt  *time.Time      `json:"reserved_at,omitempty"`
	LeaseUntil  *time.Time      `json:"lease_until,omitempty"`
	// Deadline is the latest time a live job may start (jobq.Deadline),
	// left out for none.
	Deadline   *time.Time `json:"deadline,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	// Errors is the job's failed attempts, oldest first: shown for one
	// job (Live), left out of lists, whose pages would carry up to
	// backend.MaxAttemptErrors error texts per job.
	Errors    []AttemptError `json:"errors,omitempty"`
	UniqueKey string         `json:"unique_key,omitempty"`
	// Key is the job's key (see jobq.Key), left out for none, so that a
	// job leads to its key's page and rules.
	Key      string            `json:"key,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// WorkflowID and Task name the workflow task whose job this is (left
	// out for a plain job, and for a finished one, whose row does not say).
	WorkflowID int64  `json:"workflow_id,omitempty"`
	Task       string `json:"task,omitempty"`
	// Result is the JSON a completed job's handler recorded (SetResult),
	// masked like the payload: shown for one kept job, left out for none
	// and of lists, whose pages would carry up to a result cap per job.
	Result json.RawMessage `json:"result,omitempty"`
	// Progress is what a running job's handler last reported
	// (jobq.SetProgress), left out when it reported none: shown in lists
	// too, since it is short and the running list draws it.
	Progress *Progress `json:"progress,omitempty"`
}

// Progress is a running job's progress (backend.Progress), its message
// masked like an error text.
type Progress struct {
	Percent int       `json:"percent"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// AttemptError is one failed attempt of a job (backend.AttemptError), its
// error masked like the job's.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// DurationMS is how long the handler ran, in milliseconds (fractions
	// down to the microsecond); 0 when unknown (an expired lease).
	DurationMS float64 `json:"duration_ms"`
	Worker     string  `json:"worker"`
	Error      string  `json:"error"`
}

// Failed is a job in the failed jobs. Its ID is the job's, the one it had
// while live and has again once replayed, which every command and route
// takes: the failed row's own ID is a paging cursor, never shown.
type Failed struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	Error       string          `json:"error"`
	// Errors is as Job's: every failed attempt for one failed job
	// (FailedJob), none in lists.
	Errors    []AttemptError `json:"errors,omitempty"`
	UniqueKey string         `json:"unique_key,omitempty"`
	// Key is as Job's: a held key's failed head names the key it holds.
	Key       string            `json:"key,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	FailedAt  time.Time         `json:"failed_at"`
	// WorkflowID and Task name the workflow task whose job failed (left
	// out for a plain job), so that a failed task leads to its workflow.
	WorkflowID int64  `json:"workflow_id,omitempty"`
	Task       string `json:"task,omitempty"`
}

// Errors is errs as AttemptError shows them, each error masked by m; nil
// for none.
func Errors(m *redact.Masker, errs []backend.AttemptError) []AttemptError {
	if len(errs) == 0 {
		return nil
	}
	out := make([]AttemptError, len(errs))
	for i, e := range errs {
		out[i] = AttemptError{
			Attempt: e.Attempt, At: e.At, DurationMS: float64(e.Duration.Microseconds()) / 1000,
			Worker: e.Worker, Error: m.Text(e.Error),
		}
	}
	return out
}

// Live is a pending, scheduled or reserved job in state (the caller's
// reading of it: pending and scheduled differ only by the clock), or
// cancelling, whatever state says, when its cancel was requested.
func Live(m *redact.Masker, state jobq.JobState, j *jobq.JobRow) Job {
	if j.Status == jobq.StateCancelling {
		state = jobq.StateCancelling
	}
	return Job{
		ID: j.ID, State: state, Queue: j.Queue, Type: j.Type, Payload: Payload(m, j.Payload),
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, Priority: j.Priority,
		CreatedAt: j.CreatedAt, AvailableAt: timePtr(j.AvailableAt), ReservedAt: timePtr(j.ReservedAt),
		LeaseUntil: timePtr(j.LeaseUntil), Deadline: timePtr(j.Deadline), LastError: m.Text(j.LastError), Errors: Errors(m, j.Errors),
		UniqueKey: j.UniqueKey, Key: j.Key, Metadata: m.Map(j.Metadata), WorkflowID: j.WorkflowID, Task: j.Task,
		Progress: progressOf(m, j.Progress),
	}
}

// progressOf is p as Progress shows it; nil for none.
func progressOf(m *redact.Masker, p *backend.Progress) *Progress {
	if p == nil {
		return nil
	}
	return &Progress{Percent: p.Percent, Message: m.Text(p.Message), At: p.At}
}

// FailedAsJob is a failed job as one job among the others: its error as
// last_error, the time it failed as finished_at.
func FailedAsJob(m *redact.Masker, f *jobq.FailedJob) Job {
	return Job{
		ID: f.JobID, State: jobq.StateFailed, Queue: f.Queue, Type: f.Type, Payload: Payload(m, f.Payload),
		Attempts: f.Attempts, MaxAttempts: f.MaxAttempts, Priority: f.Priority,
		CreatedAt: f.CreatedAt, FinishedAt: timePtr(f.FailedAt), LastError: m.Text(f.Error),
		Errors: Errors(m, f.Errors), UniqueKey: f.UniqueKey, Key: f.Key, Metadata: m.Map(f.Metadata),
		WorkflowID: f.WorkflowID, Task: f.Task,
	}
}

// Finished is a kept completed or cancelled job, with its result.
func Finished(m *redact.Masker, j *jobq.FinishedJob) Job {
	out := Job{
		ID: j.ID, State: j.State, Queue: j.Queue, Type: j.Type, Payload: Payload(m, j.Payload),
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, Priority: j.Priority,
		CreatedAt: j.CreatedAt, FinishedAt: timePtr(j.FinishedAt), LastError: m.Text(j.LastError),
		UniqueKey: j.UniqueKey, Key: j.Key, Metadata: m.Map(j.Metadata),
	}
	if len(j.Result) > 0 {
		out.Result = Payload(m, j.Result)
	}
	return out
}

// FailedJob is f as Failed.
func FailedJob(m *redact.Masker, f *jobq.FailedJob) Failed {
	return Failed{
		ID: f.JobID, Queue: f.Queue, Type: f.Type, Payload: Payload(m, f.Payload),
		Attempts: f.Attempts, MaxAttempts: f.MaxAttempts, Priority: f.Priority, Error: m.Text(f.Error),
		Errors: Errors(m, f.Errors), UniqueKey: f.UniqueKey, Key: f.Key, Metadata: m.Map(f.Metadata), CreatedAt: f.CreatedAt, FailedAt: f.FailedAt,
		WorkflowID: f.WorkflowID, Task: f.Task,
	}
}

// LiveList is rows, all listed as state, as Live shows them but without
// their Errors.
func LiveList(m *redact.Masker, state jobq.JobState, rows []*jobq.JobRow) []Job {
	return each(rows, func(j *jobq.JobRow) Job {
		c := *j // not masked to be dropped
		c.Errors = nil
		return Live(m, state, &c)
	})
}

// FinishedList is rows as Finished shows them but without their results.
func FinishedList(m *redact.Masker, rows []*jobq.FinishedJob) []Job {
	return each(rows, func(j *jobq.FinishedJob) Job {
		c := *j // not masked to be dropped
		c.Result = nil
		return Finished(m, &c)
	})
}

// FailedList is rows as FailedJob shows them but without their Errors.
func FailedList(m *redact.Masker, rows []*jobq.FailedJob) []Failed {
	return each(rows, func(f *jobq.FailedJob) Failed {
		c := *f
		c.Errors = nil
		return FailedJob(m, &c)
	})
}

// each is view applied to every row, in order.
func each[R, V any](rows []R, view func(R) V) []V {
	out := make([]V, len(rows))
	for i, r := range rows {
		out[i] = view(r)
	}
	return out
}

// Payload is a payload masked, as JSON an encoder accepts: null when
// empty, and a string when it is not JSON (a store written by hand).
func Payload(m *redact.Masker, raw []byte) json.RawMessage {
	masked := m.JSON(raw)
	if len(masked) == 0 {
		return json.RawMessage("null")
	}
	if !json.Valid(masked) {
		b, _ := json.Marshal(string(masked))
		return b
	}
	return masked
}

// timePtr is nil for the zero time, so it is left out.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
