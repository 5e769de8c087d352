package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq"
)

// runDrain queues N no-op jobs (untimed, in batches; spread over Keys
// keys, at most KeyLimit of a key running at once, when set), then times
// one in-process worker with Workers slots from its start until every job
// is done and its outcome written, and confirms through the backend's
// counts that the queue is empty.
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
	c0 := costNow()
	start := time.Now()
	p, err := startPool(ctx, cfg, queue, cfg.Workers, noop, nil)
	if err != nil {
		return Result{}, err
	}
	bar := startProgress(cfg.Progress, Drain, fracOf(p.done.Load, n), p.done.Load)
	werr := p.waitDone(ctx, n, cfg.Stall)
	serr := p.stop() // returns once every outcome is written
	took := time.Since(start)
	c1 := costNow()
	bar.finish()
	if werr != nil {
		return Result{}, werr
	}
	if serr != nil {
		return Result{}, serr
	}
	if err := checkEmpty(ctx, cfg, queue); err != nil {
		return Result{}, err
	}
	r := Result{Jobs: n, Workers: cfg.Workers, Seconds: round(took.Seconds()), JobsPerSec: rate(n, took), Keys: cfg.Keys, KeyLimit: cfg.KeyLimit}
	r.addCost(c0, c1)
	return r, nil
}
