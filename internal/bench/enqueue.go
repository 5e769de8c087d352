package bench

import (
	"context"
	"strconv"
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
// one transaction per batch, from a single goroutine; with Unique, each
// with a unique key (see insertUnique).
func runEnqueueBatch(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	var sent, inserted atomic.Int64
	bar := startProgress(cfg.Progress, EnqueueBatch, fracOf(sent.Load, int64(cfg.N)), sent.Load)
	c0, start := costNow(), time.Now()
	if cfg.Unique {
		err = insertUnique(ctx, c, queue, cfg, &sent, &inserted)
	} else {
		err = insertN(ctx, c, queue, cfg.N, cfg.Batch, 0, &sent)
		inserted.Store(sent.Load())
	}
	took, c1 := time.Since(start), costNow()
	bar.finish()
	if err != nil {
		return Result{}, err
	}
	if err := workOff(ctx, cfg, queue, EnqueueBatch, inserted.Load()); err != nil {
		return Result{}, err
	}
	n := sent.Load()
	r := Result{Jobs: n, Batch: cfg.Batch, Producers: 1, Seconds: round(took.Seconds()), JobsPerSec: rate(n, took)}
	if cfg.Unique {
		r.Unique, r.Duplicates, r.Inserted = true, cfg.Duplicates, inserted.Load()
	}
	r.addCost(c0, c1)
	return r, nil
}

// insertUnique enqueues cfg.N jobs through EnqueueMany in batches of
// cfg.Batch, each with a unique key: the first part of each batch new
// keys, the last cfg.Duplicates of it the keys of the previous batch's
// new jobs (the first batch's own), which are still waiting, so the store
// answers them as duplicates. sent counts the jobs sent, inserted those
// stored.
func insertUnique(ctx context.Context, c *jobq.Client, queue string, cfg Config, sent, inserted *atomic.Int64) error {
	specs := make([]jobq.JobSpec, 0, cfg.Batch)
	prev := make([]string, 0, cfg.Batch) // the previous batch's new keys
	cur := make([]string, 0, cfg.Batch)
	next := 0
	for left := cfg.N; left > 0; {
		k := min(cfg.Batch, left)
		dups := int(float64(k) * cfg.Duplicates)
		specs, cur = specs[:0], cur[:0]
		for range k - dups {
			key := queue + "-" + strconv.Itoa(next)
			next++
			cur = append(cur, key)
			specs = append(specs, uniqueSpec(queue, key))
		}
		from := prev
		if len(from) == 0 {
			from = cur
		}
		for i := range dups {
			specs = append(specs, uniqueSpec(queue, from[i%len(from)]))
		}
		res, err := c.EnqueueMany(ctx, specs)
		if err != nil {
			return err
		}
		for _, r := range res {
			if !r.Duplicate {
				inserted.Add(1)
			}
		}
		sent.Add(int64(k))
		left -= k
		prev, cur = cur, prev
	}
	return nil
}

// uniqueSpec is a no-op job on queue with the unique key key.
func uniqueSpec(queue, key string) jobq.JobSpec {
	return jobq.JobSpec{Type: noopType, Payload: noopPayload, Options: []jobq.EnqueueOption{jobq.Queue(queue), jobq.UniqueKey(key)}}
}
