package jobq_test

// Workflows across real operating-system processes, on every durable
// backend: a 1,000-way fan-in worked by three worker processes, and a
// worker killed with SIGKILL right before and right after the completion
// of a join's last dependency is written. The worker processes are this
// test binary re-executed (see init below); each appends a line per
// handler event to a ledger file of its own.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
	"github.com/jobq/jobq/internal/proctest"
)

const (
	wfURLEnv    = "JOBQ_TEST_WF_URL"
	wfLedgerEnv = "JOBQ_TEST_WF_LEDGER"
	wfConcEnv   = "JOBQ_TEST_WF_CONCURRENCY"
	// wfDieEnv makes the process kill itself (SIGKILL) at the completion
	// of the task named "last": "before" it is written (in the handler,
	// its work done) or "after" (in the Written hook, once the backend
	// applied it).
	wfDieEnv = "JOBQ_TEST_WF_DIE"
	wfQueue  = "wf"
)

func init() {
	if os.Getenv(wfURLEnv) != "" {
		os.Exit(runWorkflowChild())
	}
}

// wfTask is a workflow task's payload: its name.
type wfTask struct {
	Task string `json:"task"`
}

// Kind makes wfTask the Args of the "wft" jobs.
func (wfTask) Kind() string { return "wft" }

// runWorkflowChild works the wf queue until SIGTERM (or the test process
// is gone). Each attempt writes
// "start TASK JOB ATTEMPT PID NANOS" and, when it succeeds,
// "ok TASK JOB ATTEMPT PID NANOS"; the join's start line ends with how
// many of its dependencies the backend shows succeeded ("deps=N/M").
func runWorkflowChild() int {
	ctx, stop := proctest.ChildContext()
	defer stop()
	b, err := backend.Open(ctx, os.Getenv(wfURLEnv))
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	ledger, err := os.OpenFile(os.Getenv(wfLedgerEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return childFailed(ctx, "ledger", err)
	}
	defer ledger.Close()
	die := os.Getenv(wfDieEnv)
	conc, _ := strconv.Atoi(os.Getenv(wfConcEnv))
	var mu sync.Mutex
	note := func(event string, p wfTask, j *jobq.Job, extra string) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(ledger, "%s %s %d %d %d %d%s\n", event, p.Task, j.ID, j.Attempt, os.Getpid(), time.Now().UnixNano(), extra)
		return err
	}
	kill := func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	reg := jobq.NewRegistry()
	jobq.HandleArgs(reg, func(ctx context.Context, p wfTask) error {
		j, _ := jobq.JobFromContext(ctx)
		if p.Task == "join" && die != "" {
			// One slot wide, a dying process can claim the join that
			// last's completion released before the Written hook kills
			// it. Its attempt dies unstarted; the test counts the
			// join's runs, and that one never ran.
			select {}
		}
		extra := ""
		if p.Task == "join" {
			deps, err := jobq.Dependencies(ctx)
			if err != nil {
				return err
			}
			ok := 0
			for _, d := range deps {
				if d.State == jobq.TaskSucceeded {
					ok++
				}
			}
			extra = fmt.Sprintf(" deps=%d/%d", ok, len(deps))
		}
		if err := note("start", p, j, extra); err != nil {
			return err
		}
		// A little work, so that one process does not end a
		// thousand parts before the others have claimed any.
		time.Sleep(2 * time.Millisecond)
		if p.Task == "last" && die == "before" {
			kill()
		}
		return note("ok", p, j, "")
	})
	hooks := jobq.WorkerHooks{Written: func(e jobq.Event) {
		if die == "after" && e.Kind == jobq.EventDone && e.Job != nil && strings.Contains(string(e.Job.Payload), `"last"`) {
			kill()
		}
	}}
	// A dying process holds its jobs under a short lease, so that the
	// test's second process rescues them within seconds. The others hold
	// theirs longer: on a loaded machine (a CPU hog beside the suite) a
	// 2 s lease expired before some parts' completions were written,
	// three times over, and their attempts ran out.
	lease := 15 * time.Second
	if die != "" {
		lease = 2 * time.Second
	}
	// The "up" line tells the test the worker is made: work it
	// enqueues next finds every process.
	return runChildWorker(ctx, b, reg, jobq.WorkerConfig{
		Queues: []string{wfQueue}, Concurrency: conc, PollInterval: 20 * time.Millisecond,
		Lease: lease, SweepInterval: 200 * time.Millisecond, Logger: quietLog,
		Hooks: []jobq.WorkerHooks{hooks},
	}, func() error {
		_, err := fmt.Fprintf(ledger, "up %d\n", os.Getpid())
		return err
	})
}

// wfRun is one test's store, its worker processes and their ledgers.
type wfRun struct {
	t     *testing.T
	b     backend.Backend
	w     backend.Workflower
	url   string
	dir   string
	procs []*proctest.Proc
}

func newWfRun(t *testing.T, url string) *wfRun {
	t.Helper()
	b, err := backend.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("open %s: %v", backend.RedactURL(url), err)
	}
	t.Cleanup(func() { b.Close() })
	w, ok := b.(backend.Workflower)
	if !ok {
		t.Fatalf("%T does not implement backend.Workflower", b)
	}
	return &wfRun{t: t, b: b, w: w, url: url, dir: t.TempDir()}
}

// start starts a worker process with concurrency slots that dies as die
// says ("" for never).
func (r *wfRun) start(concurrency int, die string) *proctest.Proc {
	r.t.Helper()
	p := proctest.StartProc(r.t, wfURLEnv+"="+r.url, wfConcEnv+"="+strconv.Itoa(concurrency), wfDieEnv+"="+die,
		wfLedgerEnv+"="+filepath.Join(r.dir, fmt.Sprintf("ledger%d", len(r.procs))))
	r.procs = append(r.procs, p)
	return p
}

// stop stops every process still running with SIGTERM and asserts each
// exited 0.
func (r *wfRun) stop() {
	r.t.Helper()
	var running []*proctest.Proc
	for _, p := range r.procs {
		if p.Running() {
			running = append(running, p)
		}
	}
	proctest.StopAll(r.t, running...)
}

// waitUp waits until every process started has its worker made (its
// ledger's "up" line), so that work enqueued next finds them all.
func (r *wfRun) waitUp() {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < len(r.procs); {
		b, _ := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("ledger%d", i)))
		switch {
		case strings.HasPrefix(string(b), "up "):
			i++
		case time.Now().After(deadline):
			r.t.Fatalf("worker process %d did not start within a minute", i)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// enqueue stores wf through a client and returns its ID.
func (r *wfRun) enqueue(wf *jobq.Workflow) int64 {
	r.t.Helper()
	c, err := jobq.NewClient(r.b, jobq.ClientConfig{})
	if err != nil {
		r.t.Fatal(err)
	}
	id, err := c.EnqueueWorkflow(r.t.Context(), wf)
	if err != nil {
		r.t.Fatalf("enqueue workflow: %v", err)
	}
	return id
}

// waitEnded waits until workflow id is no longer running, sampling
// WorkflowCheck all along: every stored count must agree with its
// recomputation at every sample. It fails the test when no task has
// ended for stall (how long the whole takes depends on the machine's
// load; a workflow that stops moving is what fails).
func (r *wfRun) waitEnded(id int64, stall time.Duration) *backend.Workflow {
	r.t.Helper()
	ctx := r.t.Context()
	ended, moved := -1, time.Now()
	for samples := 0; ; samples++ {
		drift, err := r.w.WorkflowCheck(ctx)
		if err != nil {
			r.t.Fatalf("WorkflowCheck: %v", err)
		}
		for _, d := range drift {
			if d.WorkflowID == id {
				r.t.Errorf("sample %d: %s", samples, d)
			}
		}
		wf, err := r.w.WorkflowGet(ctx, id)
		if err != nil {
			r.t.Fatalf("WorkflowGet %d: %v", id, err)
		}
		if wf.State != backend.WorkflowRunning {
			r.t.Logf("workflow %d %s after %d consistency samples", id, wf.State, samples)
			return wf
		}
		if n := wf.Counts.Succeeded + wf.Counts.Failed + wf.Counts.Cancelled; n != ended {
			ended, moved = n, time.Now()
		}
		if time.Since(moved) > stall {
			r.t.Fatalf("workflow %d stuck: %d tasks ended, none for %s; counts %+v", id, ended, stall, wf.Counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failedErrors lists the errors of the failed jobs, to say why a
// workflow failed.
func (r *wfRun) failedErrors() string {
	fs, err := r.b.FailedList(r.t.Context(), backend.FailedListParams{Limit: 20})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s attempt %d: %s", f.Type, f.Attempts, f.Error))
	}
	return strings.Join(out, "; ")
}

// wfLine is one ledger line.
type wfLine struct {
	event, task string
	job         int64
	attempt     int
	pid         int
	at          int64
	deps        string
}

// lines reads every ledger.
func (r *wfRun) lines() []wfLine {
	r.t.Helper()
	var out []wfLine
	for i := range r.procs {
		f, err := os.Open(filepath.Join(r.dir, fmt.Sprintf("ledger%d", i)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			r.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l wfLine
			fs := strings.Fields(sc.Text())
			if len(fs) == 2 && fs[0] == "up" {
				continue
			}
			if len(fs) < 6 {
				r.t.Fatalf("ledger line %q", sc.Text())
			}
			l.event, l.task = fs[0], fs[1]
			l.job, _ = strconv.ParseInt(fs[2], 10, 64)
			l.attempt, _ = strconv.Atoi(fs[3])
			l.pid, _ = strconv.Atoi(fs[4])
			l.at, _ = strconv.ParseInt(fs[5], 10, 64)
			if len(fs) > 6 {
				l.deps = strings.TrimPrefix(fs[6], "deps=")
			}
			out = append(out, l)
		}
		f.Close()
	}
	return out
}

// TestProcessWorkflowFanIn1000: 1,000 parts and a join, worked by three
// worker processes at once. The join runs exactly once, after every
// part's success, and sees all 1,000 succeeded; no stored count is ever
// off (sampled while the processes work); more than one process worked
// the parts.
func TestProcessWorkflowFanIn1000(t *testing.T) {
	t.Parallel()
	for _, st := range durableStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			r := newWfRun(t, st.URL(t))
			const n = 1000
			wf := jobq.NewWorkflow("fan-in")
			parts := make([]string, n)
			for i := range parts {
				parts[i] = fmt.Sprintf("part%04d", i)
				wf.Add(parts[i], wfTask{parts[i]}, jobq.Queue(wfQueue))
			}
			wf.Add("join", wfTask{"join"}, jobq.Queue(wfQueue), jobq.After(parts...))
			for range 3 {
				r.start(8, "")
			}
			r.waitUp()
			id := r.enqueue(wf)
			got := r.waitEnded(id, time.Minute)
			r.stop()
			if got.State != backend.WorkflowSucceeded {
				t.Fatalf("workflow %s: %+v; failed jobs: %s", got.State, got.Counts, r.failedErrors())
			}

			var joins []wfLine
			lastPart := int64(0)
			partOK := map[string]int{}
			pids := map[int]bool{}
			for _, l := range r.lines() {
				switch {
				case l.task == "join" && l.event == "start":
					joins = append(joins, l)
				case l.task != "join" && l.event == "ok":
					partOK[l.task]++
					pids[l.pid] = true
					lastPart = max(lastPart, l.at)
				}
			}
			if len(partOK) != n {
				t.Errorf("%d parts succeeded, want %d", len(partOK), n)
			}
			if len(joins) != 1 {
				t.Fatalf("the join started %d times, want once: %+v", len(joins), joins)
			}
			if joins[0].deps != "1000/1000" {
				t.Errorf("the join saw deps=%s, want 1000/1000", joins[0].deps)
			}
			if joins[0].at < lastPart {
				t.Errorf("the join started %s before the last part's success", time.Duration(lastPart-joins[0].at))
			}
			if len(pids) < 2 {
				t.Errorf("the parts ran in %d process(es), want several", len(pids))
			}
			t.Logf("parts by %d processes, the join once (job %d)", len(pids), joins[0].job)
		})
	}
}

// TestProcessWorkflowKillAroundLastDependency: a worker process is killed
// with SIGKILL at the completion of the join's last dependency, before
// the completion is written or right after. A second process takes over:
// either way the join becomes runnable exactly once and runs once.
// Parts a and b go first (a higher priority) so that the dying process,
// one slot wide, ends them before it claims "last".
func TestProcessWorkflowKillAroundLastDependency(t *testing.T) {
	t.Parallel()
	for _, st := range durableStores {
		for _, die := range []string{"before", "after"} {
			t.Run(st.Name+"/"+die, func(t *testing.T) {
				t.Parallel()
				r := newWfRun(t, st.URL(t))
				wf := jobq.NewWorkflow("kill-"+die).
					Add("a", wfTask{"a"}, jobq.Queue(wfQueue), jobq.Priority(10)).
					Add("b", wfTask{"b"}, jobq.Queue(wfQueue), jobq.Priority(10)).
					Add("last", wfTask{"last"}, jobq.Queue(wfQueue)).
					Add("join", wfTask{"join"}, jobq.Queue(wfQueue), jobq.After("a", "b", "last"))
				id := r.enqueue(wf)

				dying := r.start(1, die)
				for deadline := time.Now().Add(time.Minute); dying.Running(); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the dying worker still runs after a minute:\n%s", dying.Output())
					}
				}
				var ee *exec.ExitError
				if err := dying.Err(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the dying worker ended with %v, want SIGKILL:\n%s", err, dying.Output())
				}
				mid, err := r.w.WorkflowGet(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				wantJoin := map[string]backend.TaskState{"before": backend.TaskWaiting, "after": backend.TaskActive}[die]
				if j := mid.Tasks[3]; j.Name != "join" || j.State != wantJoin {
					t.Fatalf("after the kill the join is %s, want %s", j.State, wantJoin)
				}

				r.start(2, "")
				got := r.waitEnded(id, time.Minute)
				r.stop()
				if got.State != backend.WorkflowSucceeded {
					t.Fatalf("workflow %s: %+v; failed jobs: %s", got.State, got.Counts, r.failedErrors())
				}
				var last, joins []wfLine
				var lastOK int64
				for _, l := range r.lines() {
					switch {
					case l.task == "join" && l.event == "start":
						joins = append(joins, l)
					case l.task == "last":
						last = append(last, l)
						if l.event == "ok" {
							lastOK = l.at
						}
					}
				}
				if len(joins) != 1 {
					t.Fatalf("the join started %d times, want once: %+v", len(joins), joins)
				}
				if joins[0].deps != "3/3" || joins[0].at < lastOK {
					t.Errorf("the join saw deps=%s at %d, want 3/3 after last's success at %d", joins[0].deps, joins[0].at, lastOK)
				}
				// Before: attempt 1 died unwritten, the sweep gave the job
				// to the second process, whose attempt 2 released the join.
				// After: attempt 1's completion stood; "last" never ran again.
				want := map[string]string{
					"before": "start 1,start 2,ok 2",
					"after":  "start 1,ok 1",
				}[die]
				var seen []string
				for _, l := range last {
					seen = append(seen, fmt.Sprintf("%s %d", l.event, l.attempt))
				}
				if strings.Join(seen, ",") != want {
					t.Errorf("task last: %s, want %s", strings.Join(seen, ","), want)
				}
				if drift, err := r.w.WorkflowCheck(t.Context()); err != nil || len(drift) > 0 {
					t.Errorf("WorkflowCheck: %v %v", drift, err)
				}
			})
		}
	}
}
