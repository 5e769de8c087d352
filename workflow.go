package jobq

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// Workflow is a graph of named tasks, each an ordinary job, where a task
// runs only once the tasks it depends on have ended (After, AfterEnded).
// It exists so that "run these, then that" is stored with the jobs and
// released by the backend in the same transaction that ends the last
// dependency: no coordinator job polls, and no crash between two steps
// loses or doubles a release. Build it with NewWorkflow, Add and AddJob,
// then store it with Client.EnqueueWorkflow; nothing is checked or written
// before that, so building never fails and never panics.
//
// A Workflow is a description, not a handle: it may be enqueued more than
// once (each time a new workflow), and it is not safe for concurrent use
// while being built.
type Workflow struct {
	name  string
	tasks []workflowTask
}

// workflowTask is one task as added, checked at enqueue.
type workflowTask struct {
	name string
	spec JobSpec
	err  error // a mistake Add saw (nil Args), reported at enqueue
}

// NewWorkflow starts an empty workflow. name labels it for people (the
// listings, the dashboard) and need not be unique; it may be empty.
func NewWorkflow(name string) *Workflow {
	return &Workflow{name: name}
}

// Add adds the task name running a job of args' own Kind with args as its
// payload, as EnqueueArgs would: the type string is not repeated, so a
// task and its handler cannot disagree about it. opts are the job's
// options (Queue, Priority, MaxAttempts, Delay counted from the task's
// release, RunAt, Metadata) plus its dependencies, After and AfterEnded;
// UniqueKey is refused (a task is unique by its name in its workflow).
// It returns w, so calls can be chained.
func (w *Workflow) Add(name string, args Args, opts ...EnqueueOption) *Workflow {
	if args == nil {
		w.tasks = append(w.tasks, workflowTask{name: name, err: &backend.InputError{Field: "type", Reason: "Add needs a payload whose Kind names it"}})
		return w
	}
	kind, _ := kindOfValue(args)
	return w.AddJob(name, kind, args, opts...)
}

// AddJob adds the task name running a job of type typ with payload, taken
// as Client.Enqueue takes them: for job types that have no Args type, or
// whose type is chosen at run time. Options are as for Add.
func (w *Workflow) AddJob(name, typ string, payload any, opts ...EnqueueOption) *Workflow {
	w.tasks = append(w.tasks, workflowTask{name: name, spec: JobSpec{Type: typ, Payload: payload, Options: opts}})
	return w
}

// ErrNoWorkflows is returned, wrapped, by EnqueueWorkflow and the
// inspector's workflow methods on a backend that does not implement
// backend.Workflower (sync), so callers can tell "this store cannot
// do that" from a failure. It also matches ErrNotSupported, so code that
// handles every missing capability the same way needs nothing new.
var ErrNoWorkflows error = noWorkflowsError{}

type noWorkflowsError struct{}

func (noWorkflowsError) Error() string { return "this backend does not run workflows" }

// Is lets errors.Is(err, ErrNotSupported) match too.
func (noWorkflowsError) Is(target error) bool { return target == ErrNotSupported }

// noWorkflows is the error of op on b, which lacks backend.Workflower,
// saying why.
func noWorkflows(op string, b backend.Backend) error {
	if _, inline := backend.As[backend.Inline](b); inline {
		return fmt.Errorf("%s: %w: the sync backend runs each job inside its Enqueue, so nothing can wait for another job", op, ErrNoWorkflows)
	}
	return fmt.Errorf("%s: %w: %T does not implement backend.Workflower (sqlite, postgres, redis and memory do)", op, ErrNoWorkflows, b)
}

// EnqueueWorkflow stores wf, all its tasks or none, and returns its ID:
// the tasks without dependencies get their jobs at once, the others wait
// until theirs have ended. Each task goes through the checks Enqueue
// makes (payload, options, the registry's attempt limits, kinds) and the
// client's hooks (metadata, trace context); a waiting task's
// AfterEnqueue sees ID 0, since its job is made later, by the backend,
// without hooks. A badly built workflow (no tasks, a task name used
// twice, a dependency on a task that is not in it, a cycle, a task with
// a UniqueKey) is an error wrapping ErrInvalidInput naming the task, and
// writes nothing. A backend that runs no workflows is an error wrapping
// ErrNoWorkflows.
func (c *Client) EnqueueWorkflow(ctx context.Context, wf *Workflow) (int64, error) {
	op := workflowOp(wf, "")
	wfr, ok := backend.As[backend.Workflower](c.b)
	if !ok {
		return 0, noWorkflows(op, c.b)
	}
	return c.enqueueWorkflow(ctx, op, wf, false, wfr.WorkflowInsert)
}

// EnqueueWorkflowTx stores wf inside tx, a transaction the caller owns (as
// EnqueueTx does for a job): the workflow, and the first jobs it releases,
// exist if and only if tx commits. It returns an error wrapping
// ErrNotSupported on a backend that runs workflows but cannot insert them
// in a caller's transaction (memory), and one wrapping ErrNoWorkflows on a
// backend that runs none.
func (c *Client) EnqueueWorkflowTx(ctx context.Context, tx any, wf *Workflow) (int64, error) {
	op := workflowOp(wf, " in transaction")
	txi, ok := backend.As[backend.WorkflowTxInserter](c.b)
	if !ok {
		if _, ok := backend.As[backend.Workflower](c.b); !ok {
			return 0, noWorkflows(op, c.b)
		}
		return 0, fmt.Errorf("%s: %w", op, ErrNotSupported)
	}
	return c.enqueueWorkflow(ctx, op, wf, true, func(ctx context.Context, p backend.WorkflowParams) (*backend.WorkflowInserted, error) {
		return txi.WorkflowInsertTx(ctx, tx, p)
	})
}

func workflowOp(wf *Workflow, suffix string) string {
	if wf == nil {
		return "enqueue workflow" + suffix
	}
	return fmt.Sprintf("enqueue workflow %q%s", wf.name, suffix)
}

// enqueueWorkflow checks wf's tasks as params checks jobs, validates the
// graph, and inserts it with insert (inside the caller's transaction when
// inTx), running the client hooks around it.
func (c *Client) enqueueWorkflow(ctx context.Context, op string, wf *Workflow, inTx bool,
	insert func(context.Context, backend.WorkflowParams) (*backend.WorkflowInserted, error)) (int64, error) {
	if wf == nil {
		return 0, fmt.Errorf("%s: %w: the workflow is nil", op, ErrInvalidInput)
	}
	p, jobs, jobCtxs, err := c.workflowParams(ctx, wf, inTx)
	if err == nil {
		_, err = backend.ValidateWorkflow(p)
	}
	e := enqueued{inTx: inTx}
	if len(c.cfg.Hooks) > 0 {
		// jobs are the first tasks' jobs, in step: those the hooks saw.
		e.tasks = make([]string, len(jobs))
		for i := range jobs {
			e.tasks[i] = wf.tasks[i].name
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", op, err)
		c.afterEnqueue(ctx, jobCtxs, jobs, nil, err, e)
		return 0, err
	}
	e.sent = true
	ins, err := insert(ctx, p)
	if err != nil {
		err = fmt.Errorf("%s: %w", op, err)
		c.afterEnqueue(ctx, jobCtxs, jobs, nil, err, e)
		return 0, err
	}
	res := make([]EnqueueResult, len(p.Tasks))
	for i, t := range p.Tasks {
		res[i] = EnqueueResult{ID: ins.Jobs[t.Name]}
	}
	e.workflow = ins.ID
	c.afterEnqueue(ctx, jobCtxs, jobs, res, nil, e)
	return ins.ID, nil
}

// workflowParams turns wf's tasks into insert params, stopping at the
// first bad one. Like params it also returns each task's job params and
// context for the AfterEnqueue hooks: on error, those of the tasks the
// BeforeEnqueue hooks saw.
func (c *Client) workflowParams(ctx context.Context, wf *Workflow, inTx bool) (backend.WorkflowParams, []backend.InsertParams, []context.Context, error) {
	p := backend.WorkflowParams{Name: wf.name, Tasks: make([]backend.TaskParams, 0, len(wf.tasks))}
	jobs := make([]backend.InsertParams, 0, len(wf.tasks))
	var jobCtxs []context.Context
	if len(c.cfg.Hooks) > 0 {
		jobCtxs = make([]context.Context, 0, len(wf.tasks))
	}
	for _, t := range wf.tasks {
		if t.err != nil {
			return p, jobs, jobCtxs, fmt.Errorf("task %q: %w", t.name, t.err)
		}
		jctx, job, deps, err := c.jobParam(ctx, t.spec, jobCall{inTx: inTx, task: t.name, workflow: true})
		jobs = append(jobs, job)
		if jobCtxs != nil {
			jobCtxs = append(jobCtxs, jctx)
		}
		if err != nil {
			return p, jobs, jobCtxs, fmt.Errorf("task %q: %w", t.name, err)
		}
		p.Tasks = append(p.Tasks, backend.TaskParams{Name: t.name, Job: job, Deps: deps})
	}
	return p, jobs, jobCtxs, nil
}
