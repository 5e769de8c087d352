package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// runEnqueueSingle enqueues N jobs one Enqueue call (one transaction) at a
// time from a single goroutine: the honest per-transaction baseline, with no
// concurrency to hide the cost of each commit.
func runEnqueueSingle(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	var n atomic.Int64
	bar := startProgress(cfg.Progress, EnqueueSingle, fracOf(n.Load, int64(cfg.N)), n.Load)
	opt := jobq.Queue(queue)
	c0, start := costNow(), time.Now()
	for range cfg.N {
		if _, err := c.Enqueue(ctx, noopType, noopPayload, opt); err != nil {
			bar.finish()
			return Result{}, err
		}
		n.Add(1)
	}
	took, c1 := time.Since(start), costNow()
	bar.finish()
	if err := workOff(ctx, cfg, queue, EnqueueSingle, n.Load()); err != nil {
		return Result{}, err
	}
	r := Result{Jobs: n.Load(), Producers: 1, Seconds: round(took.Seconds()), JobsPerSec: rate(n.Load(), took)}
	r.addCost(c0, c1)
	return r, nil
}

// runEnqueueBatch enqueues N jobs through EnqueueMany in batches of Batch,
// one transaction per batch, from a single goroutine.
func runEnqueueBatch(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	var n atomic.Int64
	bar := startProgress(cfg.Progress, EnqueueBatch, fracOf(n.Load, int64(cfg.N)), n.Load)
	c0, start := costNow(), time.Now()
	err = insertN(ctx, c, queue, cfg.N, cfg.Batch, 0, &n)
	took, c1 := time.Since(start), costNow()
	bar.finish()
	if err != nil {
		return Result{}, err
	}
	if err := workOff(ctx, cfg, queue, EnqueueBatch, n.Load()); err != nil {
		return Result{}, err
	}
	r := Result{Jobs: n.Load(), Batch: cfg.Batch, Producers: 1, Seconds: round(took.Seconds()), JobsPerSec: rate(n.Load(), took)}
	r.addCost(c0, c1)
	return r, nil
}
