package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/backend"
)

// Workflows (backend.Workflower) live beside the jobs, under the same
// mutex: a task ends in the very critical section that makes its job
// terminal (toFailed, keep and JobComplete call taskJobEnded), and the
// tasks that end releases get their jobs there too, through newJob like
// any insert. Each task keeps its edges both ways, so ending a task costs
// the edges it touches, never a scan of its workflow: a fan-in or fan-out
// of a thousand tasks stays linear overall.

var _ backend.Workflower = (*Backend)(nil)

// jobCancelledReason is the Reason of a task whose own job was cancelled.
const jobCancelledReason = "cancelled"

// cancelCause records why a task was cancelled: only a task cancelled
// because of a dependency comes back when that dependency is replayed.
type cancelCause uint8

const (
	causeNone cancelCause = iota // not cancelled
	causeDep                     // a dependency with DepCancel failed or was cancelled
	causeUser                    // WorkflowCancel
	causeJob                     // the task's own job was cancelled
)

// workflowStore is the backend's workflows. Its maps are made on the
// first insert, so a backend that never runs a workflow pays nothing, and
// the job paths' check (a lookup in byJob) costs one map read.
type workflowStore struct {
	lastID int64
	byID   map[int64]*workflow
	list   []*workflow // ascending ID: WorkflowList pages it from the end
	// byJob maps the ID of every task's job ever released (live, failed
	// or finished) to its task, until the workflow is pruned. A job keeps
	// its ID through failure and replay, so one entry serves them all.
	byJob map[int64]*task
}

// workflow is one stored workflow.
type workflow struct {
	id         int64
	name       string
	state      backend.WorkflowState
	createdAt  time.Time
	finishedAt time.Time
	tasks      []*task // in index (topological) order
	// unfinished counts the tasks waiting or active, kept as they end and
	// reopen (WorkflowCheck recomputes it); at 0 a running workflow ends.
	unfinished int
	// counts counts the tasks by state, kept by task.setState, so a
	// workflow's end and its Counts never scan its tasks.
	counts backend.TaskCounts
}

// task is one task of a workflow.
type task struct {
	wf    *workflow
	index int // position in wf.tasks
	name  string
	job   backend.InsertParams // what its release inserts; payload and metadata owned
	deps  []edge               // its dependencies, in Deps order
	out   []edge               // its dependants, each with the policy of its edge
	state backend.TaskState
	// waiting counts the dependencies left before release (state waiting).
	waiting    int
	jobID      int64 // 0 until released
	result     []byte
	reason     string
	cause      cancelCause
	finishedAt time.Time
	// reviving marks a task a replay is bringing back, while it waits for
	// its recomputation: edges to it are left alone until then.
	reviving bool
}

// edge is one end of a dependency: the task at the other end and the
// dependency's policy.
type edge struct {
	task   *task
	policy backend.DepPolicy
}

// stateCount is the counter of state s in c.
func stateCount(c *backend.TaskCounts, s backend.TaskState) *int {
	switch s {
	case backend.TaskWaiting:
		return &c.Waiting
	case backend.TaskActive:
		return &c.Active
	case backend.TaskSucceeded:
		return &c.Succeeded
	case backend.TaskFailed:
		return &c.Failed
	}
	return &c.Cancelled
}

// setState moves t to s, keeping its workflow's counts.
func (t *task) setState(s backend.TaskState) {
	*stateCount(&t.wf.counts, t.state)--
	*stateCount(&t.wf.counts, s)++
	t.state = s
}

// WorkflowInsert implements backend.Workflower. Validation comes first, so
// a refused workflow stores nothing; the tasks without dependencies get
// their jobs in the same critical section as the workflow.
func (b *Backend) WorkflowInsert(ctx context.Context, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow"
	order, err := backend.ValidateWorkflow(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	s := &b.wf
	if s.byID == nil {
		s.byID = map[int64]*workflow{}
		s.byJob = map[int64]*task{}
	}
	s.lastID++
	w := &workflow{
		id:         s.lastID,
		name:       params.Name,
		state:      backend.WorkflowRunning,
		createdAt:  now,
		tasks:      make([]*task, len(order)),
		unfinished: len(order),
	}
	w.counts.Waiting = len(order)
	byName := make(map[string]*task, len(order))
	for pos, i := range order {
		p := params.Tasks[i]
		job := p.Job
		job.Payload = bytes.Clone(job.Payload)
		job.Metadata = cloneMetadata(job.Metadata)
		t := &task{
			wf:      w,
			index:   pos,
			name:    p.Name,
			job:     job,
			deps:    make([]edge, len(p.Deps)),
			state:   backend.TaskWaiting,
			waiting: len(p.Deps),
		}
		for k, d := range p.Deps {
			// The order is topological: every dependency is in byName.
			dep := byName[d.Task]
			t.deps[k] = edge{task: dep, policy: d.Policy}
			dep.out = append(dep.out, edge{task: t, policy: d.Policy})
		}
		w.tasks[pos] = t
		byName[p.Name] = t
	}
	s.byID[w.id] = w
	s.list = append(s.list, w)
	out := &backend.WorkflowInserted{ID: w.id, Jobs: map[string]int64{}}
	woken := map[string]bool{}
	for _, t := range w.tasks {
		if len(t.deps) == 0 {
			b.releaseTask(t, now, woken)
			out.Jobs[t.name] = t.jobID
		}
	}
	b.wake(woken)
	return out, nil
}

// releaseTask inserts t's job, pending and due after its Delay from now
// (or at its RunAt), through the same path as JobInsertMany, and makes t
// active. The caller wakes the queues in woken. Called with b.mu held.
func (b *Backend) releaseTask(t *task, now time.Time, woken map[string]bool) {
	j := b.newJob(t.job, now)
	j.WorkflowID, j.Task = t.wf.id, t.name
	t.setState(backend.TaskActive)
	t.waiting = 0
	t.jobID = j.ID
	b.wf.byJob[j.ID] = t
	woken[j.Queue] = true
}

// taskJobEnded ends the task whose job jobID has just become terminal
// (end: succeeded, failed or cancelled), and through its edges what that
// ends or releases. Only a task that is active with this very job ends:
// anything else (a plain job, a task a WorkflowCancel already ended) is a
// no-op, so a job's second end resolves nothing. result is copied: the
// caller's outcome slice is reused. Called with b.mu held, by every path
// that makes a job terminal, in the same critical section.
func (b *Backend) taskJobEnded(jobID int64, end backend.TaskState, reason string, result []byte, now time.Time) {
	t := b.wf.byJob[jobID]
	if t == nil || t.state != backend.TaskActive || t.jobID != jobID {
		return
	}
	cause := causeNone
	if end == backend.TaskCancelled {
		cause = causeJob
	}
	woken := map[string]bool{}
	b.endTask(t, end, reason, bytes.Clone(result), cause, now, woken)
	b.wake(woken)
}

// setEnded records t's end; it resolves none of its edges.
func (b *Backend) setEnded(t *task, end backend.TaskState, reason string, result []byte, cause cancelCause, now time.Time) {
	t.setState(end)
	t.waiting = 0
	t.reason, t.result, t.cause, t.finishedAt = reason, result, cause, now
	t.wf.unfinished--
}

// endTask ends t and resolves each outgoing edge of every task that ends
// with it exactly once, breadth first: a dependant whose last dependency
// ended is released, one whose DepCancel dependency failed or was
// cancelled is cancelled and its own edges resolved in turn. In a
// workflow that is not running (a user cancelled it) only t changes:
// nothing waits there any more. Then a running workflow with no
// unfinished task ends.
func (b *Backend) endTask(t *task, end backend.TaskState, reason string, result []byte, cause cancelCause, now time.Time, woken map[string]bool) {
	b.setEnded(t, end, reason, result, cause, now)
	w := t.wf
	if w.state != backend.WorkflowRunning {
		return
	}
	work := []*task{t}
	for i := 0; i < len(work); i++ {
		x := work[i]
		for _, e := range x.out {
			d := e.task
			if d.state != backend.TaskWaiting || d.reviving {
				continue
			}
			if x.state == backend.TaskSucceeded || e.policy == backend.DepContinue {
				if d.waiting--; d.waiting == 0 {
					b.releaseTask(d, now, woken)
				}
				continue
			}
			b.setEnded(d, backend.TaskCancelled, backend.DepCancelReason(x.name, x.state), nil, causeDep, now)
			work = append(work, d)
		}
	}
	if w.unfinished == 0 {
		w.state = backend.WorkflowFailed
		if w.counts.Succeeded == len(w.tasks) {
			w.state = backend.WorkflowSucceeded
		}
		w.finishedAt = now
	}
}

// taskReplayRefused reports whether jobID is the job of a task whose
// workflow a user cancelled: FailedReplay leaves it in failed_jobs.
// Called with b.mu held.
func (b *Backend) taskReplayRefused(jobID int64) bool {
	t := b.wf.byJob[jobID]
	return t != nil && t.wf.state == backend.WorkflowCancelled
}

// taskReplayed reopens the failed task whose job FailedReplay has just made
// live again, in the same critical section: the task is active, its
// workflow running, and the tasks its failure cancelled (those reachable
// from it through tasks cancelled because of a dependency) come back,
// each recomputed in topological order: cancelled again when another
// DepCancel dependency failed or was cancelled, else waiting on the
// dependencies that have not ended, or released when none is left. A
// plain job is a no-op. Called with b.mu held.
func (b *Backend) taskReplayed(jobID int64, now time.Time) {
	t := b.wf.byJob[jobID]
	if t == nil || t.state != backend.TaskFailed || t.jobID != jobID {
		return
	}
	w := t.wf
	var revived []*task
	frontier := []*task{t}
	for i := 0; i < len(frontier); i++ {
		for _, e := range frontier[i].out {
			d := e.task
			if d.state == backend.TaskCancelled && d.cause == causeDep && !d.reviving {
				d.reviving = true
				revived = append(revived, d)
				frontier = append(frontier, d)
			}
		}
	}
	slices.SortFunc(revived, func(x, y *task) int { return cmp.Compare(x.index, y.index) })
	w.state, w.finishedAt = backend.WorkflowRunning, time.Time{}
	b.reopen(t, backend.TaskActive)
	for _, d := range revived {
		b.reopen(d, backend.TaskWaiting)
	}
	woken := map[string]bool{}
	for _, d := range revived {
		// Its dependencies that came back too come first (index order), so
		// each is already recomputed when d reads it.
		d.reviving = false
		var culprit *task
		left := 0
		for _, e := range d.deps {
			p := e.task
			if e.policy == backend.DepCancel && (p.state == backend.TaskFailed || p.state == backend.TaskCancelled) {
				culprit = p
				break
			}
			if !p.state.Ended() {
				left++
			}
		}
		switch {
		case culprit != nil:
			b.endTask(d, backend.TaskCancelled, backend.DepCancelReason(culprit.name, culprit.state), nil, causeDep, now, woken)
		case left == 0:
			b.releaseTask(d, now, woken)
		default:
			d.waiting = left
		}
	}
	b.wake(woken)
}

// reopen returns an ended task x to state s (active or waiting). x ended
// failed or cancelled, so its DepContinue edges counted their waiting
// dependants down: they count x again, or a dependant still waiting would
// be counted down twice when x ends anew (WorkflowCheck counts x as not
// ended). Dependants being revived are recomputed instead.
func (b *Backend) reopen(x *task, s backend.TaskState) {
	x.setState(s)
	x.reason, x.result, x.cause, x.finishedAt = "", nil, causeNone, time.Time{}
	x.wf.unfinished++
	for _, e := range x.out {
		if d := e.task; d.state == backend.TaskWaiting && !d.reviving && e.policy == backend.DepContinue {
			d.waiting++
		}
	}
}

// WorkflowCancel implements backend.Workflower. Each task ends before its
// job is cancelled (as JobCancel does it), so the job's end, now or when
// its holder stops, finds the task ended and resolves nothing.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (backend.WorkflowCancelResult, error) {
	op := fmt.Sprintf("cancel workflow %d", id)
	if err := b.lock(ctx, op); err != nil {
		return backend.WorkflowCancelResult{}, err
	}
	defer b.mu.Unlock()
	w := b.wf.byID[id]
	if w == nil {
		return backend.WorkflowCancelResult{}, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	if w.state != backend.WorkflowRunning {
		return backend.WorkflowCancelResult{State: w.state}, nil
	}
	now := b.now()
	w.state, w.finishedAt = backend.WorkflowCancelled, now
	res := backend.WorkflowCancelResult{Changed: true, State: w.state}
	for _, t := range w.tasks {
		switch t.state {
		case backend.TaskWaiting:
			b.setEnded(t, backend.TaskCancelled, backend.CancelReasonWorkflow, nil, causeUser, now)
			res.Cancelled++
		case backend.TaskActive:
			b.setEnded(t, backend.TaskCancelled, backend.CancelReasonWorkflow, nil, causeUser, now)
			if b.cancelOne(t.jobID, now).Outcome == backend.CancelCancelled {
				res.Cancelled++
			} else {
				// Reserved: its holder is told to stop (or already was,
				// when the job itself was cancelled before).
				res.Requested++
			}
		}
	}
	w.unfinished = 0
	return res, nil
}
