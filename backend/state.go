package backend

import (
	"fmt"
	"strings"
)

// JobState is where a job is in its lifecycle: the one vocabulary of job
// states that the backends, the Inspector, the admin API and the command
// line share, so a state read from a row, a query parameter or a flag is
// the same value everywhere. Its values are the words users see and
// type. How a store records a state (the jobs table's status column, a
// Redis hash field, a due time in the future) is its own: each backend
// maps what it stores to and from these values.
//
// Not every field or call takes every state: JobRow.Status holds the
// stored status only (StatePending, StateReserved, StateCancelling: a
// pending job due later is scheduled only by the clock, see
// JobRow.Status); JobList lists pending, scheduled or reserved jobs
// (ValidateLiveState); FinishedJob.State, FinishedList and FinishedPrune
// take completed or cancelled (ValidateKeptState); a failed job is a row
// of failed_jobs, found by its job ID with FailedGet and listed with
// FailedList, which has no state to filter by.
//
// Workflows and their tasks have their own vocabularies, WorkflowState and
// TaskState: a task's state says where the task is in its workflow, not
// where its job is.
type JobState string

// The states of a job.
const (
	// StatePending: due now, waiting for a worker.
	StatePending JobState = "pending"
	// StateScheduled: pending but due later (delayed, or backing off
	// before a retry). Stored as pending: only the due time tells it
	// apart, so it moves to StatePending without a write.
	StateScheduled JobState = "scheduled"
	// StateReserved: claimed by a worker and running under a lease.
	StateReserved JobState = "reserved"
	// StateCancelling: reserved, and its cancel was requested (see
	// Canceller). Listings count it as reserved, since it still runs and
	// holds its unique key until its holder stops.
	StateCancelling JobState = "cancelling"
	// StateFailed: moved to failed_jobs, its attempts spent or its error
	// permanent, until a replay makes it pending again.
	StateFailed JobState = "failed"
	// StateCompleted: done, and kept by retention (Outcome.Keep).
	StateCompleted JobState = "completed"
	// StateCancelled: cancelled, and kept so a second cancel and the
	// job's holder can tell it from a job that never existed.
	StateCancelled JobState = "cancelled"
)

// jobStates is every JobState in lifecycle order, the order ParseJobState
// lists them in.
var jobStates = []JobState{StatePending, StateScheduled, StateReserved, StateCancelling, StateFailed, StateCompleted, StateCancelled}

// ParseJobState reads a job state as users type it (exactly its name:
// "pending", "scheduled", …). An unknown name is an *InputError listing
// the valid ones. Which states a call takes is that call's check
// (ValidateLiveState, ValidateKeptState), not the parser's.
func ParseJobState(s string) (JobState, error) {
	for _, st := range jobStates {
		if s == string(st) {
			return st, nil
		}
	}
	names := make([]string, len(jobStates))
	for i, st := range jobStates {
		names[i] = string(st)
	}
	last := len(names) - 1
	return "", &InputError{Field: "state", Reason: fmt.Sprintf("%q: want %s or %s", s, strings.Join(names[:last], ", "), names[last])}
}

// ValidateLiveState refuses a state JobList does not list: it lists
// pending, scheduled and reserved jobs (cancelling ones among the
// reserved).
func ValidateLiveState(s JobState) error {
	switch s {
	case StatePending, StateScheduled, StateReserved:
		return nil
	}
	return &InputError{Field: "state", Reason: fmt.Sprintf("%q: want pending, scheduled or reserved", s)}
}

// ValidateKeptState refuses a state that is not an end a finished job is
// kept in: completed or cancelled (FinishedList, FinishedPrune).
func ValidateKeptState(s JobState) error {
	if s != StateCompleted && s != StateCancelled {
		return &InputError{Field: "state", Reason: fmt.Sprintf("%q: want %q or %q", s, StateCompleted, StateCancelled)}
	}
	return nil
}
