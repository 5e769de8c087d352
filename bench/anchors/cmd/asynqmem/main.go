// Command asynqmem measures what draining N no-op jobs costs an Asynq
// worker's process in memory, the counterpart of cmd/jobqmem: it queues N
// tasks (untimed) in a Redis logical database of its own, then runs an
// Asynq server with -workers concurrency until every task is done and
// acknowledged, and prints one JSON line: jobs/s and the process's peak
// resident set, over the whole run and over the drain alone (see
// anchor.Memory). The database is flushed before and after the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/jobq/jobq/bench/anchors/internal/anchor"
)

const (
	taskType = "bench.noop"
	queue    = "default"
)

// payload is jobq bench's drain payload: small, like a typical job's
// arguments.
var payload = []byte(`{"user_id":12345,"template":"welcome"}`)

// result is the printed line, with jobq bench's drain field names.
type result struct {
	System     string  `json:"system"`
	Version    string  `json:"version"`
	Workload   string  `json:"workload"`
	Backend    string  `json:"backend"`
	Jobs       int64   `json:"jobs"`
	Workers    int     `json:"workers"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	anchor.Memory
}

func main() {
	fs := flag.NewFlagSet("asynqmem", flag.ExitOnError)
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/9", "Redis logical database of this run's own (not 0): flushed before and after")
	n := fs.Int("n", 50000, "tasks to queue and drain")
	workers := fs.Int("workers", 100, "the server's Concurrency")
	stall := fs.Duration("stall", 30*time.Second, "give up when no task finishes for this long")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *redisURL, *n, *workers, *stall); err != nil {
		fmt.Fprintln(os.Stderr, "asynqmem:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, redisURL string, n, workers int, stall time.Duration) (err error) {
	if n < 1 || workers < 1 {
		return errors.New("-n and -workers must be positive")
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
	opt := asynq.RedisClientOpt{Addr: rdb.Addr, DB: rdb.DB}
	if err := enqueue(ctx, opt, n); err != nil {
		return err
	}
	var meter anchor.Meter
	if err := meter.StartDrain(); err != nil {
		return err
	}

	var handled atomic.Int64
	allHandled := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: workers,
		Queues:      map[string]int{queue: 1},
		LogLevel:    asynq.WarnLevel,
		Logger:      slogLogger{slog.New(slog.NewTextHandler(os.Stderr, nil))},
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskType, func(context.Context, *asynq.Task) error {
		if handled.Add(1) == int64(n) {
			close(allHandled)
		}
		return nil
	})
	insp := asynq.NewInspector(opt)
	defer insp.Close()

	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start the asynq server: %w", err)
	}
	werr := waitDrained(ctx, insp, &handled, allHandled, stall)
	took := time.Since(start)
	// Untimed: Shutdown waits out the processor's idle poll (up to a
	// second), which says nothing about draining.
	srv.Shutdown()
	if werr != nil {
		return werr
	}
	info, err := insp.GetQueueInfo(queue)
	if err != nil {
		return fmt.Errorf("read the queue after the drain: %w", err)
	}
	if info.Size != 0 || info.Active != 0 {
		return fmt.Errorf("queue not empty after the drain: %d tasks, %d active", info.Size, info.Active)
	}
	mem, err := meter.Read()
	if err != nil {
		return err
	}
	return anchor.PrintJSON(result{
		System: "asynq", Version: anchor.ModuleVersion("github.com/hibiken/asynq"),
		Workload: "drain", Backend: "redis", Jobs: int64(n), Workers: workers,
		Seconds: anchor.Round(took.Seconds()), JobsPerSec: anchor.Round(float64(n) / took.Seconds()),
		Memory: mem,
	})
}

// enqueue queues n tasks from 8 goroutines (Asynq has no batch insert;
// this is set-up, untimed).
func enqueue(ctx context.Context, opt asynq.RedisClientOpt, n int) error {
	c := asynq.NewClient(opt)
	defer c.Close()
	const producers = 8
	var next atomic.Int64
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.EnqueueContext(ctx, asynq.NewTask(taskType, payload), asynq.Queue(queue)); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitDrained returns once every task has been handled and acknowledged
// (the queue holds none, pending or active): the last outcome written, as
// jobq bench's drain stops its clock.
func waitDrained(ctx context.Context, insp *asynq.Inspector, handled *atomic.Int64, allHandled <-chan struct{}, stall time.Duration) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := handled.Load(), time.Now()
wait:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-allHandled:
			break wait
		case <-tick.C:
			if h := handled.Load(); h != last {
				last, lastAt = h, time.Now()
			} else if time.Since(lastAt) > stall {
				return fmt.Errorf("no task finished for %s (%d handled)", stall, h)
			}
		}
	}
	deadline := time.Now().Add(stall)
	for {
		info, err := insp.GetQueueInfo(queue)
		if err != nil {
			return fmt.Errorf("read the queue: %w", err)
		}
		if info.Size == 0 && info.Active == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tasks still queued %s after the last was handled: %d, %d active", stall, info.Size, info.Active)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// slogLogger passes Asynq's warnings and errors to slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Debug(args ...any) { s.l.Debug(fmt.Sprint(args...)) }
func (s slogLogger) Info(args ...any)  { s.l.Info(fmt.Sprint(args...)) }
func (s slogLogger) Warn(args ...any)  { s.l.Warn(fmt.Sprint(args...)) }
func (s slogLogger) Error(args ...any) { s.l.Error(fmt.Sprint(args...)) }
func (s slogLogger) Fatal(args ...any) { s.l.Error(fmt.Sprint(args...)); os.Exit(1) }
