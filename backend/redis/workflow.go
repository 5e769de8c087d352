package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jsonstr"
)

// Workflows (backend.Workflower) live in the keys of one queue, the queue
// of all their tasks (see workflows.lua for the layout): the script that
// makes a task's job terminal (complete, release, sweep, cancel) ends the
// task there, releases the dependants whose last dependency that was by
// inserting their jobs into the same queue, and cancels those a failure
// cancels, atomically, as a replay reopens them. A Redis Cluster runs a
// script in one slot, so a workflow whose tasks named several queues could
// not be ended and released atomically: WorkflowInsert refuses it.
//
// A task's job carries the task in its hash (field w, and tn its name),
// which the scripts that end jobs read with the fields they read already:
// a plain job's end costs one absent field more, and its claim two (which
// return w and tn for JobRow.WorkflowID and Task). A job a build before tn
// released names its workflow but no task.

var _ backend.Workflower = (*Backend)(nil)

// base is the prefix of every key of the queue ("P:{Q}:"), which the
// scripts ending jobs and the workflow scripts get as a KEYS element to
// build the workflow keys from (workflows.lua): lastTS is base + "t".
func (k *queueKeys) base() string { return k.lastTS[:len(k.lastTS)-1] }

// WorkflowInsert implements backend.Workflower: one script writes the
// workflow, its tasks and the jobs of the tasks without dependencies.
// Besides what ValidateWorkflow refuses, a workflow whose tasks name more
// than one queue is an *InputError (see oneQueue).
func (b *Backend) WorkflowInsert(ctx context.Context, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	order, err := backend.ValidateWorkflow(params)
	if err == nil {
		err = oneQueue(params)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	res, err := b.workflowInsert(ctx, params, order)
	return res, b.fail(op, err)
}

// oneQueue refuses a workflow whose tasks are not all in one queue: the
// end of a task and the release of its dependants are one script, which a
// Redis Cluster runs in the slot of one queue.
func oneQueue(p backend.WorkflowParams) error {
	first := p.Tasks[0]
	for _, t := range p.Tasks[1:] {
		if t.Job.Queue != first.Job.Queue {
			return &backend.InputError{Field: "workflow", Reason: fmt.Sprintf(
				"task %q is in queue %q and task %q in queue %q: on Redis a workflow's tasks share one queue, so that a task's completion and the release of its dependants are one atomic script",
				first.Name, first.Job.Queue, t.Name, t.Job.Queue)}
		}
	}
	return nil
}

// appendEdge appends one edge of a task's dependency or dependant list
// (fields D and E, see workflows.lua): "<index><policy>,".
func appendEdge(buf []byte, index int, p backend.DepPolicy) []byte {
	buf = strconv.AppendInt(buf, int64(index), 10)
	if p == backend.DepContinue {
		return append(buf, 'k', ',')
	}
	return append(buf, 'c', ',')
}

// taskOptions is a task's field o: "<priority> <run at µs or -> <delay µs
// or ->", or "" when it has none of them.
func taskOptions(p *backend.InsertParams) string {
	if p.Priority == 0 && p.RunAt.IsZero() && p.Delay <= 0 {
		return ""
	}
	runAt, delay := "-", "-"
	if !p.RunAt.IsZero() {
		runAt = micro(p.RunAt)
	} else if p.Delay > 0 {
		delay = strconv.FormatInt(microsCeil(p.Delay), 10)
	}
	return strconv.Itoa(p.Priority) + " " + runAt + " " + delay
}

func (b *Backend) workflowInsert(ctx context.Context, params backend.WorkflowParams, order []int) (*backend.WorkflowInserted, error) {
	queue := params.Tasks[0].Job.Queue
	idx, err := b.reg.index(ctx, queue)
	if err != nil {
		return nil, err
	}
	q := b.keys.queue(queue)
	n := len(order)
	pos := make(map[string]int, n)
	for p, i := range order {
		pos[params.Tasks[i].Name] = p
	}
	deps := make([][]byte, n)
	outs := make([][]byte, n)
	for p, i := range order {
		for _, d := range params.Tasks[i].Deps {
			dp := pos[d.Task]
			deps[p] = appendEdge(deps[p], dp, d.Policy)
			outs[dp] = appendEdge(outs[dp], p, d.Policy)
		}
	}
	args := make([]any, 0, 4+9*n)
	args = append(args, q.channel, b.origin, params.Name, n)
	for p, i := range order {
		t := &params.Tasks[i]
		// DepCancelReason quotes the name with %q; the script writes the
		// plain name in double quotes unless told otherwise.
		quoted := strconv.Quote(t.Name)
		if quoted == `"`+t.Name+`"` {
			quoted = ""
		}
		md := ""
		if len(t.Job.Metadata) > 0 {
			md = jsonstr.Object(t.Job.Metadata)
		}
		args = append(args, t.Name, quoted, appendRecord(nil, &t.Job), taskOptions(&t.Job), md,
			deps[p], outs[p], len(t.Deps), t.Job.Key)
	}
	res, err := scriptWfInsert.eval(ctx, b.c, scriptWfInsert.keysOf(q), args)
	if err != nil {
		return nil, err
	}
	v, err := asSlice(res)
	if err != nil || len(v) < 3 || len(v)%2 != 1 {
		return nil, fmt.Errorf("insert workflow into %s: unexpected reply (%T)", queue, res)
	}
	f := fields{v: v}
	out := &backend.WorkflowInserted{ID: f.id(0, idx), Jobs: map[string]int64{}}
	for j := 3; j+1 < len(v); j += 2 {
		p := f.int(j)
		if p < 0 || p >= n {
			return nil, fmt.Errorf("insert workflow into %s: unexpected task index %v", queue, v[j])
		}
		out.Jobs[params.Tasks[order[p]].Name] = f.id(j+1, idx)
	}
	b.notifier.local(queue, f.int(1) == 1, f.int64(2))
	if f.err != nil {
		return nil, f.err
	}
	return out, nil
}

// workflowQueue returns the keys and index of the queue a workflow's (or
// a job's) ID names; ok is false when no queue has that index.
func (b *Backend) workflowQueue(ctx context.Context, id int64) (q *queueKeys, idx int, ok bool, err error) {
	if id <= 0 {
		return nil, 0, false, nil
	}
	idx = queueIndexOf(id)
	name, ok, err := b.reg.name(ctx, idx)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	return b.keys.queue(name), idx, true, nil
}

// WorkflowCancel implements backend.Workflower with one script in the
// workflow's queue, which cancels the jobs of its active tasks as
// JobCancel does; when it told running jobs to stop, it raises the cancel
// counter as JobCancel does (see cancel.go).
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (backend.WorkflowCancelResult, error) {
	op := fmt.Sprintf("cancel workflow %d", id)
	if err := b.begin(op); err != nil {
		return backend.WorkflowCancelResult{}, err
	}
	res, err := b.workflowCancel(ctx, id)
	return res, b.fail(op, err)
}

func (b *Backend) workflowCancel(ctx context.Context, id int64) (backend.WorkflowCancelResult, error) {
	var out backend.WorkflowCancelResult
	q, _, ok, err := b.workflowQueue(ctx, id)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, backend.ErrNotFound
	}
	res, err := scriptWfCancel.eval(ctx, b.c, scriptWfCancel.keysOf(q), []any{tsHex(id)})
	if err != nil {
		return out, err
	}
	v, err := asSlice(res)
	if err != nil || len(v) < 1 {
		return out, fmt.Errorf("unexpected reply (%T)", res)
	}
	f := fields{v: v}
	switch {
	case f.int(0) == -1:
		return out, backend.ErrNotFound
	case f.int(0) == 0 && len(v) == 2:
		out.State = backend.WorkflowState(f.str(1))
	case f.int(0) == 1 && len(v) == 3:
		out = backend.WorkflowCancelResult{Changed: true, State: backend.WorkflowCancelled, Cancelled: f.int(1), Requested: f.int(2)}
	default:
		return out, fmt.Errorf("unexpected reply (%T)", res)
	}
	if f.err != nil {
		return backend.WorkflowCancelResult{}, f.err
	}
	// A workflow found cancelled already may be this call's own, sent
	// again after its reply was lost before the counter was raised: raise
	// it again (as JobCancel does for CancelAlready), or its running
	// tasks' workers would hear only at their next full scan.
	if out.Requested > 0 || (!out.Changed && out.State == backend.WorkflowCancelled) {
		if err := b.c.incr(ctx, b.keys.cancels); err != nil {
			return out, fmt.Errorf("tell workers of the cancel requests (cancelling again does): %w", err)
		}
	}
	return out, nil
}
