package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/jobq/jobq"
)

// OverflowType is the type label of jobs whose type came after
// Options.MaxTypes distinct types were already labelled.
const OverflowType = "_other"

// Buckets are the histograms' upper bounds in seconds: from a millisecond
// (a no-op job, a claim from a busy queue) to an hour (a long report, a
// queue far behind). New reads them: a program may replace them before,
// with at most 32 positive bounds in increasing order.
var Buckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
}

// Options configures Metrics. Zero fields take the documented defaults.
type Options struct {
	// Registry receives jobq's collectors; Handler serves it. Defaults to
	// a new registry that also holds the Go runtime and process
	// collectors. To use the global one, pass
	// prometheus.DefaultRegisterer.(*prometheus.Registry).
	Registry *prometheus.Registry
	// MaxTypes bounds the type label: once this many distinct job types
	// are labelled, further types count under OverflowType, so a producer
	// inventing types cannot grow the series without limit. Defaults to
	// 100.
	MaxTypes int
	// StatsCache is how long one read of the queue depths serves scrapes:
	// scrapes within it (from several Prometheus servers, say) cost the
	// backend nothing. A read that took longer than a fiftieth of it
	// serves for 50 times its duration instead (a large SQLite backlog's,
	// say: docs/performance.md), so depth reads never keep the backend busy
	// more than 2 % of the time. Defaults to 5s; negative reads on every
	// scrape.
	StatsCache time.Duration
	// StatsTimeout bounds one read of the queue depths. Defaults to 10s.
	StatsTimeout time.Duration
	// Logger receives a warning when a read of the queue depths fails.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxTypes < 0 || o.StatsTimeout < 0 {
		return o, fmt.Errorf("%w: metrics Options: MaxTypes and StatsTimeout must not be negative", jobq.ErrInvalidInput)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.MaxTypes == 0 {
		o.MaxTypes = 100
	}
	if o.StatsCache == 0 {
		o.StatsCache = 5 * time.Second
	}
	if o.StatsTimeout == 0 {
		o.StatsTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Metrics counts what this process's workers, clients and inspectors do
// and exports it, with the queue depths, to Prometheus. Create it with New;
// it is safe for concurrent use.
type Metrics struct {
	opts Options

	upper    []float64 // the histograms' bounds in seconds (Buckets at New)
	bounds   bounds    // the same as durations
	capacity *prometheus.GaugeVec

	// series holds the values of each queue and type (see series.go),
	// made on first use. The hooks read it without locking, four times
	// per job: the map is replaced, never changed, when a queue and type
	// is added, so a read is a plain map lookup, without a sync.Map's
	// interface keys and hashing.
	series atomic.Pointer[map[key]*series]
	// recent holds series found lately, each in the slot its names pick
	// (slotOf), and is checked against both names before use: a hit costs
	// two short string comparisons instead of hashing both names and
	// probing the map, whose memory a busy worker has evicted between two
	// jobs. Types that share a slot take turns in it; a miss costs the
	// map lookup and a store.
	recent [recentSlots]atomic.Pointer[series]
	mu     sync.Mutex      // serialises additions to series, and guards types and queues
	types  map[string]bool // the labelled types, at most MaxTypes
	depth  *depthCollector // nil until ObserveQueues
	queues map[string]bool // the queues whose depth is exported even when empty
	// unhandledMu serialises the writers of series' unhandled ages.
	unhandledMu sync.Mutex
}

type key struct{ queue, typ string }

// New registers jobq's collectors in opts.Registry (see Options) and
// returns the Metrics that feed them. Plug them in with WorkerHooks,
// ClientHooks and InspectorHooks, then call AddWorker for each worker and
// ObserveQueues for the depth gauges.
func New(opts Options) (*Metrics, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	upper, bs, err := histogramBounds(Buckets)
	if err != nil {
		return nil, err
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "jobq", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		opts:     opts,
		upper:    upper,
		bounds:   bs,
		capacity: gauge("workers_capacity", "Handler slots of this process's workers that serve the queue; a worker serving several queues counts its slots for each.", "queue"),
		types:    map[string]bool{},
		queues:   map[string]bool{},
	}
	m.series.Store(&map[key]*series{})
	build := gauge("build_info", "Always 1: the jobq version and Go version of this process.", "version", "goversion")
	build.WithLabelValues(version(), runtime.Version()).Set(1)
	for _, c := range []prometheus.Collector{newSeriesCollector(m), m.capacity, build} {
		if err := opts.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("register jobq metrics: %w", err)
		}
	}
	return m, nil
}

// histogramBounds checks b (Buckets, which a program may have replaced)
// and returns a copy, and the same bounds as durations.
func histogramBounds(b []float64) ([]float64, bounds, error) {
	if len(b) == 0 || len(b) > maxBuckets {
		return nil, nil, fmt.Errorf("%w: metrics.Buckets: %d bounds; want 1 to %d", jobq.ErrInvalidInput, len(b), maxBuckets)
	}
	upper := slices.Clone(b)
	bs := make(bounds, len(b))
	for i, u := range upper {
		// Observations are placed by duration, so the bounds must be
		// distinct as durations too: a nanosecond apart at least, and none
		// past the longest duration.
		if !(u >= 1e-9 && u <= float64(math.MaxInt64)/float64(time.Second)) {
			return nil, nil, fmt.Errorf("%w: metrics.Buckets: bound %d is %g; want 1e-9 to %g seconds", jobq.ErrInvalidInput, i, u, time.Duration(math.MaxInt64).Seconds())
		}
		bs[i] = time.Duration(math.Round(u * float64(time.Second)))
		if i > 0 && bs[i] <= bs[i-1] {
			return nil, nil, fmt.Errorf("%w: metrics.Buckets: bound %d (%g) is not above bound %d (%g) by a nanosecond or more", jobq.ErrInvalidInput, i, u, i-1, upper[i-1])
		}
	}
	return upper, bs, nil
}

// version is jobq's module version in this binary, "(devel)" when built
// from a work tree.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const path = "github.com/jobq/jobq"
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "unknown"
}

// Registry is the registry the collectors are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.opts.Registry }

// of returns the children of queue and typ, making them on first use.
func (m *Metrics) of(queue, typ string) *series {
	slot := &m.recent[slotOf(queue, typ)]
	if s := slot.Load(); s != nil && s.typ == typ && s.queue == queue {
		return s
	}
	if s, ok := (*m.series.Load())[key{queue, typ}]; ok {
		slot.Store(s)
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	all := *m.series.Load()
	if s, ok := all[key{queue, typ}]; ok {
		return s
	}
	// Types past the bound are not stored under their own name: they take
	// this path each time, which keeps the map bounded too. So do types
	// that are not valid UTF-8 (a type is checked for control characters
	// only): no label value can hold them, and one would fail every scrape.
	if !utf8.ValidString(typ) {
		typ = OverflowType
		if s, ok := all[key{queue, typ}]; ok {
			return s
		}
	} else if !m.types[typ] {
		if len(m.types) >= m.opts.MaxTypes {
			typ = OverflowType
			if s, ok := all[key{queue, typ}]; ok {
				return s
			}
		} else {
			m.types[typ] = true
		}
	}
	s := &series{queue: queue, typ: typ}
	m.queues[queue] = true
	next := make(map[key]*series, len(all)+1)
	maps.Copy(next, all)
	next[key{queue, typ}] = s
	m.series.Store(&next)
	return s
}

// recentSlots is the size of Metrics.recent: a worker serves a few types
// of a few queues.
const recentSlots = 64

// slotOf picks the slot of Metrics.recent for queue and typ from their
// lengths and a few of their bytes: no more is needed to spread a worker's
// handful of types, and reading more would cost what the slots save.
func slotOf(queue, typ string) int {
	h := uint(len(queue))<<5 ^ uint(len(typ))
	if n := len(typ); n > 0 {
		h = h*31 + uint(typ[0])
		h = h*31 + uint(typ[n/2])
		h = h*31 + uint(typ[n-1])
	}
	if n := len(queue); n > 0 {
		h = h*31 + uint(queue[n-1])
	}
	return int(h % recentSlots)
}

// WorkerHooks returns the hooks that count a worker's attempts; put them
// in WorkerConfig.Hooks, then call AddWorker with the worker.
func (m *Metrics) WorkerHooks() jobq.WorkerHooks {
	return jobq.WorkerHooks{
		Claimed: func(e jobq.ClaimedEvent) {
			m.of(e.Job.Queue, e.Job.Type).wait.observe(m.bounds, e.Wait)
		},
		Started: func(_ context.Context, j *jobq.Job) {
			s := m.of(j.Queue, j.Type)
			s.inc(cStarted)
			s.busy.Add(1)
		},
		Finished: func(e jobq.Event) {
			s := m.of(e.Job.Queue, e.Job.Type)
			s.busy.Add(-1)
			s.duration.observe(m.bounds, e.Duration)
			if e.Kind == jobq.EventAbandoned {
				// Never written: the job was given back, or its lease
				// expires and the sweep returns it.
				s.inc(cReleased)
			}
		},
		// What became of the job is counted once the backend applied it:
		// an outcome the fence refused, or one a cancel overrode, is not
		// what happened to the job.
		Written: func(e jobq.Event) {
			s := m.of(e.Job.Queue, e.Job.Type)
			switch e.Kind {
			case jobq.EventDone:
				s.inc(cCompleted)
			case jobq.EventRetry:
				s.inc(cRetried)
			case jobq.EventFailed:
				s.inc(cFailed)
			case jobq.EventReleased:
				s.inc(cReleased)
			case jobq.EventCancelled:
				s.inc(cCancelled)
			case jobq.EventDeferred:
				s.inc(cDeferred)
				now := time.Now()
				s.noteUnhandled(&m.unhandledMu, max(0, now.Sub(e.Job.CreatedAt)), now)
			}
		},
		Rescued: func(e jobq.RescuedEvent) {
			s := m.of(e.Queue, e.Type)
			if e.Expired {
				// Its lease never expired: it was never claimed.
				s.inc(cExpired)
				s.inc(cFailed)
				return
			}
			s.inc(cRescued)
			if e.Failed {
				s.inc(cFailed)
			}
		},
		Stale: func(e jobq.StaleEvent) { m.of(e.Queue, e.Type).inc(cStale) },
	}
}

// ClientHooks returns the hook that counts enqueued jobs; put it in
// ClientConfig.Hooks. A job enqueued inside the caller's transaction
// (EnqueueTx) is counted when the insert returns, whether or not that
// transaction commits later.
func (m *Metrics) ClientHooks() jobq.ClientHooks {
	return jobq.ClientHooks{
		AfterEnqueue: func(_ context.Context, j jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
			if err == nil && !res.Duplicate {
				m.of(j.Queue, j.Type).inc(cEnqueued)
			}
		},
	}
}

// InspectorHooks returns the hook that counts replayed jobs; pass it to
// jobq.NewInspector.
func (m *Metrics) InspectorHooks() jobq.InspectorHooks {
	return jobq.InspectorHooks{
		Replayed: func(_ context.Context, moved []jobq.TypeCount) {
			for _, c := range moved {
				s := m.of(c.Queue, c.Type)
				if c.Count > 0 {
					s.counts[cReplayed].Add(uint64(c.Count))
				}
			}
		},
	}
}

// AddWorker adds w's slots to the capacity of its queues and creates
// every series of its queues and reg's types at zero, so that rates and
// alerts see them before the first job. Call it once per worker (with
// the registry it runs); its capacity counts for the life of the
// Metrics.
func (m *Metrics) AddWorker(w *jobq.Worker, reg *jobq.Registry) {
	types := reg.Types()
	for _, q := range w.Queues() {
		m.capacity.WithLabelValues(q).Add(float64(w.Capacity()))
		for _, t := range types {
			m.of(q, t)
		}
		m.mu.Lock()
		m.queues[q] = true
		m.mu.Unlock()
	}
}

// ObserveQueues exports the depth gauges of every queue in in's backend
// (jobq_queue_jobs, jobq_queue_oldest_due_timestamp_seconds), read with
// one Inspector.Stats per scrape at most and cached for
// Options.StatsCache. The queues named here, and those of added workers,
// are exported at zero when they hold no job. When the backend runs
// workflows, it also exports their gauges (jobq_workflows,
// jobq_workflow_tasks_waiting), and when it keeps keys, the held ones
// (jobq_keys_held, jobq_keys_held_oldest_timestamp_seconds), read and
// cached the same way. Call it once.
func (m *Metrics) ObserveQueues(in *jobq.Inspector, queues ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.depth != nil {
		return errors.New("observe queues: already observing")
	}
	for _, q := range queues {
		m.queues[q] = true
	}
	d := newDepthCollector(in, m.opts, m.knownQueues)
	if err := m.opts.Registry.Register(d); err != nil {
		return fmt.Errorf("register jobq queue depth: %w", err)
	}
	wf := newWorkflowCollector(in, m.opts)
	if err := m.opts.Registry.Register(wf); err != nil {
		m.opts.Registry.Unregister(d)
		return fmt.Errorf("register jobq workflow gauges: %w", err)
	}
	if err := m.opts.Registry.Register(newKeyCollector(in, m.opts)); err != nil {
		m.opts.Registry.Unregister(d)
		m.opts.Registry.Unregister(wf)
		return fmt.Errorf("register jobq key gauges: %w", err)
	}
	m.depth = d
	return nil
}

// knownQueues returns the queues exported even when empty.
func (m *Metrics) knownQueues() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(m.queues))
	for q := range m.queues {
		out[q] = true
	}
	return out
}
