package backend

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Workflower is implemented by backends that run workflows: graphs of
// named tasks, each an ordinary job, where a task waits until the tasks it
// depends on have ended (sqlite, postgres, redis, memory).
//
// # The model
//
// A task is waiting while some of its dependencies have not ended; it has
// no job yet and nothing can claim it. When its last dependency ends, the
// same transaction (or script, or critical section) that ended that
// dependency inserts the task's job, pending, available after the task's
// Delay (or at its RunAt): there is no callback job, no poller and no
// window in which a crash or a second worker could lose or double a
// release. A task's job is claimed, retried, swept, cancelled and failed
// like any job; the moment it becomes terminal the task ends with it:
//
//   - done: the task succeeded, with the result its outcome carried
//     (Outcome.Result);
//   - moved to failed_jobs (a failed outcome, attempts spent by a retry,
//     a lease sweep or a release): the task failed;
//   - cancelled (JobCancel, or its holder reporting after a cancel): the
//     task was cancelled.
//
// Ending a task resolves each of its outgoing edges exactly once, guarded
// by the task's state (only a task with a live job can end), so a
// completion delivered twice resolves nothing the second time (the fence
// refuses it first anyway). An edge from a task that succeeded counts its
// dependant down; so does an edge with DepContinue from a task that failed
// or was cancelled. An edge with DepCancel (the default) from a task that
// failed or was cancelled cancels the dependant, and through its edges
// its own dependants, with a reason naming the task that caused it. No
// task waits forever.
//
// A workflow is running while any task is waiting or has a live job;
// then it is succeeded (every task succeeded) or failed. Replaying a
// failed task's job (FailedReplay) returns the workflow to running and, in
// the same step, returns the tasks its failure cancelled to waiting with
// their counts recomputed (or to pending when nothing is left to wait
// for). A workflow a user cancelled (WorkflowCancel) is cancelled for
// good: its failed tasks are not replayed (FailedReplay counts them in
// Skipped) and a task that ends after the cancel releases nothing.
type Workflower interface {
	// WorkflowInsert validates params (see ValidateWorkflow) and inserts
	// the workflow and all its tasks in one transaction, all or none;
	// the tasks without dependencies get their jobs at once. An invalid
	// workflow is an *InputError wrapping ErrInvalidInput and writes
	// nothing.
	WorkflowInsert(ctx context.Context, params WorkflowParams) (*WorkflowInserted, error)

	// WorkflowGet returns one workflow with its tasks (in insert order,
	// which is a topological order) or ErrNotFound.
	WorkflowGet(ctx context.Context, id int64) (*Workflow, error)

	// WorkflowList lists workflows, newest first (highest ID first),
	// without their tasks (Tasks is nil; Counts is filled).
	WorkflowList(ctx context.Context, params WorkflowListParams) ([]*Workflow, error)

	// WorkflowCancel cancels a running workflow: its waiting tasks and
	// the pending jobs of its tasks end cancelled at once, the reserved
	// ones are marked cancelling (their holders are told to stop, see
	// Canceller), and the workflow is cancelled. A workflow that is not
	// running is left as it is (Changed false). An unknown ID is
	// ErrNotFound.
	WorkflowCancel(ctx context.Context, id int64) (WorkflowCancelResult, error)

	// WorkflowDeps returns the outcomes of the dependencies of the task
	// whose job is jobID, in the task's dependency order: what a handler
	// reads its inputs from. ErrNotFound when jobID is not a task's job.
	WorkflowDeps(ctx context.Context, jobID int64) ([]TaskOutcome, error)

	// WorkflowStats counts workflows by state and the tasks waiting.
	WorkflowStats(ctx context.Context) (WorkflowStats, error)

	// WorkflowCheck recomputes, for every running workflow, each waiting
	// task's count of dependencies left and the workflow's count of
	// unfinished tasks, and returns every stored count that differs: an
	// alarm for a broken invariant, not a mechanism (release never
	// depends on it). It only reads.
	WorkflowCheck(ctx context.Context) ([]WorkflowDrift, error)

	// WorkflowPrune deletes workflows that ended more than olderThan ago
	// by the backend's clock, with their tasks, and returns how many:
	// those that succeeded or were cancelled, and those that failed and
	// can no longer be replayed, none of their tasks' jobs being among
	// the failed jobs (each was purged, or the workflow failed through a
	// cancelled job). Running workflows are never deleted, nor failed
	// ones with a task whose failed job is still there. olderThan must
	// be positive (an *InputError, Field "older than", otherwise).
	WorkflowPrune(ctx context.Context, olderThan time.Duration) (int, error)
}

// WorkflowTxInserter is implemented by SQL backends that can insert a
// workflow inside a transaction the caller owns (see TxInserter): the
// workflow exists if and only if that transaction commits.
type WorkflowTxInserter interface {
	WorkflowInsertTx(ctx context.Context, tx any, params WorkflowParams) (*WorkflowInserted, error)
}

// MaxWorkflowTasks is the most tasks one workflow may have.
const MaxWorkflowTasks = 10000

// MaxTaskNameBytes is the longest task name, in bytes.
const MaxTaskNameBytes = 128

// MaxResultBytes is the hard limit on a job's result (JSON): the most
// any backend accepts in one completion (Outcome.Result), whatever a
// worker's configured cap. Every store holds it with room to spare
// (SQLite BLOB and PostgreSQL json up to 1 GB, a Redis script argument
// up to 512 MB); it is kept at 1 MiB because a result is read whole with
// its job, and a workflow task reads all its dependencies' at once.
const MaxResultBytes = 1 << 20

// DefaultResultBytes is a worker's cap on a result when its
// configuration sets none: results are for small values (IDs, counts,
// references), not outputs.
const DefaultResultBytes = 64 << 10

// DepPolicy is what a dependant does when its dependency failed or was
// cancelled.
type DepPolicy int

// The failure policies of a dependency.
const (
	// DepCancel (the default): the dependant is cancelled, and so are
	// its own dependants that depend on it with DepCancel.
	DepCancel DepPolicy = iota
	// DepContinue: the dependency counts as done whatever its end; the
	// dependant runs and can read the dependency's outcome.
	DepContinue
)

// String names the policy.
func (p DepPolicy) String() string {
	if p == DepContinue {
		return "continue"
	}
	return "cancel"
}

// Dep is one dependency of a task: the name of a task of the same
// workflow and what to do if it does not succeed.
type Dep struct {
	Task   string
	Policy DepPolicy
}

// TaskParams is one task of a workflow to insert.
type TaskParams struct {
	// Name is unique within the workflow: 1 to MaxTaskNameBytes bytes of
	// UTF-8 without control characters.
	Name string
	// Job is the job the task runs once its dependencies have ended. A
	// Delay counts from the release; UniqueKey is refused (a task is
	// unique by its name within its workflow).
	Job InsertParams
	// Deps names the tasks this one waits for, each at most once.
	Deps []Dep
}

// WorkflowParams is a workflow to insert.
type WorkflowParams struct {
	// Name labels the workflow for people (listing, dashboard); it need
	// not be unique. At most MaxTaskNameBytes bytes of UTF-8.
	Name string
	// Tasks, 1 to MaxWorkflowTasks of them, in any order.
	Tasks []TaskParams
}

// WorkflowInserted is what WorkflowInsert wrote.
type WorkflowInserted struct {
	ID int64
	// Jobs maps the name of each task released at insert (those with no
	// dependencies) to its job's ID.
	Jobs map[string]int64
}

// WorkflowState is where a workflow is.
type WorkflowState string

// The states of a workflow.
const (
	WorkflowRunning   WorkflowState = "running"
	WorkflowSucceeded WorkflowState = "succeeded"
	WorkflowFailed    WorkflowState = "failed"
	WorkflowCancelled WorkflowState = "cancelled"
)

// TaskState is where a task is.
type TaskState string

// The states of a task.
const (
	// TaskWaiting: some dependencies have not ended; no job yet.
	TaskWaiting TaskState = "waiting"
	// TaskActive: the task's job is live (pending, scheduled or reserved;
	// JobGet tells which).
	TaskActive    TaskState = "active"
	TaskSucceeded TaskState = "succeeded"
	// TaskFailed: the task's job is in failed_jobs.
	TaskFailed    TaskState = "failed"
	TaskCancelled TaskState = "cancelled"
)

// Ended reports whether the state is terminal (until a replay).
func (s TaskState) Ended() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

// TaskCounts counts a workflow's tasks by state.
type TaskCounts struct {
	Waiting, Active, Succeeded, Failed, Cancelled int
}

// Workflow is one workflow.
type Workflow struct {
	ID         int64
	Name       string
	State      WorkflowState
	CreatedAt  time.Time
	FinishedAt time.Time // zero while running
	Counts     TaskCounts
	// Tasks, in insert order (a topological order); filled by
	// WorkflowGet only.
	Tasks []*WorkflowTask
}

// WorkflowTask is one task of a workflow as stored.
type WorkflowTask struct {
	Name     string
	State    TaskState
	JobID    int64 // 0 while waiting, and for a task cancelled before its release
	Queue    string
	Type     string
	Priority int
	Deps     []Dep
	// WaitingOn names the dependencies that have not ended, in Deps
	// order; empty unless the task is waiting.
	WaitingOn []string
	// Result is the JSON the task's handler recorded (succeeded only;
	// nil when none).
	Result []byte
	// Reason says why the task failed (the job's error) or was cancelled
	// (`dependency "X" failed`, "workflow cancelled", ...).
	Reason     string
	FinishedAt time.Time // zero unless ended
}

// TaskOutcome is how one dependency of a task ended (or not).
type TaskOutcome struct {
	Name   string
	Policy DepPolicy
	State  TaskState
	Result []byte // nil unless succeeded with a result
	Reason string
}

// WorkflowListParams pages through workflows, newest first.
type WorkflowListParams struct {
	State    WorkflowState // "" for all
	Limit    int           // 0 means 100
	BeforeID int64         // when > 0, only IDs lower than this
}

// WorkflowCancelResult says what WorkflowCancel did.
type WorkflowCancelResult struct {
	// Changed is false when the workflow had already ended (State says
	// how).
	Changed bool
	State   WorkflowState // the workflow's state after the call
	// Cancelled counts the tasks cancelled at once (waiting, or with a
	// pending job); Requested the running ones told to stop.
	Cancelled, Requested int
}

// WorkflowStats counts workflows by state, and the tasks waiting in
// running workflows.
type WorkflowStats struct {
	Running, Succeeded, Failed, Cancelled int64
	TasksWaiting                          int64
}

// WorkflowDrift is one stored count that differs from its recomputation.
type WorkflowDrift struct {
	WorkflowID int64
	Task       string // "" for the workflow's own unfinished count
	Stored     int
	Want       int
}

// String describes the drift for an operator.
func (d WorkflowDrift) String() string {
	if d.Task == "" {
		return fmt.Sprintf("workflow %d: %d unfinished tasks stored, %d recomputed", d.WorkflowID, d.Stored, d.Want)
	}
	return fmt.Sprintf("workflow %d task %q: waits on %d dependencies stored, %d recomputed", d.WorkflowID, d.Task, d.Stored, d.Want)
}

// CancelReasonWorkflow is the Reason of a task cancelled by
// WorkflowCancel.
const CancelReasonWorkflow = "workflow cancelled"

// DepCancelReason is the Reason of a task cancelled because dep (with
// DepCancel) failed or was cancelled.
func DepCancelReason(dep string, depState TaskState) string {
	return fmt.Sprintf("dependency %q %s", dep, depState)
}

// ValidateWorkflow checks a workflow before anything is written and
// returns its tasks' indexes in a topological order (every task after its
// dependencies; among tasks free to go, the given order), which backends
// store tasks in. It refuses, as an *InputError: no tasks or more than
// MaxWorkflowTasks; a bad workflow or task name; a duplicate task name; a
// dependency on an unknown task, on itself, or twice; a cycle (naming a
// task on it); a task's job that ValidateInsert refuses; a task with a
// unique key.
func ValidateWorkflow(p WorkflowParams) ([]int, error) {
	if len(p.Tasks) == 0 {
		return nil, &InputError{Field: "workflow", Reason: "a workflow needs at least one task"}
	}
	if len(p.Tasks) > MaxWorkflowTasks {
		return nil, &InputError{Field: "workflow", Reason: fmt.Sprintf("%d tasks: at most %d in one workflow", len(p.Tasks), MaxWorkflowTasks)}
	}
	if err := validateLabel("workflow name", p.Name, true); err != nil {
		return nil, err
	}
	index := make(map[string]int, len(p.Tasks))
	for i, t := range p.Tasks {
		if err := validateLabel("task name", t.Name, false); err != nil {
			return nil, err
		}
		if _, dup := index[t.Name]; dup {
			return nil, &InputError{Field: "task name", Reason: fmt.Sprintf("%q appears twice: task names are unique within a workflow", t.Name)}
		}
		index[t.Name] = i
	}
	for _, t := range p.Tasks {
		if t.Job.UniqueKey != "" {
			return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: "a task cannot have a unique key: it is unique by its name in its workflow"}
		}
		if !t.Job.Deadline.IsZero() {
			// A task's job is made when its dependencies end, and a
			// task that expired would end its workflow failed with no
			// attempt made: refused rather than half honoured.
			return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: "a task cannot have a deadline"}
		}
		if err := ValidateInsert(t.Job); err != nil {
			return nil, fmt.Errorf("task %s: %w", quoteName(t.Name), err)
		}
	}
	// Kahn's algorithm, taking free tasks in the given order.
	waits := make([]int, len(p.Tasks))
	out := make([][]int, len(p.Tasks))
	for i, t := range p.Tasks {
		seen := make(map[string]bool, len(t.Deps))
		for _, d := range t.Deps {
			j, ok := index[d.Task]
			switch {
			case !ok:
				return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: fmt.Sprintf("depends on %s, which is not a task of this workflow", quoteName(d.Task))}
			case j == i:
				return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: "depends on itself"}
			case seen[d.Task]:
				return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: fmt.Sprintf("depends on %s twice", quoteName(d.Task))}
			case d.Policy != DepCancel && d.Policy != DepContinue:
				return nil, &InputError{Field: "task " + quoteName(t.Name), Reason: fmt.Sprintf("unknown policy %d for dependency %s", d.Policy, quoteName(d.Task))}
			}
			seen[d.Task] = true
			waits[i]++
			out[j] = append(out[j], i)
		}
	}
	order := make([]int, 0, len(p.Tasks))
	// A min-heap would keep the given order exactly; a queue of free
	// tasks in index order, refilled in edge order, is topological and
	// enough.
	var free []int
	for i := range p.Tasks {
		if waits[i] == 0 {
			free = append(free, i)
		}
	}
	for len(free) > 0 {
		i := free[0]
		free = free[1:]
		order = append(order, i)
		for _, j := range out[i] {
			if waits[j]--; waits[j] == 0 {
				free = append(free, j)
			}
		}
	}
	if len(order) < len(p.Tasks) {
		for i := range p.Tasks {
			if waits[i] > 0 {
				return nil, &InputError{Field: "workflow", Reason: fmt.Sprintf("the dependencies form a cycle through task %s", quoteName(p.Tasks[i].Name))}
			}
		}
	}
	return order, nil
}

// ValidateResult refuses a result over MaxResultBytes or that is not
// JSON in UTF-8: what every backend accepts in a completion.
func ValidateResult(result []byte) error {
	return ValidateResultCap(result, MaxResultBytes)
}

// ValidateResultCap refuses a result over limit bytes or that is not JSON
// in UTF-8: a worker checks its own cap (at most MaxResultBytes) when the
// handler records the result, long before the completion carries it.
func ValidateResultCap(result []byte, limit int) error {
	if result == nil {
		return nil
	}
	if len(result) > limit {
		return &InputError{Field: "result", Reason: fmt.Sprintf("%d bytes: a job's result is at most %d bytes; store big outputs elsewhere and return a reference", len(result), limit)}
	}
	return validateJSON("result", result)
}

func validateLabel(field, s string, mayBeEmpty bool) error {
	switch {
	case s == "" && !mayBeEmpty:
		return &InputError{Field: field, Reason: "empty"}
	case len(s) > MaxTaskNameBytes:
		return &InputError{Field: field, Reason: fmt.Sprintf("%d bytes: at most %d", len(s), MaxTaskNameBytes)}
	case !utf8.ValidString(s):
		return &InputError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return &InputError{Field: field, Reason: fmt.Sprintf("%q holds a control character", s)}
		}
	}
	return nil
}

func quoteName(s string) string { return fmt.Sprintf("%q", s) }

// ValidateWorkflowPrune refuses an age that is not positive.
func ValidateWorkflowPrune(olderThan time.Duration) error {
	if olderThan <= 0 {
		return &InputError{Field: "older than", Reason: fmt.Sprintf("%s: must be positive", olderThan)}
	}
	return nil
}
