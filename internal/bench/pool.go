package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// workers is a workload's worker side: one jobq.Worker on the workload's
// queue, in this process (pool) or, with Config.WorkerProcess, in a
// worker process of its own (proc). Either counts the attempts that ended
// in a tally, so a workload waits for "all done" without polling the
// backend.
type workers interface {
	// begin starts working the queue. The worker is made (and, in a
	// worker process, the store opened) before: a workload that times
	// the worker starts its clock just before begin.
	begin() error
	// done is how many attempts succeeded so far.
	done() int64
	// waitDone blocks until n attempts succeeded (see tally.waitDone).
	waitDone(ctx context.Context, n int64, stall time.Duration) error
	// starts returns the starts the handler recorded (latency, fairness).
	starts() []stamp
	// cost is what the bench has spent so far: this process, plus the
	// worker process when there is one (see cost).
	cost() (cost, error)
	// stop shuts the worker down and returns once it has written every
	// outcome (and the worker process has exited). It may be called again.
	stop() error
}

// stamp is one handler start a workload measures: At is its wall clock
// (UnixNano, the same clock in every process of the machine); Ref the
// producer's clock the job carries (latency's enqueue time), or 0.
type stamp struct{ Ref, At int64 }

// handlerFor is workload's handler: it does no work, and for latency and
// fairness passes the start of each job they measure to record. The
// in-process worker and the worker process run the same one.
func handlerFor(workload string, record func(stamp)) jobq.HandlerFunc {
	switch workload {
	case Latency:
		return func(_ context.Context, job *jobq.Job) error {
			started := time.Now()
			var p latencyPayload
			if err := json.Unmarshal(job.Payload, &p); err != nil {
				return jobq.Permanent(err)
			}
			if !p.Warmup {
				record(stamp{Ref: p.EnqueuedAt, At: started.UnixNano()})
			}
			return nil
		}
	case Fairness:
		return func(_ context.Context, j *jobq.Job) error {
			if j.Key != "hot" {
				record(stamp{At: time.Now().UnixNano()})
			}
			return nil
		}
	}
	return noop
}

func noop(context.Context, *jobq.Job) error { return nil }

// tally counts a worker's attempts and keeps the starts its handler
// recorded.
type tally struct {
	ok     atomic.Int64 // attempts that succeeded
	other  atomic.Int64 // attempts that did not (retry, failed, released)
	notify chan struct{}
	// credits, when set, gets one value taken back per successful attempt:
	// the steady producers put one in per job, which bounds the backlog.
	credits chan struct{}
	mu      sync.Mutex
	stamps  []stamp
	// quit, when set (a worker process), is closed when the worker
	// stopped reporting (its process exited); quitErr then says why.
	quit    <-chan struct{}
	quitErr func() error
}

func newTally(credits chan struct{}) *tally {
	return &tally{notify: make(chan struct{}, 1), credits: credits}
}

// count counts ev: the in-process worker's Finished hook, the worker
// process's Written hook.
func (t *tally) count(ev jobq.Event) {
	if ev.Kind == jobq.EventDone {
		t.add(1, 0)
	} else {
		t.add(0, 1)
	}
}

// add counts ok successful attempts and other unsuccessful ones.
func (t *tally) add(ok, other int64) {
	if ok > 0 {
		t.ok.Add(ok)
		for range ok {
			select {
			case <-t.credits: // nil when unused: never ready
			default:
			}
		}
	}
	if other > 0 {
		t.other.Add(other)
	}
	select {
	case t.notify <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (t *tally) record(s stamp) {
	t.mu.Lock()
	t.stamps = append(t.stamps, s)
	t.mu.Unlock()
}

// take returns the stamps recorded since the last take.
func (t *tally) take() []stamp {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stamps
	t.stamps = nil
	return s
}

func (t *tally) done() int64 { return t.ok.Load() }

func (t *tally) starts() []stamp {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.stamps)
}

// waitDone blocks until n attempts succeeded. It gives up when ctx ends,
// when an attempt did not succeed, when a worker process quit, or when no
// job finished for stall, so a broken backend fails the run instead of
// hanging it.
func (t *tally) waitDone(ctx context.Context, n int64, stall time.Duration) error {
	last := t.ok.Load()
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for last < n && t.other.Load() == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.notify:
			if d := t.ok.Load(); d != last {
				last = d
				timer.Reset(stall)
			}
		case <-t.quit: // nil for the in-process worker: never ready
			if last = t.ok.Load(); last >= n {
				continue
			}
			if err := ctx.Err(); err != nil { // an interrupt stopped both
				return err
			}
			return fmt.Errorf("%d of %d jobs done: %w", last, n, t.quitErr())
		case <-timer.C:
			return fmt.Errorf("stalled: %d of %d jobs done and none for %s (%d attempts did not succeed)", last, n, stall, t.other.Load())
		}
	}
	if o := t.other.Load(); o > 0 {
		return fmt.Errorf("%d no-op attempts did not succeed", o)
	}
	return nil
}

// newWorker makes the worker of workload's jobs on queue with Workers
// slots, handling noopType with handler; hooks report its attempts.
func newWorker(cfg Config, queue string, handler jobq.HandlerFunc, hooks jobq.WorkerHooks) (*jobq.Worker, error) {
	reg := jobq.NewRegistry()
	reg.Use(cfg.Middleware...)
	reg.HandleFunc(noopType, handler)
	w, err := jobq.NewWorker(cfg.Backend, reg, jobq.WorkerConfig{
		Queues: []string{queue}, Concurrency: cfg.Workers, Logger: cfg.Log,
		Hooks:     append(slices.Clip(cfg.WorkerHooks), hooks),
		Retention: jobq.Retention{Completed: cfg.KeepCompleted},
	})
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	return w, nil
}

// startWorkers makes workload's worker side on queue, ready to begin: in
// this process, or with cfg.WorkerProcess in a worker process that has
// opened the store and said it is ready. credits may be nil.
func startWorkers(ctx context.Context, cfg Config, queue, workload string, credits chan struct{}) (workers, error) {
	if cfg.WorkerProcess != nil {
		return startProc(ctx, cfg, queue, workload, credits)
	}
	return startPool(ctx, cfg, queue, workload, credits)
}

// runWorkers is startWorkers and begin, for the workloads that do not
// time the worker's start.
func runWorkers(ctx context.Context, cfg Config, queue, workload string, credits chan struct{}) (workers, error) {
	p, err := startWorkers(ctx, cfg, queue, workload, credits)
	if err != nil {
		return nil, err
	}
	if err := p.begin(); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// pool is the worker side in this process: a jobq.Worker counting its
// attempts through a Finished hook.
type pool struct {
	*tally
	w      *jobq.Worker
	ctx    context.Context
	cancel context.CancelFunc
	ran    chan error // nil until begin
	err    error      // what the worker's Run returned, once stopped
}

func startPool(ctx context.Context, cfg Config, queue, workload string, credits chan struct{}) (*pool, error) {
	p := &pool{tally: newTally(credits)}
	w, err := newWorker(cfg, queue, handlerFor(workload, p.record), jobq.WorkerHooks{Finished: p.count})
	if err != nil {
		return nil, err
	}
	p.w = w
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p, nil
}

func (p *pool) begin() error {
	if p.ran == nil {
		p.ran = make(chan error, 1)
		go func() { p.ran <- p.w.Run(p.ctx) }()
	}
	return nil
}

func (p *pool) cost() (cost, error) { return costNow(), nil }

func (p *pool) stop() error {
	p.cancel()
	if p.ran != nil {
		p.err = <-p.ran
		p.ran = nil
	}
	return p.err
}

// insertN enqueues n no-op jobs on queue in batches of batch, reporting
// each batch to added (may be nil). With keys > 0 job i gets key i mod
// keys ("k0", "k1", ...).
func insertN(ctx context.Context, c *jobq.Client, queue string, n, batch, keys int, added *atomic.Int64) error {
	specs := make([]jobq.JobSpec, 0, batch)
	opt := []jobq.EnqueueOption{jobq.Queue(queue)}
	for left, i := n, 0; left > 0; {
		k := min(batch, left)
		specs = specs[:0]
		for range k {
			o := opt
			if keys > 0 {
				o = []jobq.EnqueueOption{opt[0], jobq.Key("k" + strconv.Itoa(i%keys))}
			}
			specs = append(specs, jobq.JobSpec{Type: noopType, Payload: noopPayload, Options: o})
			i++
		}
		if _, err := c.EnqueueMany(ctx, specs); err != nil {
			return err
		}
		left -= k
		if added != nil {
			added.Add(int64(k))
		}
	}
	return nil
}

// workOff runs n jobs already queued on workload's queue to completion,
// untimed, so a workload leaves its queue empty.
func workOff(ctx context.Context, cfg Config, queue, workload string, n int64) error {
	if n == 0 {
		return checkEmpty(ctx, cfg, queue)
	}
	p, err := runWorkers(ctx, cfg, queue, workload, nil)
	if err != nil {
		return err
	}
	werr := p.waitDone(ctx, n, cfg.Stall)
	if err := p.stop(); err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("work off the jobs left on %s: %w", queue, werr)
	}
	return checkEmpty(ctx, cfg, queue)
}

// checkEmpty confirms through the backend's own counts that queue holds no
// job in any state, so a workload's "all done" is not just the worker's word.
func checkEmpty(ctx context.Context, cfg Config, queue string) error {
	stats, err := jobq.NewInspector(cfg.Backend).Stats(ctx)
	if err != nil {
		return err
	}
	for _, s := range stats {
		if s.Queue == queue && s.Pending+s.Scheduled+s.Reserved+s.Failed != 0 {
			return fmt.Errorf("queue %s is not empty after the run: %d pending, %d scheduled, %d reserved, %d failed",
				queue, s.Pending, s.Scheduled, s.Reserved, s.Failed)
		}
	}
	return nil
}
