package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jobq/jobq"
)

// latencyPayload carries the producer's clock into the handler. Producer
// and worker share a process, or at least a machine (a worker process),
// so the wall clocks are the same clock.
type latencyPayload struct {
	EnqueuedAt int64 `json:"t"`                // UnixNano just before Enqueue
	Warmup     bool  `json:"warmup,omitempty"` // not measured
}

// runLatency starts an idle worker (in this process, or in a worker
// process that finds the jobs as a deployed worker does: woken through the
// store, or at its next poll), then enqueues jobs one per transaction
// at Rate per second on a fixed schedule (min(N, Rate×Duration) jobs) and
// measures, for each, the time from just before its Enqueue call to the
// start of its handler: the pickup latency a producer sees.
func runLatency(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	n := int64(min(float64(cfg.N), math.Ceil(float64(cfg.Rate)*cfg.Duration.Seconds())))
	n = max(n, 1)

	p, err := runWorkers(ctx, cfg, queue, Latency, nil)
	if err != nil {
		return Result{}, err
	}
	res, err := measureLatency(ctx, cfg, c, p, queue, n)
	if serr := p.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return Result{}, err
	}
	if err := checkEmpty(ctx, cfg, queue); err != nil {
		return Result{}, err
	}
	starts := p.starts()
	if int64(len(starts)) != n {
		return Result{}, fmt.Errorf("measured %d latencies for %d jobs", len(starts), n)
	}
	lats := make([]time.Duration, len(starts))
	for i, s := range starts {
		lats[i] = time.Duration(s.At - s.Ref)
	}
	slices.Sort(lats)
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = pctMs(lats, 0.50), pctMs(lats, 0.90), pctMs(lats, 0.99), pctMs(lats, 1)
	return res, nil
}

// measureLatency warms the worker up with one job (so the first sample does
// not pay for the worker's start), then runs the paced producer and waits
// for every job's handler.
func measureLatency(ctx context.Context, cfg Config, c *jobq.Client, p workers, queue string, n int64) (Result, error) {
	opt := jobq.Queue(queue)
	enqueue := func(warm bool) error {
		pl, _ := json.Marshal(latencyPayload{EnqueuedAt: time.Now().UnixNano(), Warmup: warm})
		_, err := c.Enqueue(ctx, noopType, json.RawMessage(pl), opt)
		return err
	}
	if err := enqueue(true); err != nil {
		return Result{}, err
	}
	if err := p.waitDone(ctx, 1, cfg.Stall); err != nil {
		return Result{}, fmt.Errorf("warm up: %w", err)
	}

	period := time.Second / time.Duration(cfg.Rate)
	bar := startProgress(cfg.Progress, Latency, func() float64 { return float64(p.done()-1) / float64(n) },
		func() int64 { return p.done() - 1 })
	defer bar.finish()
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * period)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-timer.C:
			}
		}
		if err := enqueue(false); err != nil {
			return Result{}, err
		}
	}
	took := time.Since(start)
	if err := p.waitDone(ctx, n+1, cfg.Stall); err != nil {
		return Result{}, err
	}
	return Result{Jobs: n, Workers: cfg.Workers, Rate: cfg.Rate, Seconds: round(took.Seconds()), JobsPerSec: rate(n, took)}, nil
}

// pctMs is the q-quantile (nearest rank) of sorted, in milliseconds.
func pctMs(sorted []time.Duration, q float64) *float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = min(max(i, 0), len(sorted)-1)
	ms := float64(sorted[i].Microseconds()) / 1000
	return &ms
}
