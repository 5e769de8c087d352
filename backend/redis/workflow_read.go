package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// The reading side of workflows, and their prune. Listing, stats, checks
// and prunes span queues: one script per queue (pipelined where one round
// does), merged in Go, each atomic within its queue. None is a hot path.

// defaultWorkflowListLimit is WorkflowListParams.Limit when it is 0.
const defaultWorkflowListLimit = 100

// wfListBudget bounds the workflows one call of the script wflist
// examines, so that a filter matching few of many keeps no call long.
const wfListBudget = 1000

// wfPruneBudget bounds the tasks one call of the script wfprune deletes
// (it finishes the workflow it is at).
const wfPruneBudget = 4 * backend.ChunkSize

// taskStates maps the state letters of the scripts to task states.
var taskStates = map[string]backend.TaskState{
	"w": backend.TaskWaiting, "a": backend.TaskActive, "s": backend.TaskSucceeded,
	"f": backend.TaskFailed, "c": backend.TaskCancelled,
}

// pairMap reads a reply of field, value, ... pairs (HGETALL).
func pairMap(v any) (map[string]string, error) {
	s, err := asSlice(v)
	if err != nil || len(s)%2 != 0 {
		return nil, fmt.Errorf("unexpected reply (%T), want field and value pairs", v)
	}
	f := fields{v: s}
	m := make(map[string]string, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		m[f.str(i)] = f.str(i + 1)
	}
	return m, f.err
}

// microsOf reads µs since 1970 ("" is the zero time).
func microsOf(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("unexpected time %q from redis", s)
	}
	return time.UnixMicro(n), nil
}

// workflowRow reads a workflow's fields (see workflows.lua): name, state,
// created, finished, then the counts cw, ca, cs, cf, cc.
func workflowRow(id int64, name, state, created, finished string, counts [5]string) (*backend.Workflow, error) {
	w := &backend.Workflow{ID: id, Name: name, State: backend.WorkflowState(state)}
	var err error
	if w.CreatedAt, err = microsOf(created); err != nil {
		return nil, err
	}
	if w.FinishedAt, err = microsOf(finished); err != nil {
		return nil, err
	}
	var n [5]int
	for i, s := range counts {
		if s == "" {
			continue
		}
		if n[i], err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("unexpected count %q from redis", s)
		}
	}
	w.Counts = backend.TaskCounts{Waiting: n[0], Active: n[1], Succeeded: n[2], Failed: n[3], Cancelled: n[4]}
	return w, nil
}

// edge is one parsed edge of a field D or E: the task index at its other
// end and its policy.
type edge struct {
	index  int
	policy backend.DepPolicy
}

// parseEdges reads a field D or E ("<index><c|k>," per edge).
func parseEdges(s string) ([]edge, error) {
	var out []edge
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			continue
		}
		i, err := strconv.Atoi(part[:len(part)-1])
		if err != nil {
			return nil, fmt.Errorf("malformed edge %q", part)
		}
		e := edge{index: i}
		if part[len(part)-1] == 'k' {
			e.policy = backend.DepContinue
		}
		out = append(out, e)
	}
	return out, nil
}

// WorkflowGet implements backend.Workflower: one script reads the
// workflow and its tasks in one snapshot.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.Workflow, error) {
	op := fmt.Sprintf("get workflow %d", id)
	if err := b.begin(op); err != nil {
		return nil, err
	}
	w, err := b.workflowGet(ctx, id)
	return w, b.fail(op, err)
}

func (b *Backend) workflowGet(ctx context.Context, id int64) (*backend.Workflow, error) {
	q, idx, ok, err := b.workflowQueue(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, backend.ErrNotFound
	}
	res, err := scriptWfGet.eval(ctx, b.c, scriptWfGet.keysOf(q), []any{tsHex(id)})
	if err != nil {
		return nil, err
	}
	v, err := asSlice(res)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, backend.ErrNotFound
	}
	if len(v) != 2 {
		return nil, fmt.Errorf("unexpected reply (%T)", res)
	}
	wf, err := pairMap(v[0])
	if err != nil {
		return nil, err
	}
	tm, err := pairMap(v[1])
	if err != nil {
		return nil, err
	}
	w, err := workflowRow(id, wf["n"], wf["s"], wf["c"], wf["f"], [5]string{wf["cw"], wf["ca"], wf["cs"], wf["cf"], wf["cc"]})
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(wf["T"])
	if err != nil || n < 0 || n > backend.MaxWorkflowTasks {
		return nil, fmt.Errorf("unexpected task count %q", wf["T"])
	}
	w.Tasks = make([]*backend.WorkflowTask, n)
	for i := range n {
		if w.Tasks[i], err = readTask(tm, i, q.name, idx); err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
	}
	return w, nil
}

// readTask builds task i of a workflow from its fields (see wfget).
func readTask(tm map[string]string, i int, queue string, idx int) (*backend.WorkflowTask, error) {
	s := strconv.Itoa(i)
	t := &backend.WorkflowTask{Name: tm["n"+s], State: taskStates[tm["s"+s]], Queue: queue, Type: tm["d"+s], Reason: tm["r"+s]}
	if t.State == "" {
		return nil, fmt.Errorf("unexpected state %q", tm["s"+s])
	}
	if j := tm["J"+s]; j != "" {
		id, err := parseTS(j, idx)
		if err != nil {
			return nil, err
		}
		t.JobID = id
	}
	if r := tm["R"+s]; r != "" {
		t.Result = []byte(r)
	}
	var err error
	if t.FinishedAt, err = microsOf(tm["F"+s]); err != nil {
		return nil, err
	}
	if o := tm["o"+s]; o != "" {
		pr, _, _ := strings.Cut(o, " ")
		if t.Priority, err = strconv.Atoi(pr); err != nil {
			return nil, fmt.Errorf("malformed options %q", o)
		}
	}
	deps, err := parseEdges(tm["D"+s])
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		ds := strconv.Itoa(d.index)
		name := tm["n"+ds]
		t.Deps = append(t.Deps, backend.Dep{Task: name, Policy: d.policy})
		if st := tm["s"+ds]; t.State == backend.TaskWaiting && (st == "w" || st == "a") {
			t.WaitingOn = append(t.WaitingOn, name)
		}
	}
	return t, nil
}

// WorkflowList implements backend.Workflower: each queue's newest matches
// (script wflist, which pages itself), merged newest first.
func (b *Backend) WorkflowList(ctx context.Context, params backend.WorkflowListParams) ([]*backend.Workflow, error) {
	const op = "list workflows"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	limit, err := backend.PageLimit(params.Limit, defaultWorkflowListLimit)
	if err == nil {
		err = validateWorkflowState(params.State)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := b.workflowList(ctx, params, limit)
	return out, b.fail(op, err)
}

// validateWorkflowState refuses a state filter that is not "" or a
// workflow state.
func validateWorkflowState(s backend.WorkflowState) error {
	switch s {
	case "", backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled:
		return nil
	}
	return &backend.InputError{Field: "state", Reason: fmt.Sprintf("%q: not a workflow state (running, succeeded, failed, cancelled)", s)}
}

func (b *Backend) workflowList(ctx context.Context, params backend.WorkflowListParams, limit int) ([]*backend.Workflow, error) {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return nil, err
	}
	var all []*backend.Workflow
	for _, name := range queues {
		idx, ok, err := b.reg.lookup(ctx, name)
		if err != nil || !ok {
			return nil, err
		}
		cursor := ""
		if params.BeforeID > 0 {
			cursor = tsBelow(params.BeforeID, idx)
		}
		q := b.keys.queue(name)
		for got := 0; got < limit; {
			res, err := scriptWfList.eval(ctx, b.c, scriptWfList.keysOf(q), []any{cursor, string(params.State), limit - got, wfListBudget})
			if err != nil {
				return nil, err
			}
			v, err := asSlice(res)
			if err != nil || len(v)%10 != 1 {
				return nil, fmt.Errorf("list workflows of %s: unexpected reply", name)
			}
			f := fields{v: v}
			for i := 1; i < len(v); i += 10 {
				w, err := workflowRow(f.id(i, idx), f.str(i+1), f.str(i+2), f.str(i+3), f.str(i+4),
					[5]string{f.str(i + 5), f.str(i + 6), f.str(i + 7), f.str(i + 8), f.str(i + 9)})
				if err != nil {
					return nil, err
				}
				all = append(all, w)
				got++
			}
			if f.err != nil {
				return nil, f.err
			}
			if cursor = f.str(0); cursor == "" {
				break
			}
		}
	}
	slices.SortFunc(all, func(x, y *backend.Workflow) int { return cmp.Compare(y.ID, x.ID) })
	return all[:min(limit, len(all))], nil
}

// WorkflowDeps implements backend.Workflower: the job's queue's index
// wj names its task (while the workflow is kept).
func (b *Backend) WorkflowDeps(ctx context.Context, jobID int64) ([]backend.TaskOutcome, error) {
	op := fmt.Sprintf("read dependencies of job %d", jobID)
	if err := b.begin(op); err != nil {
		return nil, err
	}
	out, err := b.workflowDeps(ctx, jobID)
	return out, b.fail(op, err)
}

func (b *Backend) workflowDeps(ctx context.Context, jobID int64) ([]backend.TaskOutcome, error) {
	q, _, ok, err := b.workflowQueue(ctx, jobID)
	if err != nil {
		return nil, err
	}
	notTask := fmt.Errorf("%w (not a workflow task's job)", backend.ErrNotFound)
	if !ok {
		return nil, notTask
	}
	res, err := scriptWfDeps.eval(ctx, b.c, scriptWfDeps.keysOf(q), []any{tsHex(jobID)})
	if err != nil {
		return nil, err
	}
	v, err := asSlice(res)
	if err != nil || len(v) < 1 || len(v)%5 != 1 {
		return nil, fmt.Errorf("unexpected reply (%T)", res)
	}
	f := fields{v: v}
	if f.int(0) != 1 {
		return nil, notTask
	}
	out := make([]backend.TaskOutcome, 0, len(v)/5)
	for i := 1; i < len(v); i += 5 {
		o := backend.TaskOutcome{Name: f.str(i), State: taskStates[f.str(i+2)], Reason: f.str(i + 4)}
		if f.str(i+1) == "k" {
			o.Policy = backend.DepContinue
		}
		if r := f.str(i + 3); r != "" && o.State == backend.TaskSucceeded {
			o.Result = []byte(r)
		}
		out = append(out, o)
	}
	return out, f.err
}

// WorkflowStats implements backend.Workflower: the counters every queue
// keeps, read by one script per queue, pipelined.
func (b *Backend) WorkflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	const op = "workflow stats"
	if err := b.begin(op); err != nil {
		return backend.WorkflowStats{}, err
	}
	s, err := b.workflowStats(ctx)
	return s, b.fail(op, err)
}

func (b *Backend) workflowStats(ctx context.Context) (backend.WorkflowStats, error) {
	var s backend.WorkflowStats
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return s, err
	}
	calls := make([]*evalCall, len(queues))
	for i, name := range queues {
		calls[i] = scriptWfStats.on(b.keys.queue(name), nil)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return s, err
	}
	for i, call := range calls {
		v, err := asSlice(call.res)
		if err != nil || len(v) != 5 {
			return s, fmt.Errorf("workflow stats of %s: unexpected reply", queues[i])
		}
		f := fields{v: v}
		s.Running += f.int64(0)
		s.Succeeded += f.int64(1)
		s.Failed += f.int64(2)
		s.Cancelled += f.int64(3)
		s.TasksWaiting += f.int64(4)
		if f.err != nil {
			return s, f.err
		}
	}
	return s, nil
}

// WorkflowCheck implements backend.Workflower: one script per queue
// recounts its running workflows from their tasks' states, pipelined.
func (b *Backend) WorkflowCheck(ctx context.Context) ([]backend.WorkflowDrift, error) {
	const op = "check workflows"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	out, err := b.workflowCheck(ctx)
	return out, b.fail(op, err)
}

func (b *Backend) workflowCheck(ctx context.Context) ([]backend.WorkflowDrift, error) {
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	calls := make([]*evalCall, len(queues))
	for i, name := range queues {
		calls[i] = scriptWfCheck.on(b.keys.queue(name), nil)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	var out []backend.WorkflowDrift
	for i, call := range calls {
		v, err := asSlice(call.res)
		if err != nil || len(v)%4 != 0 {
			return nil, fmt.Errorf("check workflows of %s: unexpected reply", queues[i])
		}
		if len(v) == 0 {
			continue
		}
		idx, ok, err := b.reg.lookup(ctx, queues[i])
		if err != nil || !ok {
			return nil, fmt.Errorf("check workflows of %s: queue index: %v", queues[i], err)
		}
		f := fields{v: v}
		for j := 0; j < len(v); j += 4 {
			out = append(out, backend.WorkflowDrift{WorkflowID: f.id(j, idx), Task: f.str(j + 1), Stored: f.int(j + 2), Want: f.int(j + 3)})
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	slices.SortFunc(out, func(x, y backend.WorkflowDrift) int {
		return cmp.Or(cmp.Compare(x.WorkflowID, y.WorkflowID), cmp.Compare(x.Task, y.Task))
	})
	return out, nil
}

// WorkflowPrune implements backend.Workflower: per queue, script wfprune
// in calls of about wfPruneBudget tasks until none is left to delete.
func (b *Backend) WorkflowPrune(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "prune workflows"
	if err := b.begin(op); err != nil {
		return 0, err
	}
	if err := backend.ValidateWorkflowPrune(olderThan); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	n, err := b.workflowPrune(ctx, olderThan)
	return n, b.fail(op, err)
}

func (b *Backend) workflowPrune(ctx context.Context, olderThan time.Duration) (int, error) {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range queues {
		q := b.keys.queue(name)
		for {
			res, err := scriptWfPrune.eval(ctx, b.c, scriptWfPrune.keysOf(q), []any{microsCeil(olderThan), wfPruneBudget})
			if err != nil {
				return total, err
			}
			v, err := asSlice(res)
			if err != nil || len(v) != 2 {
				return total, fmt.Errorf("prune workflows of %s: unexpected reply", name)
			}
			f := fields{v: v}
			total += f.int(0)
			if f.err != nil {
				return total, f.err
			}
			if f.int(1) == 0 {
				break
			}
		}
	}
	return total, nil
}
