package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq"
)

// The fairness workload's small keys.
const (
	smallKeys   = 100
	smallPerKey = 10
)

// runFairness queues Hot jobs on one key ("hot"), then 10 jobs on each of
// 100 small keys, all untimed, then starts one worker with Workers slots
// (in this process, or in a worker process made before) and times, from
// its start, when each small key's job starts (by the wall clock, which a
// worker process shares): with fair turns the small keys' p99 barely
// depends on Hot (compare a run with Hot 0). The hot key's jobs left when
// the small keys are done are worked off untimed.
func runFairness(ctx context.Context, cfg Config, queue string) (Result, error) {
	c, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	specs := make([]jobq.JobSpec, 0, cfg.Batch)
	flush := func() error {
		if len(specs) == 0 {
			return nil
		}
		_, err := c.EnqueueMany(ctx, specs)
		specs = specs[:0]
		return err
	}
	add := func(key string) error {
		specs = append(specs, jobq.JobSpec{Type: noopType, Payload: noopPayload, Options: []jobq.EnqueueOption{jobq.Queue(queue), jobq.Key(key)}})
		if len(specs) == cfg.Batch {
			return flush()
		}
		return nil
	}
	for range cfg.Hot {
		if err := add("hot"); err != nil {
			return Result{}, err
		}
	}
	if err := flush(); err != nil {
		return Result{}, err
	}
	for k := range smallKeys {
		for range smallPerKey {
			if err := add("s" + strconv.Itoa(k)); err != nil {
				return Result{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return Result{}, err
	}
	const small = smallKeys * smallPerKey
	p, err := startWorkers(ctx, cfg, queue, Fairness, nil)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	werr := p.begin()
	if werr == nil {
		werr = p.waitDone(ctx, int64(cfg.Hot+small), cfg.Stall)
	}
	if err := p.stop(); err != nil {
		return Result{}, err
	}
	if werr != nil {
		return Result{}, werr
	}
	if err := checkEmpty(ctx, cfg, queue); err != nil {
		return Result{}, err
	}
	stamps := p.starts()
	if len(stamps) != small {
		return Result{}, fmt.Errorf("%d of the small keys' %d jobs ran", len(stamps), small)
	}
	starts := make([]time.Duration, len(stamps))
	for i, s := range stamps {
		starts[i] = time.Duration(s.At - start.UnixNano())
	}
	slices.Sort(starts)
	took := starts[small-1]
	r := Result{Jobs: small, Workers: cfg.Workers, Hot: cfg.Hot, Seconds: round(took.Seconds()), JobsPerSec: rate(small, took)}
	r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs = pctMs(starts, 0.50), pctMs(starts, 0.90), pctMs(starts, 0.99), pctMs(starts, 1)
	return r, nil
}
