package jobqtest

import (
	"context"

	"github.com/jobq/jobq/backend"
)

// The client finds backend.Workflower and backend.WorkflowTxInserter with
// backend.As, so the recorder cannot offer them on its own backend (As
// would find them there even when the wrapped backend runs no workflows).
// It puts one link per capability on its backend's Unwrap chain instead,
// each present exactly when the wrapped backend has the capability: As
// walks down to the link, which records the workflow's tasks and passes
// the call on.

// chain returns what recBackend unwraps to: inner, behind a recording link
// for each workflow capability inner has.
func chain(r *Recorder, inner backend.Backend) backend.Backend {
	next := inner
	if txi, ok := backend.As[backend.WorkflowTxInserter](inner); ok {
		next = &wfTxLink{Backend: next, txi: txi, r: r}
	}
	if wf, ok := backend.As[backend.Workflower](inner); ok {
		next = &wfLink{Backend: next, Workflower: wf, r: r}
	}
	return next
}

// wfLink is the recorder's backend.Workflower: WorkflowInsert records each
// task as an enqueue; every other method is the wrapped backend's.
type wfLink struct {
	backend.Backend
	backend.Workflower
	r *Recorder
}

// Unwrap returns the next link, for backend.As.
func (l *wfLink) Unwrap() backend.Backend { return l.Backend }

// WorkflowInsert records the workflow's tasks and passes the insert on.
func (l *wfLink) WorkflowInsert(ctx context.Context, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	ins, err := l.Workflower.WorkflowInsert(ctx, params)
	l.r.recordWorkflow(params, ins, err, false)
	return ins, err
}

// wfTxLink is the recorder's backend.WorkflowTxInserter: it records the
// tasks of a workflow inserted in the caller's transaction.
type wfTxLink struct {
	backend.Backend
	txi backend.WorkflowTxInserter
	r   *Recorder
}

// Unwrap returns the next link, for backend.As.
func (l *wfTxLink) Unwrap() backend.Backend { return l.Backend }

// WorkflowInsertTx records the workflow's tasks and passes the insert on.
func (l *wfTxLink) WorkflowInsertTx(ctx context.Context, tx any, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	ins, err := l.txi.WorkflowInsertTx(ctx, tx, params)
	l.r.recordWorkflow(params, ins, err, true)
	return ins, err
}

// recordWorkflow notes one workflow insert: an Enqueue per task, in
// params' order, with its job's ID when the insert released it at once.
func (r *Recorder) recordWorkflow(params backend.WorkflowParams, ins *backend.WorkflowInserted, err error, inTx bool) {
	jobs := make([]backend.InsertParams, len(params.Tasks))
	res := make([]backend.InsertResult, len(params.Tasks))
	for i, t := range params.Tasks {
		jobs[i] = t.Job
		if ins != nil {
			res[i].ID = ins.Jobs[t.Name]
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.appendInserts(jobs, res, err, inTx)
	first := len(r.enqueues) - len(jobs)
	for i, t := range params.Tasks {
		e := &r.enqueues[first+i]
		e.Task, e.Waiting = t.Name, len(t.Deps) > 0
		if ins != nil {
			e.Workflow = ins.ID
		}
	}
}

// wfLookup is one WorkflowGet's answer.
type wfLookup struct {
	wf  *backend.Workflow
	err error
}

// workflowCommitted reports whether the workflow of e, inserted in a
// transaction, is in the backend as recorded: false when its transaction
// rolled back or has not committed (a backend may give a rolled-back
// workflow's ID to a later one, so the task must be found too, with its
// type).
func (r *Recorder) workflowCommitted(ctx context.Context, e Enqueue, seen map[int64]wfLookup) (bool, error) {
	wf, ok := backend.As[backend.Workflower](r.inner)
	if !ok {
		return false, nil
	}
	l, ok := seen[e.Workflow]
	if !ok {
		l.wf, l.err = wf.WorkflowGet(ctx, e.Workflow)
		seen[e.Workflow] = l
	}
	if l.err != nil {
		return false, l.err
	}
	for _, t := range l.wf.Tasks {
		if t.Name == e.Task {
			return t.Type == e.Type && t.Queue == e.Queue, nil
		}
	}
	return false, nil
}
