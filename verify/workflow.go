package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// The workflow workload (Config.Workflows): each workflow is FanOut parts
// and one join that waits for all of them (jobq.After), every task an
// ordinary verification job. What it adds to the job checks: a join runs
// only after every part succeeded, exactly one join completes per
// workflow that succeeds, and no workflow is left running.
const (
	// joinTask names the joining task; the parts are p0, p1, ...
	joinTask = "join"
	// wfPermanentShare of the workflows have one part that fails for
	// good, so that the failure path (the join cancelled, the workflow
	// failed) is under the faults too.
	wfPermanentShare = 0.02
	// workflowCheckEvery is how often the verifier runs WorkflowCheck
	// while the workers run.
	workflowCheckEvery = time.Second
	// wfReplaySpread: with the replay fault, the parts of a workflow
	// planned to fail that are not slow work up to this long rather than
	// a few milliseconds, so that their ends fall before, during and
	// after the replay of the part that failed.
	wfReplaySpread = 250 * time.Millisecond
)

// Events of the workflow workload, written by the verifier.
const (
	evWfCheck = "wfcheck" // a WorkflowCheck ran: drift (how many of the run's counts were off)
	evDrift   = "drift"   // one of them: wf, task, stored, want
)

// partName names part i of a workflow.
func partName(i int) string { return "p" + strconv.Itoa(i) }

// workflowName names send try of workflow number n of a run. The name is
// how the checker finds the run's workflows, those inserted by a send
// whose reply was lost included.
func workflowName(run string, n int64, try int) string {
	return fmt.Sprintf("verify-%s-%d-%d", run, n, try)
}

// wfKey is one send of one workflow: its number and which send.
type wfKey struct {
	n   int64
	try int
}

// parseWorkflowName reads back workflowName; ok is false for a workflow
// of another run.
func parseWorkflowName(run, name string) (wfKey, bool) {
	rest, ok := strings.CutPrefix(name, "verify-"+run+"-")
	if !ok {
		return wfKey{}, false
	}
	ns, ts, ok := strings.Cut(rest, "-")
	if !ok {
		return wfKey{}, false
	}
	n, err1 := strconv.ParseInt(ns, 10, 64)
	try, err2 := strconv.Atoi(ts)
	if err1 != nil || err2 != nil {
		return wfKey{}, false
	}
	return wfKey{n, try}, true
}

// taskSeq is the seq of task i (the join is fanOut) of workflow n, from 1.
func taskSeq(n int64, i, fanOut int) int64 { return (n-1)*int64(fanOut+1) + int64(i) }

// taskIndex is i of taskSeq for a stored task's name; -1 when it is no
// task of the workload.
func taskIndex(name string, fanOut int) int {
	if name == joinTask {
		return fanOut
	}
	if i, err := strconv.Atoi(strings.TrimPrefix(name, "p")); err == nil && strings.HasPrefix(name, "p") && i < fanOut {
		return i
	}
	return -1
}

// planWorkflow decides what workflow n's tasks do, the parts first and the
// join last: each as planJob would, but none fails for good except, in a
// share of the workflows, one part (perm is then true). With spread > 0
// the other parts of such a workflow that are not slow work from 1ms to
// spread.
func planWorkflow(rng *rand.Rand, run string, n int64, fanOut int, slow float64, lease, spread time.Duration) (tasks []payload, perm bool) {
	tasks = make([]payload, fanOut+1)
	for i := range tasks {
		p := planJob(rng, run, taskSeq(n, i, fanOut), slow, lease)
		p.Perm, p.WF, p.Task = false, n, partName(i)
		if i == fanOut {
			p.Task = joinTask
		}
		tasks[i] = p
	}
	if rng.Float64() < wfPermanentShare {
		tasks[rng.IntN(fanOut)].Perm, perm = true, true
		for i := range tasks[:fanOut] {
			if t := &tasks[i]; spread > 0 && !t.Perm && t.Ms <= shortMaxMs {
				t.Ms = 1 + rng.Int64N(spread.Milliseconds())
			}
		}
	}
	return tasks, perm
}

// taskFields are the start line's fields of a workflow task: its
// workflow, and for the join how many of its dependencies the backend
// shows succeeded ("deps=10/10"; "deps=err" when it could not say).
func taskFields(ctx context.Context, p payload) []field {
	fs := []field{num("wf", p.WF), num("try", int64(p.Try)), str("task", p.Task)}
	if p.Task != joinTask {
		return fs
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	deps, err := jobq.Dependencies(rctx)
	if err != nil {
		return append(fs, str("deps", "err"))
	}
	ok := 0
	for _, d := range deps {
		if d.State == backend.TaskSucceeded {
			ok++
		}
	}
	return append(fs, str("deps", fmt.Sprintf("%d/%d", ok, len(deps))))
}

// insertWorkflows enqueues workflows from+1 .. from+k, each sent again
// until acknowledged. A send whose reply was lost may have inserted the
// workflow: the next send is named with the next try, so the checker
// tells the two apart and checks both.
func (p *producer) insertWorkflows(ctx context.Context, from, k int) error {
	for i := range k {
		n := int64(from + i + 1)
		tasks, perm := p.planWF(n)
		if err := p.insertWorkflow(ctx, n, tasks, perm); err != nil {
			return err
		}
	}
	return nil
}

func (p *producer) insertWorkflow(ctx context.Context, n int64, tasks []payload, perm bool) error {
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		w := jobq.NewWorkflow(workflowName(p.runID, n, try))
		opts := []jobq.EnqueueOption{jobq.Queue(p.queue), jobq.MaxAttempts(p.maxAttempts)}
		var parts []string
		for _, t := range tasks {
			t.Try = try
			if t.Task == joinTask {
				w.AddJob(t.Task, JobType, t, slices.Concat(opts, []jobq.EnqueueOption{jobq.After(parts...)})...)
				continue
			}
			parts = append(parts, t.Task)
			w.AddJob(t.Task, JobType, t, opts...)
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		id, err := p.client.EnqueueWorkflow(cctx, w)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.wfAcked[id] = n
			if perm {
				p.wfPerm[n] = true
			}
			p.mu.Unlock()
			p.enqueued.Add(int64(len(tasks)))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, jobq.ErrInvalidInput) || errors.Is(err, jobq.ErrNotSupported) {
			return fmt.Errorf("verify: enqueue a workflow: %w", err)
		}
		p.retries.Add(1)
		p.events.write(evEnqueueFail, num("wf", n), num("try", int64(try)), str("err", errClass(err)))
		if !ticker.Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ackedWorkflows returns the acknowledged workflows (ID to number) and
// the numbers of those planned to fail.
func (p *producer) ackedWorkflows() (acked map[int64]int64, perm map[int64]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	acked = make(map[int64]int64, len(p.wfAcked))
	for id, n := range p.wfAcked {
		acked[id] = n
	}
	perm = make(map[int64]bool, len(p.wfPerm))
	for n := range p.wfPerm {
		perm[n] = true
	}
	return acked, perm
}

// wfState is what the backend holds of the run's workflows at the end.
type wfState struct {
	fanOut int
	acked  map[int64]int64 // acknowledged workflow ID -> number
	perm   map[int64]bool  // numbers planned to fail
	stored []*backend.Workflow
	drift  []backend.WorkflowDrift // the final WorkflowCheck's, of the run's workflows
}

// workflower is the verifier's own backend as a Workflower.
func (r *verifier) workflower() (backend.Workflower, error) {
	w, ok := backend.As[backend.Workflower](r.direct)
	if !ok {
		return nil, &configError{msg: "the workflow workload needs a backend that runs workflows (sqlite:, postgres://, redis://, memory:)"}
	}
	return w, nil
}

// workflowState reads the run's workflows, with their tasks: every
// workflow named for the run, found by paging from the newest down to
// below the lowest acknowledged ID (a send whose reply was lost inserted
// its workflow before the send that was acknowledged, so paging goes on
// while a page still holds one of the run's).
func (r *verifier) workflowState(ctx context.Context) (*wfState, error) {
	w, err := r.workflower()
	if err != nil {
		return nil, err
	}
	ws := &wfState{fanOut: r.cfg.FanOut}
	ws.acked, ws.perm = r.prod.ackedWorkflows()
	low := int64(-1)
	for id := range ws.acked {
		if low < 0 || id < low {
			low = id
		}
	}
	var ids []int64
	var before int64
	for {
		page, err := w.WorkflowList(ctx, backend.WorkflowListParams{Limit: 1000, BeforeID: before})
		if err != nil {
			return nil, fmt.Errorf("verify: list workflows: %w", err)
		}
		ours := false
		for _, wf := range page {
			if _, ok := parseWorkflowName(r.id, wf.Name); ok {
				ids, ours = append(ids, wf.ID), true
			}
		}
		if len(page) < 1000 || (!ours && page[len(page)-1].ID < low) {
			break
		}
		before = page[len(page)-1].ID
	}
	for _, id := range ids {
		wf, err := w.WorkflowGet(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("verify: read workflow %d: %w", id, err)
		}
		ws.stored = append(ws.stored, wf)
	}
	drift, err := w.WorkflowCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("verify: check the workflows' counts: %w", err)
	}
	run := map[int64]bool{}
	for _, id := range ids {
		run[id] = true
	}
	for _, d := range drift {
		if run[d.WorkflowID] {
			ws.drift = append(ws.drift, d)
		}
	}
	return ws, nil
}

// ackTasks adds the jobs of the acknowledged workflows' tasks to acked
// (job ID to seq): a task's job is acknowledged with its workflow.
func (ws *wfState) ackTasks(acked map[int64]int64) {
	for _, wf := range ws.stored {
		n, ok := ws.acked[wf.ID]
		if !ok {
			continue
		}
		for _, t := range wf.Tasks {
			if i := taskIndex(t.Name, ws.fanOut); i >= 0 && t.JobID != 0 {
				acked[t.JobID] = taskSeq(n, i, ws.fanOut)
			}
		}
	}
}

// checkWorkflows runs WorkflowCheck every workflowCheckEvery while the
// workers run and records what it found of the run's acknowledged
// workflows: the counts must agree at every moment, not only at the end.
func (r *verifier) checkWorkflows(ctx context.Context) {
	w, err := r.workflower()
	if err != nil {
		return
	}
	ticker.Loop(ctx, workflowCheckEvery, func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, workflowCheckEvery*5)
		defer cancel()
		drift, err := w.WorkflowCheck(cctx)
		if err != nil {
			return // the proxy or a restart may keep it from answering
		}
		acked, _ := r.prod.ackedWorkflows()
		n := 0
		for _, d := range drift {
			if _, ok := acked[d.WorkflowID]; ok {
				n++
				r.events.write(evDrift, num("wf", d.WorkflowID), str("task", d.Task), num("stored", int64(d.Stored)), num("want", int64(d.Want)))
			}
		}
		r.events.write(evWfCheck, num("drift", int64(n)))
	})
}
