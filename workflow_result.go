package jobq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jobq/jobq/backend"
)

// ErrNotTask is returned, wrapped, by Dependencies and DependencyResult
// when the running job is not a workflow task: it has no dependencies to
// read, which is a wiring mistake (a handler written for a task was given
// a plain job) rather than a transient failure.
var ErrNotTask = errors.New("the job is not a workflow task")

// ErrNoResult is returned, wrapped, by DependencyResult when the
// dependency has no result to read: it failed, was cancelled, or
// succeeded without calling SetResult. A handler run with AfterEnded
// checks for it to tell a branch that failed from one that delivered.
var ErrNoResult = errors.New("no result")

// SetResult records v (marshalled to JSON; json.RawMessage and []byte are
// taken as JSON text) as the result of the running attempt. If the
// handler then returns nil, the result is stored with the successful
// completion, in the same backend step and fenced by the same claim: for
// a workflow task with the task, where the tasks depending on it read it
// (DependencyResult); for any job, with the completed job when the worker
// keeps completed jobs (WorkerConfig.Retention.Completed), where
// Inspector.Job, `jobq jobs show`, the admin API and the dashboard show
// it until the job is pruned. Without that retention a completed job is
// deleted at once and a plain job's result with it: only a task's
// dependants ever see it. If the attempt fails or retries, the result is
// dropped, so a result always belongs to the attempt that succeeded. The
// last call wins; nil clears it. Results are for small values (IDs,
// counts, references): one over the worker's WorkerConfig.MaxResultBytes
// (default DefaultResultBytes, 64 KiB) is an error wrapping
// ErrInvalidInput and records nothing (store big outputs elsewhere and
// return a reference).
//
// It is an error outside a handler's context, and after CompleteTx, which
// completes the job in the handler's own transaction with no result.
func SetResult(ctx context.Context, v any) error {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return fmt.Errorf("%w: SetResult must be called with a handler's context", ErrInvalidInput)
	}
	if jc.completedInTx.Load() {
		return fmt.Errorf("set result of job %d: %w: the job was completed by CompleteTx, which records no result", jc.ref.ID, ErrInvalidInput)
	}
	if v == nil {
		jc.result.Store(nil)
		return nil
	}
	b, err := marshalResult(v)
	if err == nil {
		err = backend.ValidateResultCap(b, cmp.Or(jc.maxResult, DefaultResultBytes))
	}
	if err != nil {
		return fmt.Errorf("set result of job %d: %w", jc.ref.ID, err)
	}
	jc.result.Store(&b)
	return nil
}

func marshalResult(v any) ([]byte, error) {
	switch r := v.(type) {
	case json.RawMessage:
		return append([]byte(nil), r...), nil // the caller may reuse its buffer
	case []byte:
		return append([]byte(nil), r...), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &backend.InputError{Field: "result", Reason: "marshal to JSON: " + err.Error()}
	}
	return b, nil
}

// Dependencies returns how each dependency of the running task ended, in
// the order they were declared: what a task run with AfterEnded inspects
// to see which branches failed, and why (TaskOutcome.Reason). The backend
// is asked once per attempt; later calls return the same outcomes. A job
// that is not a workflow task is an error wrapping ErrNotTask.
func Dependencies(ctx context.Context) ([]TaskOutcome, error) {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return nil, fmt.Errorf("%w: Dependencies must be called with a handler's context", ErrInvalidInput)
	}
	deps, err := jc.dependencies(ctx)
	if err != nil {
		return nil, err
	}
	return append([]TaskOutcome(nil), deps...), nil
}

// DependencyResult unmarshals the result of the running task's dependency
// name into v (as json.Unmarshal does): how a task reads its inputs from
// the tasks it waited for. A name that is not one of its dependencies is
// an error wrapping ErrNotFound (a typo, or a dependency not declared);
// a dependency that did not succeed, or recorded no result, is an error
// wrapping ErrNoResult that says how it ended.
func DependencyResult(ctx context.Context, name string, v any) error {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return fmt.Errorf("%w: DependencyResult must be called with a handler's context", ErrInvalidInput)
	}
	deps, err := jc.dependencies(ctx)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if d.Name != name {
			continue
		}
		switch {
		case d.State != backend.TaskSucceeded:
			// Not its Reason: that is another job's error, which this
			// job's error (and its logs) must not carry; Dependencies
			// gives it to a handler that wants it.
			return fmt.Errorf("result of dependency %q: %w: it is %s", name, ErrNoResult, d.State)
		case d.Result == nil:
			return fmt.Errorf("result of dependency %q: %w: it succeeded without calling SetResult", name, ErrNoResult)
		}
		if err := json.Unmarshal(d.Result, v); err != nil {
			return fmt.Errorf("result of dependency %q: %w", name, err)
		}
		return nil
	}
	names := make([]string, len(deps))
	for i, d := range deps {
		names[i] = fmt.Sprintf("%q", d.Name)
	}
	list := "it has none"
	if len(names) > 0 {
		list = "its dependencies are " + strings.Join(names, ", ")
	}
	return fmt.Errorf("result of dependency %q: %w: %q is not a dependency of task job %d (%s)", name, ErrNotFound, name, jc.ref.ID, list)
}

// dependencies returns the running task's dependency outcomes, read from
// the backend on the first call of the attempt. A fan-in of a thousand
// tasks reading each result must not read all thousand outcomes a
// thousand times. Errors are not kept: the next call asks again.
func (jc *jobCtx) dependencies(ctx context.Context) ([]TaskOutcome, error) {
	jc.depsMu.Lock()
	defer jc.depsMu.Unlock()
	if jc.depsRead {
		return jc.deps, nil
	}
	wf, ok := backend.As[backend.Workflower](jc.backend)
	if !ok {
		return nil, fmt.Errorf("dependencies of job %d: %w (the backend runs no workflows)", jc.ref.ID, ErrNotTask)
	}
	deps, err := wf.WorkflowDeps(ctx, jc.ref.ID)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, fmt.Errorf("dependencies of job %d: %w", jc.ref.ID, ErrNotTask)
	case err != nil:
		return nil, fmt.Errorf("dependencies of job %d: %w", jc.ref.ID, err)
	}
	jc.deps, jc.depsRead = deps, true
	return deps, nil
}

// attachResult puts the result SetResult recorded on o when o is the
// done outcome of the attempt: never on a retry or a failure, whose
// result would belong to no successful run.
func (jc *jobCtx) attachResult(o *backend.Outcome) {
	if o.Kind != backend.OutcomeDone {
		return
	}
	if r := jc.result.Load(); r != nil {
		o.Result = *r
	}
}
