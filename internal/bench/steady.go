package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// steadyBacklog bounds how far steady's producers may run ahead of the
// worker: at most max(1000, 10 × Workers) jobs enqueued and not yet done.
// Without it, producers that enqueue faster than the worker completes grow
// the queue without limit (millions of jobs in memory after ten seconds on
// the memory backend) and, never blocking, take the CPU from the worker:
// that measures a flood, not a steady state.
func steadyBacklog(cfg Config) int { return max(1000, 10*cfg.Workers) }

// runSteady runs Producers goroutines enqueuing one job per transaction as
// fast as they can (within the backlog bound) while one worker with Workers
// slots works them, for Duration, and reports the jobs completed (and
// enqueued) in that window. What is still queued at the end is worked off
// afterwards, untimed. With a worker process the completions are the ones
// it reported written (it reports every few milliseconds).
func runSteady(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	credits := make(chan struct{}, steadyBacklog(cfg))
	p, err := runWorkers(ctx, cfg, queue, Steady, credits)
	if err != nil {
		return Result{}, err
	}
	res, err := measureSteady(ctx, cfg, c, p, queue, credits)
	if serr := p.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return Result{}, err
	}
	return res, checkEmpty(ctx, cfg, queue)
}

func measureSteady(ctx context.Context, cfg Config, c *jobq.Client, p workers, queue string, credits chan struct{}) (Result, error) {
	opt := jobq.Queue(queue)
	if _, err := c.Enqueue(ctx, noopType, noopPayload, opt); err != nil {
		return Result{}, err
	}
	if err := p.waitDone(ctx, 1, cfg.Stall); err != nil { // warm up
		return Result{}, err
	}

	var (
		enqueued atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		errMu    sync.Mutex
		errs     []error
	)
	c0, err := p.cost()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	bar := startProgress(cfg.Progress, Steady, fracOfTime(start, cfg.Duration), func() int64 { return p.done() - 1 })
	for range cfg.Producers {
		wg.Go(func() {
			// The producers stop on a channel, not on a cancelled context,
			// so no Enqueue is cut off half-way and the count stays exact.
			for {
				select {
				case <-stop:
					return
				case credits <- struct{}{}:
				}
				if _, err := c.Enqueue(ctx, noopType, noopPayload, opt); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					return
				}
				enqueued.Add(1)
			}
		})
	}
	timer := time.NewTimer(cfg.Duration)
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	timer.Stop()
	done, enq := p.done()-1, enqueued.Load()
	took := time.Since(start)
	c1, cerr := p.cost()
	close(stop)
	wg.Wait()
	bar.finish()
	if err := errors.Join(append(errs, cerr)...); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := p.waitDone(ctx, enqueued.Load()+1, cfg.Stall); err != nil {
		return Result{}, err
	}
	r := Result{
		Jobs: done, Producers: cfg.Producers, Workers: cfg.Workers, MaxBacklog: steadyBacklog(cfg),
		Seconds: round(took.Seconds()), JobsPerSec: rate(done, took), Enqueued: enq, EnqueuedPerSec: rate(enq, took),
	}
	r.addCost(c0, c1)
	return r, nil
}
