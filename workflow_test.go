package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
)

// squareArgs is a fan-out task's payload: it records n*n as its result.
type squareArgs struct {
	N int `json:"n"`
}

func (squareArgs) Kind() string { return "wf.square" }

// workflowOf waits until workflow id has ended and returns it with its
// tasks.
func workflowOf(t *testing.T, insp *jobq.Inspector, id int64) *jobq.WorkflowInfo {
	t.Helper()
	var wf *jobq.WorkflowInfo
	eventually(t, settle, fmt.Sprintf("workflow %d to end", id), func() bool {
		var err error
		wf, err = insp.Workflow(context.Background(), id)
		if err != nil {
			t.Fatalf("get workflow %d: %v", id, err)
		}
		return wf.State != jobq.WorkflowRunning
	})
	return wf
}

func taskNamed(t *testing.T, wf *jobq.WorkflowInfo, name string) *jobq.WorkflowTask {
	t.Helper()
	for _, task := range wf.Tasks {
		if task.Name == name {
			return task
		}
	}
	t.Fatalf("workflow %d has no task %q", wf.ID, name)
	return nil
}

// A fan-out of N tasks, each recording a result, then a fan-in that reads
// every one of them through DependencyResult: the join runs once, after
// all of them, and sees all the results.
func TestWorkflowFanOutFanIn(t *testing.T) {
	t.Parallel()
	const n = 12
	ctx := context.Background()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	jobq.HandleArgs(reg, func(ctx context.Context, a squareArgs) error {
		return jobq.SetResult(ctx, a.N*a.N)
	})
	var joins atomic.Int32
	sums := make(chan int, 1)
	reg.HandleFunc("wf.sum", func(ctx context.Context, j *jobq.Job) error {
		joins.Add(1)
		deps, err := jobq.Dependencies(ctx)
		if err != nil {
			return err
		}
		if len(deps) != n {
			return jobq.Permanent(fmt.Errorf("%d dependencies, want %d", len(deps), n))
		}
		sum := 0
		for i := range n {
			var sq int
			if err := jobq.DependencyResult(ctx, fmt.Sprintf("square-%d", i), &sq); err != nil {
				return jobq.Permanent(err)
			}
			sum += sq
		}
		sums <- sum
		return jobq.SetResult(ctx, map[string]int{"sum": sum})
	})

	wf := jobq.NewWorkflow("squares")
	var parts []string
	for i := range n {
		name := fmt.Sprintf("square-%d", i)
		parts = append(parts, name)
		wf.Add(name, squareArgs{N: i}, jobq.Queue("wf"))
	}
	wf.AddJob("sum", "wf.sum", nil, jobq.Queue("wf"), jobq.After(parts...))
	id, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueWorkflow(ctx, wf)
	if err != nil {
		t.Fatalf("enqueue workflow: %v", err)
	}
	cfg := fastConfig()
	cfg.Queues = []string{"wf"}
	startWorker(t, b, reg, cfg)

	want := 0
	for i := range n {
		want += i * i
	}
	if got := <-sums; got != want {
		t.Fatalf("the join summed %d, want %d", got, want)
	}
	insp := jobq.NewInspector(b)
	got := workflowOf(t, insp, id)
	if got.State != jobq.WorkflowSucceeded || got.Name != "squares" || got.Counts.Succeeded != n+1 {
		t.Fatalf("workflow = %+v, want squares succeeded with %d tasks succeeded", got, n+1)
	}
	if joins.Load() != 1 {
		t.Fatalf("the join ran %d times, want once", joins.Load())
	}
	if sum := taskNamed(t, got, "sum"); string(sum.Result) != fmt.Sprintf(`{"sum":%d}`, want) || sum.Type != "wf.sum" || sum.Queue != "wf" {
		t.Fatalf("sum task = %+v, want its result {\"sum\":%d}", sum, want)
	}
	if sq := taskNamed(t, got, "square-3"); string(sq.Result) != "9" || sq.Type != "wf.square" {
		t.Fatalf("square-3 = %+v, want result 9 and type wf.square (its Args' Kind)", sq)
	}
	stats, err := insp.WorkflowStats(ctx)
	if err != nil || stats != (jobq.WorkflowStats{Succeeded: 1}) {
		t.Fatalf("stats = %+v, %v; want one succeeded", stats, err)
	}
}

// A task that fails cancels what depends on it with After (and, through
// them, their own dependants), while a task with AfterEnded runs and
// reads how each of its dependencies ended.
func TestWorkflowFailurePolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	var ran sync.Map
	reg.HandleFunc("wf.bad", func(ctx context.Context, j *jobq.Job) error {
		return jobq.Permanent(errors.New("disk on fire"))
	})
	reg.HandleFunc("wf.good", func(ctx context.Context, j *jobq.Job) error {
		return jobq.SetResult(ctx, "ok")
	})
	reg.HandleFunc("wf.never", func(ctx context.Context, j *jobq.Job) error {
		ran.Store(j.ID, true)
		return nil
	})
	type seen struct {
		deps                  []jobq.TaskOutcome
		good                  string
		goodErr, bad, unknown error
	}
	report := make(chan seen, 1)
	reg.HandleFunc("wf.report", func(ctx context.Context, j *jobq.Job) error {
		var s seen
		var err error
		if s.deps, err = jobq.Dependencies(ctx); err != nil {
			return err
		}
		s.goodErr = jobq.DependencyResult(ctx, "good", &s.good)
		var v any
		s.bad = jobq.DependencyResult(ctx, "bad", &v)
		s.unknown = jobq.DependencyResult(ctx, "nope", &v)
		report <- s
		return nil
	})

	wf := jobq.NewWorkflow("policies").
		AddJob("bad", "wf.bad", nil).
		AddJob("good", "wf.good", nil).
		AddJob("consumer", "wf.never", nil, jobq.After("bad", "good")).
		AddJob("grandchild", "wf.never", nil, jobq.After("consumer")).
		AddJob("report", "wf.report", nil, jobq.AfterEnded("bad"), jobq.AfterEnded("good"))
	id, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueWorkflow(ctx, wf)
	if err != nil {
		t.Fatalf("enqueue workflow: %v", err)
	}
	startWorker(t, b, reg, fastConfig())

	s := <-report
	if len(s.deps) != 2 || s.deps[0].Name != "bad" || s.deps[0].State != jobq.TaskFailed ||
		!strings.Contains(s.deps[0].Reason, "disk on fire") || s.deps[0].Policy != backend.DepContinue ||
		s.deps[1].Name != "good" || s.deps[1].State != jobq.TaskSucceeded || string(s.deps[1].Result) != `"ok"` {
		t.Fatalf("Dependencies = %+v, want bad failed (disk on fire) then good succeeded with \"ok\"", s.deps)
	}
	if s.goodErr != nil || s.good != "ok" {
		t.Fatalf("result of good = %q, %v; want ok", s.good, s.goodErr)
	}
	if !errors.Is(s.bad, jobq.ErrNoResult) || !strings.Contains(s.bad.Error(), "failed") {
		t.Fatalf("result of bad: %v; want ErrNoResult saying it failed", s.bad)
	}
	if !errors.Is(s.unknown, jobq.ErrNotFound) || !strings.Contains(s.unknown.Error(), `"nope"`) {
		t.Fatalf("result of nope: %v; want ErrNotFound naming it", s.unknown)
	}

	got := workflowOf(t, jobq.NewInspector(b), id)
	if got.State != jobq.WorkflowFailed {
		t.Fatalf("workflow state %s, want failed", got.State)
	}
	wantReason := map[string]string{
		"consumer":   backend.DepCancelReason("bad", jobq.TaskFailed),
		"grandchild": backend.DepCancelReason("consumer", jobq.TaskCancelled),
	}
	for name, reason := range wantReason {
		task := taskNamed(t, got, name)
		if task.State != jobq.TaskCancelled || task.Reason != reason || task.JobID != 0 {
			t.Fatalf("task %s = %+v, want cancelled without a job: %s", name, task, reason)
		}
	}
	if c := got.Counts; c != (jobq.TaskCounts{Succeeded: 2, Failed: 1, Cancelled: 2}) {
		t.Fatalf("counts = %+v", c)
	}
	ran.Range(func(k, _ any) bool {
		t.Errorf("a task cancelled by its dependency ran (job %v)", k)
		return true
	})
}

// A result belongs to the attempt that succeeded: one recorded by a
// failed attempt is not stored, and one too big is refused (the handler
// returns the error, so the attempt fails).
func TestWorkflowSetResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := jobq.SetResult(ctx, 1); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("SetResult outside a handler: %v, want ErrInvalidInput", err)
	}
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	tooBig := make(chan error, 1)
	reg.HandleFunc("wf.big", func(ctx context.Context, j *jobq.Job) error {
		err := jobq.SetResult(ctx, strings.Repeat("x", jobq.DefaultResultBytes))
		tooBig <- err
		return err
	})
	notUTF8 := make(chan error, 1)
	reg.HandleFunc("wf.bytes", func(ctx context.Context, j *jobq.Job) error {
		// JSON whose string holds a byte that is not UTF-8 (which
		// json.Valid takes): refused here, on every backend (issue 39).
		err := jobq.SetResult(ctx, json.RawMessage("\"a\xffb\""))
		notUTF8 <- err
		return err
	})
	reg.HandleFunc("wf.flaky", func(ctx context.Context, j *jobq.Job) error {
		if j.Attempt == 1 {
			if err := jobq.SetResult(ctx, "from the failed attempt"); err != nil {
				return jobq.Permanent(err)
			}
			return errors.New("try again")
		}
		return nil // records nothing: the first attempt's result must not survive
	})
	reg.HandleFunc("wf.last", func(ctx context.Context, j *jobq.Job) error {
		_ = jobq.SetResult(ctx, 1)
		_ = jobq.SetResult(ctx, json.RawMessage(`{"raw":true}`))
		return nil
	})
	reg.HandleFunc("wf.cleared", func(ctx context.Context, j *jobq.Job) error {
		_ = jobq.SetResult(ctx, 1)
		return jobq.SetResult(ctx, nil)
	})
	wf := jobq.NewWorkflow("results").
		AddJob("big", "wf.big", nil, jobq.MaxAttempts(1)).
		AddJob("bytes", "wf.bytes", nil, jobq.MaxAttempts(1)).
		AddJob("flaky", "wf.flaky", nil, jobq.MaxAttempts(2)).
		AddJob("last", "wf.last", nil).
		AddJob("cleared", "wf.cleared", nil)
	id, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueWorkflow(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, fastConfig())
	got := workflowOf(t, jobq.NewInspector(b), id)
	if err := <-tooBig; !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("SetResult of %d bytes: %v, want ErrInvalidInput", jobq.DefaultResultBytes+2, err)
	}
	if big := taskNamed(t, got, "big"); big.State != jobq.TaskFailed || big.Result != nil || !strings.Contains(big.Reason, "result") {
		t.Fatalf("big = %+v, want failed with the refusal and no result", big)
	}
	if err := <-notUTF8; !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("SetResult of JSON that is not UTF-8: %v, want ErrInvalidInput naming UTF-8", err)
	}
	if bytes := taskNamed(t, got, "bytes"); bytes.State != jobq.TaskFailed || bytes.Result != nil {
		t.Fatalf("bytes = %+v, want failed with the refusal and no result", bytes)
	}
	if flaky := taskNamed(t, got, "flaky"); flaky.State != jobq.TaskSucceeded || flaky.Result != nil {
		t.Fatalf("flaky = %+v (result %s), want succeeded with no result", flaky, flaky.Result)
	}
	if last := taskNamed(t, got, "last"); string(last.Result) != `{"raw":true}` {
		t.Fatalf("last result %s, want the last call's JSON text", last.Result)
	}
	if cleared := taskNamed(t, got, "cleared"); cleared.State != jobq.TaskSucceeded || cleared.Result != nil {
		t.Fatalf("cleared = %+v, want no result", cleared)
	}
}

// The dependency options belong to workflows: every plain enqueue refuses
// them, and a workflow that is built wrong is refused whole, naming what
// is wrong, with nothing written.
func TestWorkflowRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("wf.limited", func(context.Context, *jobq.Job) error { return nil }, jobq.HandlerOptions{MaxAttempts: 2})
	c := mustClient(t, b, jobq.ClientConfig{Registry: reg})
	const deps = "After and AfterEnded are for workflow tasks"
	plain := map[string]error{}
	_, plain["Enqueue"] = c.Enqueue(ctx, "x", nil, jobq.After("a"))
	_, plain["EnqueueMany"] = c.EnqueueMany(ctx, []jobq.JobSpec{{Type: "x"}, {Type: "x", Options: []jobq.EnqueueOption{jobq.AfterEnded()}}})
	_, plain["EnqueueArgs"] = c.EnqueueArgs(ctx, squareArgs{N: 1}, jobq.After("a"))
	for call, err := range plain {
		if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), deps) {
			t.Errorf("%s with a dependency option: %v; want ErrInvalidInput saying %q", call, err, deps)
		}
	}

	cases := []struct {
		name string
		wf   *jobq.Workflow
		want string
	}{
		{"empty", jobq.NewWorkflow("e"), "at least one task"},
		{"duplicate name", jobq.NewWorkflow("d").AddJob("a", "x", nil).AddJob("a", "x", nil), `"a" appears twice`},
		{"unknown dependency", jobq.NewWorkflow("u").AddJob("a", "x", nil, jobq.After("ghost")), `"ghost"`},
		{"cycle", jobq.NewWorkflow("c").AddJob("a", "x", nil, jobq.After("b")).AddJob("b", "x", nil, jobq.AfterEnded("a")), "cycle"},
		{"unique key", jobq.NewWorkflow("k").AddJob("a", "x", nil, jobq.UniqueKey("k")), "unique key"},
		{"nil args", jobq.NewWorkflow("n").Add("a", nil), "Kind"},
		{"bad payload", jobq.NewWorkflow("p").AddJob("a", "x", json.RawMessage("{")), `task "a"`},
		{"registry limit", jobq.NewWorkflow("r").AddJob("a", "wf.limited", nil, jobq.MaxAttempts(5)), "contradicts"},
		{"kind mismatch", jobq.NewWorkflow("m").AddJob("a", "other", squareArgs{}), "wf.square"},
		{"bad queue", jobq.NewWorkflow("q").AddJob("a", "x", nil, jobq.Queue("no spaces")), `task "a"`},
	}
	for _, tc := range cases {
		_, err := c.EnqueueWorkflow(ctx, tc.wf)
		if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidInput mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := c.EnqueueWorkflow(ctx, nil); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Errorf("nil workflow: %v, want ErrInvalidInput", err)
	}
	insp := jobq.NewInspector(b)
	if stats, err := insp.WorkflowStats(ctx); err != nil || stats != (jobq.WorkflowStats{}) {
		t.Fatalf("after refusals: stats %+v, %v; want nothing written", stats, err)
	}
	if qs, err := insp.Stats(ctx); err != nil || jobq.Totals(qs).Pending != 0 {
		t.Fatalf("after refusals: queues %+v, %v; want no job", qs, err)
	}
}

// A backend that runs no workflows says so with ErrNoWorkflows (which is
// also ErrNotSupported), from the client and every inspector method; the
// memory backend runs workflows but has no transactions.
func TestWorkflowUnsupported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := jobq.NewRegistry()
	s := inline.New()
	c := mustClient(t, s, jobq.ClientConfig{Registry: reg})
	wf := jobq.NewWorkflow("w").AddJob("a", "x", nil)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, jobq.ErrNoWorkflows) || !errors.Is(err, jobq.ErrNotSupported) || !strings.Contains(err.Error(), "sync backend") {
			t.Errorf("%s on sync: %v; want ErrNoWorkflows (and ErrNotSupported) naming the sync backend", what, err)
		}
	}
	_, err := c.EnqueueWorkflow(ctx, wf)
	check("EnqueueWorkflow", err)
	_, err = c.EnqueueWorkflowTx(ctx, nil, wf)
	check("EnqueueWorkflowTx", err)
	insp := jobq.NewInspector(s)
	_, err = insp.Workflows(ctx, "", 0, 0)
	check("Workflows", err)
	_, err = insp.Workflow(ctx, 1)
	check("Workflow", err)
	_, err = insp.CancelWorkflow(ctx, 1)
	check("CancelWorkflow", err)
	_, err = insp.WorkflowStats(ctx)
	check("WorkflowStats", err)
	_, err = insp.WorkflowCheck(ctx)
	check("WorkflowCheck", err)

	m := newMemory(t, nil)
	_, err = mustClient(t, m, jobq.ClientConfig{}).EnqueueWorkflowTx(ctx, nil, wf)
	if !errors.Is(err, jobq.ErrNotSupported) || errors.Is(err, jobq.ErrNoWorkflows) {
		t.Fatalf("EnqueueWorkflowTx on memory: %v; want ErrNotSupported, not ErrNoWorkflows", err)
	}
}

// Dependencies and DependencyResult in a job that is no task are
// ErrNotTask: a wiring mistake, not a transient failure.
func TestWorkflowNotTask(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	errs := make(chan [2]error, 1)
	reg.HandleFunc("plain", func(ctx context.Context, j *jobq.Job) error {
		_, e1 := jobq.Dependencies(ctx)
		var v any
		e2 := jobq.DependencyResult(ctx, "a", &v)
		errs <- [2]error{e1, e2}
		return nil
	})
	if _, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "plain", nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, fastConfig())
	for _, err := range <-errs {
		if !errors.Is(err, jobq.ErrNotTask) {
			t.Fatalf("in a plain job: %v, want ErrNotTask", err)
		}
	}
	if _, err := jobq.Dependencies(context.Background()); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("Dependencies outside a handler: %v, want ErrInvalidInput", err)
	}
}

// The client's hooks see every task, and what BeforeEnqueue adds to the
// metadata reaches the handler of a task released later by the backend.
func TestWorkflowClientHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	var mu sync.Mutex
	after := map[string]jobq.EnqueueResult{}
	hooks := jobq.ClientHooks{
		BeforeEnqueue: func(ctx context.Context, job *jobq.EnqueueInfo) error {
			job.Metadata["trace"] = "t-" + job.Type
			return nil
		},
		AfterEnqueue: func(ctx context.Context, job jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
			if err != nil {
				t.Errorf("AfterEnqueue of %s: %v", job.Type, err)
			}
			mu.Lock()
			after[job.Type] = res
			mu.Unlock()
		},
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("wf.first", func(context.Context, *jobq.Job) error { return nil })
	traces := make(chan string, 1)
	reg.HandleFunc("wf.second", func(ctx context.Context, j *jobq.Job) error {
		traces <- j.Metadata["trace"]
		return nil
	})
	wf := jobq.NewWorkflow("hooks").
		AddJob("first", "wf.first", nil).
		AddJob("second", "wf.second", nil, jobq.After("first"))
	if _, err := mustClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{hooks}}).EnqueueWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(after) != 2 || after["wf.first"].ID == 0 || after["wf.second"].ID != 0 {
		t.Errorf("AfterEnqueue saw %+v; want both tasks, the first with its job ID, the waiting one with 0", after)
	}
	mu.Unlock()
	startWorker(t, b, reg, fastConfig())
	if got := <-traces; got != "t-wf.second" {
		t.Fatalf("the released task's metadata trace = %q, want t-wf.second", got)
	}
}

// The inspector lists, shows, counts, checks and cancels workflows.
func TestWorkflowInspector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	insp := jobq.NewInspector(b)
	var ids []int64
	for i := range 3 {
		// No worker runs: each first task's job stays pending, the
		// second waits.
		wf := jobq.NewWorkflow(fmt.Sprintf("wf-%d", i)).
			AddJob("first", "x", nil, jobq.Delay(time.Hour)).
			AddJob("second", "x", nil, jobq.After("first"))
		id, err := c.EnqueueWorkflow(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	list, err := insp.Workflows(ctx, "running", 2, 0)
	if err != nil || len(list) != 2 || list[0].ID != ids[2] || list[1].ID != ids[1] || list[0].Tasks != nil ||
		list[0].Counts != (jobq.TaskCounts{Waiting: 1, Active: 1}) {
		t.Fatalf("first page = %+v, %v; want the two newest, without tasks, one active and one waiting each", list, err)
	}
	if next, err := insp.Workflows(ctx, "", 10, list[1].ID); err != nil || len(next) != 1 || next[0].ID != ids[0] {
		t.Fatalf("next page = %+v, %v; want the oldest", next, err)
	}
	if _, err := insp.Workflows(ctx, "done", 0, 0); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "running, succeeded, failed or cancelled") {
		t.Fatalf("bad state: %v, want ErrInvalidInput naming the states", err)
	}
	got, err := insp.Workflow(ctx, ids[0])
	if err != nil || len(got.Tasks) != 2 || got.Tasks[0].Name != "first" || got.Tasks[0].JobID == 0 ||
		got.Tasks[1].State != jobq.TaskWaiting || len(got.Tasks[1].WaitingOn) != 1 || got.Tasks[1].WaitingOn[0] != "first" {
		t.Fatalf("workflow = %+v, %v", got, err)
	}
	if _, err := insp.Workflow(ctx, 999); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("unknown workflow: %v, want ErrNotFound", err)
	}
	if _, err := insp.Workflow(ctx, 0); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("workflow 0: %v, want ErrInvalidInput", err)
	}
	if drift, err := insp.WorkflowCheck(ctx); err != nil || len(drift) != 0 {
		t.Fatalf("check = %v, %v; want no drift", drift, err)
	}

	res, err := insp.CancelWorkflow(ctx, ids[0])
	if err != nil || !res.Changed || res.State != jobq.WorkflowCancelled || res.Cancelled != 2 || res.Requested != 0 {
		t.Fatalf("cancel = %+v, %v; want both tasks cancelled at once", res, err)
	}
	if res, err := insp.CancelWorkflow(ctx, ids[0]); err != nil || res.Changed || res.State != jobq.WorkflowCancelled {
		t.Fatalf("second cancel = %+v, %v; want unchanged", res, err)
	}
	if _, err := insp.CancelWorkflow(ctx, 999); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("cancel unknown: %v, want ErrNotFound", err)
	}
	if _, err := b.JobGet(ctx, got.Tasks[0].JobID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the cancelled workflow's pending job is still live: %v", err)
	}
	cancelled, err := insp.Workflows(ctx, "cancelled", 0, 0)
	if err != nil || len(cancelled) != 1 || cancelled[0].ID != ids[0] {
		t.Fatalf("cancelled = %+v, %v", cancelled, err)
	}
	stats, err := insp.WorkflowStats(ctx)
	if err != nil || stats != (jobq.WorkflowStats{Running: 2, Cancelled: 1, TasksWaiting: 2}) {
		t.Fatalf("stats = %+v, %v", stats, err)
	}
}

// The worker's prune loop deletes ended workflows past WorkflowRetention.
func TestWorkflowRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("x", func(context.Context, *jobq.Job) error { return nil })
	id, err := mustClient(t, b, jobq.ClientConfig{}).EnqueueWorkflow(ctx, jobq.NewWorkflow("old").AddJob("a", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.WorkflowRetention = time.Hour
	cfg.Retention.PruneInterval = 10 * time.Millisecond
	startWorker(t, b, reg, cfg)
	insp := jobq.NewInspector(b)
	if wf := workflowOf(t, insp, id); wf.State != jobq.WorkflowSucceeded {
		t.Fatalf("state %s, want succeeded", wf.State)
	}
	clock.Advance(2 * time.Hour)
	eventually(t, settle, "the workflow to be pruned", func() bool {
		_, err := insp.Workflow(ctx, id)
		return errors.Is(err, jobq.ErrNotFound)
	})
}
