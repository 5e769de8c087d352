package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq"
)

// runDrain queues N no-op jobs (untimed, in batches; spread over Keys
// keys, at most KeyLimit of a key running at once, when set), then times
// one worker with Workers slots from its start until every job is done and
// its outcome written, and confirms through the backend's counts that the
// queue is empty. In this process the clock stops once the worker has
// stopped; with a worker process, which is made and has opened the store
// before the clock starts, once it reported the last job's outcome
// written (it is stopped after).
func runDrain(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	if cfg.KeyLimit > 0 {
		if err := jobq.NewInspector(cfg.Backend).SetQueueKeys(ctx, queue, jobq.KeyRules{Limit: cfg.KeyLimit}); err != nil {
			return Result{}, err
		}
	}
	if err := insertN(ctx, c, queue, cfg.N, cfg.Batch, cfg.Keys, nil); err != nil {
		return Result{}, err
	}
	if cfg.Settle != nil {
		if err := cfg.Settle(ctx); err != nil {
			return Result{}, fmt.Errorf("settle after queuing: %w", err)
		}
	}
	n := int64(cfg.N)
	p, err := startWorkers(ctx, cfg, queue, Drain, nil)
	if err != nil {
		return Result{}, err
	}
	took, c0, c1, werr := timeDrain(ctx, cfg, p, n)
	if serr := p.stop(); werr == nil { // returns once every outcome is written
		werr = serr
	}
	if werr != nil {
		return Result{}, werr
	}
	if err := checkEmpty(ctx, cfg, queue); err != nil {
		return Result{}, err
	}
	r := Result{Jobs: n, Workers: cfg.Workers, Seconds: round(took.Seconds()), JobsPerSec: rate(n, took), Keys: cfg.Keys, KeyLimit: cfg.KeyLimit}
	r.addCost(c0, c1)
	return r, nil
}

// timeDrain begins p and times it until n jobs are done: in this process
// until the worker has stopped too, having written every outcome; in a
// worker process until it reports the last outcome written.
func timeDrain(ctx context.Context, cfg Config, p workers, n int64) (took time.Duration, c0, c1 cost, err error) {
	if c0, err = p.cost(); err != nil {
		return 0, c0, c1, err
	}
	start := time.Now()
	if err := p.begin(); err != nil {
		return 0, c0, c1, err
	}
	bar := startProgress(cfg.Progress, Drain, fracOf(p.done, n), p.done)
	err = p.waitDone(ctx, n, cfg.Stall)
	if _, inProcess := p.(*pool); inProcess && err == nil {
		err = p.stop()
	}
	took = time.Since(start)
	bar.finish()
	if err != nil {
		return 0, c0, c1, err
	}
	c1, err = p.cost()
	return took, c0, c1, err
}
