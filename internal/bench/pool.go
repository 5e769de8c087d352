package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// pool is one in-process jobq.Worker on a queue, counting finished attempts
// through a WorkerHooks.Finished hook so a workload can wait for "all done" without
// polling the backend.
type pool struct {
	done   atomic.Int64 // attempts that succeeded
	other  atomic.Int64 // attempts that did not (retry, failed, released)
	notify chan struct{}
	// credits, when set, gets one value taken back per successful attempt:
	// the steady producers put one in per job, which bounds the backlog.
	credits chan struct{}
	cancel  context.CancelFunc
	ran     chan error
}

// startPool runs a worker with concurrency slots on queue, handling
// noopType with handler, until stop. credits may be nil.
func startPool(ctx context.Context, cfg Config, queue string, concurrency int, handler jobq.HandlerFunc, credits chan struct{}) (*pool, error) {
	reg := jobq.NewRegistry()
	reg.Use(cfg.Middleware...)
	reg.HandleFunc(noopType, handler)
	p := &pool{notify: make(chan struct{}, 1), ran: make(chan error, 1), credits: credits}
	hooks := append(slices.Clip(cfg.WorkerHooks), jobq.WorkerHooks{Finished: p.onEvent})
	w, err := jobq.NewWorker(cfg.Backend, reg, jobq.WorkerConfig{
		Queues: []string{queue}, Concurrency: concurrency, Logger: cfg.Log, Hooks: hooks,
		Retention: jobq.Retention{Completed: cfg.KeepCompleted},
	})
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() { p.ran <- w.Run(wctx) }()
	return p, nil
}

func noop(context.Context, *jobq.Job) error { return nil }

func (p *pool) onEvent(ev jobq.Event) {
	if ev.Kind == jobq.EventDone {
		p.done.Add(1)
		select {
		case <-p.credits: // nil when unused: never ready
		default:
		}
	} else {
		p.other.Add(1)
	}
	select {
	case p.notify <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// waitDone blocks until n attempts succeeded. It gives up when ctx ends or
// when no job finished for stall, so a broken backend fails the run instead
// of hanging it.
func (p *pool) waitDone(ctx context.Context, n int64, stall time.Duration) error {
	last := p.done.Load()
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for last < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.notify:
			if d := p.done.Load(); d != last {
				last = d
				timer.Reset(stall)
			}
		case <-timer.C:
			return fmt.Errorf("stalled: %d of %d jobs done and none for %s (%d attempts did not succeed)", last, n, stall, p.other.Load())
		}
	}
	if o := p.other.Load(); o > 0 {
		return fmt.Errorf("%d no-op attempts did not succeed", o)
	}
	return nil
}

// stop shuts the worker down and returns once it has written every outcome.
func (p *pool) stop() error {
	p.cancel()
	return <-p.ran
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

// workOff runs n jobs already queued on queue to completion, untimed, so a
// workload leaves its queue empty.
func workOff(ctx context.Context, cfg Config, queue string, n int64) error {
	if n == 0 {
		return checkEmpty(ctx, cfg, queue)
	}
	p, err := startPool(ctx, cfg, queue, cfg.Workers, noop, nil)
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
