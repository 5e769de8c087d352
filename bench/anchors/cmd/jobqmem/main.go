// Command jobqmem measures what draining N no-op jobs costs a jobq
// worker's process in memory on Redis, the counterpart of cmd/asynqmem:
// it runs `jobq bench --workload drain` in this process (the same
// internal/bench code: N jobs queued untimed in batches, then one worker
// with -workers slots timed until every job is done and its outcome
// written) in a Redis logical database of its own, and prints that
// result's JSON line with the process's peak resident set added, over the
// whole run and over the drain alone, read as asynqmem reads it
// (anchor.Meter). The database is flushed before and after the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/redis" // redis://
	"github.com/jobq/jobq/bench/anchors/internal/anchor"
	"github.com/jobq/jobq/internal/bench"
)

// result is jobq bench's drain line plus the peaks.
type result struct {
	System  string `json:"system"`
	Version string `json:"version"`
	bench.Result
	anchor.Memory
}

func main() {
	fs := flag.NewFlagSet("jobqmem", flag.ExitOnError)
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/10?key_prefix=anchors", "jobq Redis URL on a logical database of this run's own (not 0): flushed before and after")
	n := fs.Int("n", 50000, "jobs to queue and drain")
	workers := fs.Int("workers", 100, "the worker's slots")
	batch := fs.Int("batch", 1000, "jobs per EnqueueMany while queuing (untimed)")
	stall := fs.Duration("stall", 30*time.Second, "give up when no job finishes for this long")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *redisURL, *n, *workers, *batch, *stall); err != nil {
		fmt.Fprintln(os.Stderr, "jobqmem:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, redisURL string, n, workers, batch int, stall time.Duration) (err error) {
	if n < 1 || workers < 1 || batch < 1 {
		return errors.New("-n, -workers and -batch must be positive")
	}
	rdb, err := anchor.ParseRedisURL(redisURL)
	if err != nil {
		return err
	}
	if err := rdb.Flush(); err != nil {
		return err
	}
	defer func() {
		if ferr := rdb.Flush(); err == nil {
			err = ferr
		}
	}()
	b, err := backend.Open(ctx, redisURL)
	if err != nil {
		return fmt.Errorf("open %s: %w", backend.RedactURL(redisURL), err)
	}
	defer b.Close()

	var meter anchor.Meter
	var res bench.Result
	err = bench.Run(ctx, bench.Config{
		Backend: b, BackendName: "redis", N: n, Workers: workers, Batch: batch, Stall: stall,
		// Settle runs once the jobs are queued, before the clock starts:
		// where asynqmem starts its drain's meter too.
		Settle: func(context.Context) error { return meter.StartDrain() },
	}, []string{bench.Drain}, func(r bench.Result) error {
		res = r
		return nil
	})
	if err != nil {
		return err
	}
	mem, err := meter.Read()
	if err != nil {
		return err
	}
	return anchor.PrintJSON(result{System: "jobq", Version: anchor.TreeVersion(), Result: res, Memory: mem})
}
