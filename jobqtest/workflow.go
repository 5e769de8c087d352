package jobqtest

import (
	"context"

	"github.com/jobq/jobq/backend"
)

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
