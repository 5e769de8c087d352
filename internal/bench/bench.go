// Package bench runs DESIGN.md's standard workloads (enqueue-single,
// enqueue-batch, drain, latency, steady) against any backend through the
// public jobq API, the way a user's program would use it, and reports one
// Result per workload. `jobq bench` prints them as JSON lines.
//
// Every workload runs on a queue of its own (bench-<workload>-<nanos>), so
// it starts empty, and leaves that queue empty: jobs the enqueue workloads
// insert are worked off afterwards, untimed.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

// The workload names, in the order All runs them.
const (
	EnqueueSingle = "enqueue-single"
	EnqueueBatch  = "enqueue-batch"
	Drain         = "drain"
	Latency       = "latency"
	Steady        = "steady"
	// Fairness is not in All: it measures keys, on demand.
	Fairness = "fairness"
)

// All lists every workload in the order they run.
var All = []string{EnqueueSingle, EnqueueBatch, Drain, Latency, Steady}

// Config sizes the workloads. Zero fields take the defaults of DESIGN.md.
type Config struct {
	// Backend is where the jobs go. Required; the sync backend is refused
	// (it stores nothing, so there is nothing to drain).
	Backend backend.Backend
	// BackendName labels the results, e.g. "sqlite". Defaults to "unknown".
	BackendName string
	// N is the number of jobs of the enqueue and drain workloads, and the
	// most the latency workload enqueues. Defaults to 50000.
	N int
	// Batch is the enqueue-batch batch size. Defaults to 1000.
	Batch int
	// Workers is the worker concurrency of drain, latency and steady.
	// Defaults to 100.
	Workers int
	// Rate is the latency workload's enqueue rate in jobs/s. Defaults to 200.
	Rate int
	// Duration is how long steady runs, and the longest latency runs.
	// Defaults to 10s.
	Duration time.Duration
	// Producers is how many goroutines enqueue in steady, one job per
	// transaction each. Defaults to 8.
	Producers int
	// Progress, when set, receives a progress bar redrawn in place (meant
	// for a terminal). Defaults to none.
	Progress io.Writer
	// Log receives the workers' logs. Defaults to discarding them.
	Log *slog.Logger
	// Stall is how long a workload may go without any job finishing before
	// it gives up with an error instead of hanging. Defaults to 30s.
	Stall time.Duration
	// WorkerHooks, ClientHooks and Middleware are installed in every
	// worker, client and registry the workloads make: how `jobq bench
	// --observe` measures what metrics and tracing cost. Default none.
	WorkerHooks []jobq.WorkerHooks
	ClientHooks []jobq.ClientHooks
	Middleware  []jobq.Middleware
	// Settle, when set, runs after drain's untimed set-up (queuing its
	// jobs) and before its timing starts. `jobq bench --observe` flushes
	// there the spans the set-up's enqueues left in the tracer's batcher.
	// In a deployment the producer's process holds them, not the
	// worker's; left in, they sat in the worker's heap through the timed
	// drain, which then started with a markedly larger live heap
	// (docs/performance.md).
	Settle func(context.Context) error
	// Observed labels the results with the observability that was on
	// (e.g. "metrics,tracing"); empty for none.
	Observed string
	// KeepCompleted is the workers' Retention.Completed: how `jobq bench
	// --keep-completed` measures what keeping finished jobs costs. Zero
	// (the default) deletes completed jobs at once.
	KeepCompleted time.Duration
	// Keys spreads drain's jobs over this many keys (0: no keys), and
	// KeyLimit, when set, lets at most that many jobs of a key run at
	// once (the queue's key rules): what keys cost a drain.
	Keys     int
	KeyLimit int
	// Unique gives every job of enqueue-batch a unique key, and
	// Duplicates (a share from 0 to 0.9) makes that share of each batch
	// name keys of the previous batch's new jobs, still waiting: what
	// enforcing uniqueness costs a batch insert, and what a duplicate
	// costs. Default: no unique keys.
	Unique     bool
	Duplicates float64
	// Hot is how many jobs the fairness workload queues on one key
	// before its 100 small keys' 10 jobs each; 0 measures the small keys
	// alone, the baseline. Defaults to none.
	Hot int
	// WorkerProcess, when set, runs every workload's worker in a process
	// of its own, as deployments do: the producers stay in this process
	// and the worker finds their jobs through the store (its
	// notifications, or its next poll). It returns the command of that
	// process for the workload on queue, not started; the process runs
	// ServeWorker with the same store, Workers and KeepCompleted, and the
	// bench connects its standard input and output. The store must be one
	// both processes open: not the memory backend. WorkerHooks,
	// Middleware and Settle would not reach it and are refused with it.
	// Default: the worker runs in this process.
	WorkerProcess func(queue, workload string) *exec.Cmd
	// WorkerStderr receives the worker process's standard error, each
	// line prefixed "worker process: ". Default: discarded (its last line
	// is still in the error when the process fails).
	WorkerStderr io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.Backend == nil {
		return c, fmt.Errorf("%w: bench needs a backend", jobq.ErrInvalidInput)
	}
	if _, inline := backend.As[backend.Inline](c.Backend); inline {
		return c, fmt.Errorf("%w: the sync backend runs each job inside Enqueue and stores nothing; bench a backend that stores jobs", jobq.ErrInvalidInput)
	}
	if c.WorkerProcess != nil {
		if _, mem := backend.As[*memory.Backend](c.Backend); mem {
			return c, fmt.Errorf("%w: the memory backend keeps its jobs inside one process, so a worker process cannot share them; bench a store both open (sqlite, postgres, redis)", jobq.ErrInvalidInput)
		}
		if len(c.WorkerHooks) > 0 || len(c.Middleware) > 0 || c.Settle != nil {
			return c, fmt.Errorf("%w: worker hooks, middleware and Settle would not reach a worker process", jobq.ErrInvalidInput)
		}
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"N", &c.N, 50000}, {"Batch", &c.Batch, 1000}, {"Workers", &c.Workers, 100},
		{"Rate", &c.Rate, 200}, {"Producers", &c.Producers, 8}, {"Keys", &c.Keys, 0},
		{"KeyLimit", &c.KeyLimit, 0}, {"Hot", &c.Hot, 0},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return c, fmt.Errorf("%w: bench %s %d is negative", jobq.ErrInvalidInput, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.Duplicates < 0 || c.Duplicates > 0.9 || (c.Duplicates > 0 && !c.Unique) {
		return c, fmt.Errorf("%w: bench Duplicates %v: a share from 0 to 0.9, with Unique", jobq.ErrInvalidInput, c.Duplicates)
	}
	if c.Duration < 0 || c.Stall < 0 {
		return c, fmt.Errorf("%w: bench durations must not be negative", jobq.ErrInvalidInput)
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Stall == 0 {
		c.Stall = 30 * time.Second
	}
	if c.BackendName == "" {
		c.BackendName = "unknown"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Result is one workload's measurement, printed as one JSON line. Fields
// that do not apply to a workload are omitted.
type Result struct {
	Workload string `json:"workload"`
	Backend  string `json:"backend"`
	// Observe: what observability the run had on (Config.Observed).
	Observe string `json:"observe,omitempty"`
	// WorkerProcess: the worker ran in a process of its own
	// (Config.WorkerProcess), not in the producers'.
	WorkerProcess bool `json:"worker_process,omitempty"`
	// KeepCompleted: the workers kept completed jobs this long (seconds).
	KeepCompleted float64 `json:"keep_completed_s,omitempty"`
	// Jobs is how many jobs the timed part handled: enqueued for the
	// enqueue workloads, completed for drain, latency and steady.
	Jobs      int64 `json:"jobs"`
	Batch     int   `json:"batch,omitempty"`
	Producers int   `json:"producers,omitempty"`
	Workers   int   `json:"workers,omitempty"`
	// Rate is the latency workload's target rate; JobsPerSec is what it
	// reached.
	Rate       int     `json:"rate,omitempty"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	// Enqueued and EnqueuedPerSec: steady's producers, over the same window.
	Enqueued       int64   `json:"enqueued,omitempty"`
	EnqueuedPerSec float64 `json:"enqueued_per_sec,omitempty"`
	// MaxBacklog: steady's producers wait while this many of their jobs
	// are not done yet, so the run stays a steady state.
	MaxBacklog int `json:"max_backlog,omitempty"`
	// What the process spent over the timed part of drain, steady and the
	// enqueue workloads (see cost), per job it completed or enqueued: CPU
	// time (steady's counts its producers' too; a server's own is never in
	// it) and bytes allocated; and the garbage collections. With a worker
	// process, both processes' added up.
	CPUMicrosPerJob  float64 `json:"cpu_us_per_job,omitempty"`
	AllocBytesPerJob int64   `json:"alloc_bytes_per_job,omitempty"`
	GCs              uint32  `json:"gcs,omitempty"`
	// Keys and KeyLimit: drain's keys (Config.Keys, Config.KeyLimit);
	// Hot: the fairness workload's hot key's jobs.
	Keys     int `json:"keys,omitempty"`
	KeyLimit int `json:"key_limit,omitempty"`
	Hot      int `json:"hot,omitempty"`
	// Unique and Duplicates: enqueue-batch's unique keys and the share of
	// duplicates (Config.Unique, Config.Duplicates); Inserted is how many
	// of its Jobs were new jobs, the rest answered as duplicates.
	Unique     bool    `json:"unique,omitempty"`
	Duplicates float64 `json:"duplicates,omitempty"`
	Inserted   int64   `json:"inserted,omitempty"`
	// Enqueue-to-handler-start latency percentiles (latency only), or,
	// for fairness, from the worker's start to each small key's job's
	// start.
	P50Ms *float64 `json:"p50_ms,omitempty"`
	P90Ms *float64 `json:"p90_ms,omitempty"`
	P99Ms *float64 `json:"p99_ms,omitempty"`
	MaxMs *float64 `json:"max_ms,omitempty"`
}

// JSON returns r as one line of JSON.
func (r Result) JSON() string {
	b, _ := json.Marshal(r) // a struct of numbers and strings always marshals
	return string(b)
}

// Run runs the named workloads in order (All when names is empty) and
// passes each result to emit as soon as it is measured. It stops at the
// first error, or when ctx ends.
func Run(ctx context.Context, cfg Config, names []string, emit func(Result) error) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = All
	}
	for _, name := range names {
		run, ok := workloads[name]
		if !ok {
			return fmt.Errorf("%w: unknown workload %q; use one of %s", jobq.ErrInvalidInput, name, strings.Join(All, ", "))
		}
		res, err := run(ctx, cfg, queueName(name))
		if err != nil {
			return fmt.Errorf("bench %s: %w", name, err)
		}
		res.Workload, res.Backend, res.Observe = name, cfg.BackendName, cfg.Observed
		res.WorkerProcess = cfg.WorkerProcess != nil
		res.KeepCompleted = cfg.KeepCompleted.Seconds()
		if err := emit(res); err != nil {
			return err
		}
	}
	return nil
}

var workloads = map[string]func(ctx context.Context, cfg Config, queue string) (Result, error){
	EnqueueSingle: runEnqueueSingle,
	EnqueueBatch:  runEnqueueBatch,
	Drain:         runDrain,
	Latency:       runLatency,
	Steady:        runSteady,
	Fairness:      runFairness,
}

// queueName gives each run of a workload a queue no earlier run used.
func queueName(workload string) string {
	return fmt.Sprintf("bench-%s-%d", workload, time.Now().UnixNano())
}

// noopType is the job type every workload enqueues.
const noopType = "bench.noop"

// noopPayload is the payload of the enqueue and drain jobs: small, like a
// typical job's arguments.
var noopPayload = json.RawMessage(`{"user_id":12345,"template":"welcome"}`)

func newClient(cfg Config) (*jobq.Client, error) {
	return jobq.NewClient(cfg.Backend, jobq.ClientConfig{Hooks: cfg.ClientHooks})
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n) / d.Seconds())
}

// round keeps figures readable in JSON: three significant decimals.
func round(f float64) float64 {
	switch {
	case f >= 100:
		return float64(int64(f + 0.5))
	case f >= 1:
		return float64(int64(f*100+0.5)) / 100
	}
	// Four significant digits, so a very short run never rounds to 0.
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
	return v
}
