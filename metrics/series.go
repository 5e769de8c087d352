package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What follows is jobq's own store for the per-queue-and-type series,
// exported by a Collector that turns it into constant metrics at scrape.
// client_golang's vectors would do the same work, but every child of
// theirs is a separate allocation (a histogram several: its hot and cold
// counts and their bucket slices), so one attempt's four hooks touched a
// dozen cache lines spread over the heap. In a busy worker the backend's
// work and a hundred other jobs evict them between two attempts, and the
// hooks then cost far more than in a loop (BenchmarkHooksCold against
// BenchmarkHooks). Here a series is one allocation in which an attempt
// touches about four lines, so the hooks cost less, cold or in a loop. A
// scrape pays instead, making constant metrics (BenchmarkScrape), once
// every 15 s or so. The figures: docs/performance.md, "Why the code is
// shaped this way".

// counter indexes series.counts.
type counter int

const (
	cEnqueued counter = iota
	cStarted
	cCompleted
	cRetried
	cFailed
	cReleased
	cRescued
	cStale
	cReplayed
	cCancelled
	cDeferred
	cExpired
	nCounters
)

// counterSpecs names and explains each counter, in counter order.
var counterSpecs = [nCounters]struct{ name, help string }{
	cEnqueued:  {"jobs_enqueued_total", "Jobs this process enqueued, unique-key duplicates not counted."},
	cStarted:   {"jobs_started_total", "Attempts this process started: handler calls."},
	cCompleted: {"jobs_completed_total", "Attempts that succeeded: the job is done."},
	cRetried:   {"jobs_retried_total", "Attempts that failed with attempts left: the job runs again after a backoff."},
	cFailed:    {"jobs_failed_total", "Jobs this process moved to the failed jobs table: attempts spent or a permanent error, including jobs its lease sweep found with no attempt left."},
	cReleased:  {"jobs_released_total", "Attempts interrupted by shutdown: the job was given back, or its result dropped because the worker had stopped."},
	cRescued:   {"jobs_rescued_total", "Jobs whose lease expired (their worker died or stalled) that this process's lease sweep moved: back to pending, or to failed jobs when no attempt was left."},
	cStale:     {"jobs_stale_outcomes_total", "Outcomes refused because their attempt had lost its lease: another worker took the job over."},
	cReplayed:  {"jobs_replayed_total", "Failed jobs this process replayed back to pending."},
	cCancelled: {"jobs_cancelled_total", "Attempts stopped because their job was cancelled while they ran: the job ended cancelled."},
	cExpired:   {"jobs_expired_total", "Jobs not started by their deadline that this process's lease sweep moved to failed jobs, never run; counted in jobs_failed_total too."},
	cDeferred:  {"jobs_deferred_total", "Jobs this process claimed and gave back untouched, their attempt not counted, because it has no handler for their type: a worker that has one runs them."},
}

// series is every per-queue-and-type value, made together so that all of
// a queue and type's counters exist (at zero) once any does: rules that
// divide one counter by another then never miss a side.
type series struct {
	queue, typ string
	counts     [nCounters]atomic.Uint64
	// busy is this type's share of the queue's busy handlers; the gauge,
	// labelled by queue alone, is the sum over its types at scrape, so
	// types of one queue never write the same line.
	busy           atomic.Int64
	wait, duration histogram
	// unhandledAge is the age (nanoseconds) of the oldest job of this
	// queue and type given back for want of a handler since
	// unhandledSince; unhandledAt is when the last one was (both Unix
	// nanoseconds). See noteUnhandled.
	unhandledAge, unhandledSince, unhandledAt atomic.Int64
}

func (s *series) inc(c counter) { s.counts[c].Add(1) }

// unhandledWindow is how long a job given back for want of a handler
// keeps jobq_unhandled_job_age_seconds up: longer than the longest delay
// before such a job is due again (a minute), so a job no worker runs
// keeps it up, and one some worker ran lets it lapse.
const unhandledWindow = 2 * time.Minute

// noteUnhandled records a job of age given back at now: the gauge shows
// the oldest such job of the current window, and a window begins anew
// every unhandledWindow, so that once a worker with the handler runs the
// old jobs the gauge falls to the ages of the young ones the others still
// give back. Writers are few (a claim of a type nobody here handles) and
// serialised by mu.
func (s *series) noteUnhandled(mu *sync.Mutex, age time.Duration, now time.Time) {
	mu.Lock()
	defer mu.Unlock()
	t := now.UnixNano()
	if since := s.unhandledSince.Load(); since == 0 || t-since >= int64(unhandledWindow) {
		s.unhandledSince.Store(t)
		s.unhandledAge.Store(int64(age))
	} else if int64(age) > s.unhandledAge.Load() {
		s.unhandledAge.Store(int64(age))
	}
	s.unhandledAt.Store(t)
}

// histogram counts observations in the buckets of one set of bounds. The
// sum comes first: it shares its cache line with the lowest buckets,
// where short jobs land.
type histogram struct {
	sumBits atomic.Uint64 // float64 seconds
	// counts[i] holds the observations in (bound i-1, bound i]; the last
	// one those above every bound. Not cumulative: an observation adds to
	// one.
	counts [maxBuckets + 1]atomic.Uint64
}

// maxBuckets bounds len(Buckets) so that a histogram is a fixed array,
// inline in its series.
const maxBuckets = 32

// bounds are the histograms' bucket bounds as durations, so an observation
// is placed without converting it to seconds first.
type bounds []time.Duration

func (h *histogram) observe(b bounds, d time.Duration) {
	i := 0
	for i < len(b) && d > b[i] {
		i++
	}
	h.counts[i].Add(1)
	s := d.Seconds()
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+s)) {
			return
		}
	}
}

// metric is h as a constant histogram. Its count is the sum of its
// buckets as read, so count and buckets always agree; the sum, read
// apart, may miss an observation in progress, as any scrape of a moving
// histogram can.
func (h *histogram) metric(desc *prometheus.Desc, upper []float64, labels ...string) prometheus.Metric {
	cum := make(map[float64]uint64, len(upper))
	var n uint64
	for i, u := range upper {
		n += h.counts[i].Load()
		cum[u] = n
	}
	n += h.counts[len(upper)].Load()
	m, err := prometheus.NewConstHistogram(desc, n, math.Float64frombits(h.sumBits.Load()), cum, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// seriesCollector exports every series of m at scrape.
type seriesCollector struct {
	m              *Metrics
	counters       [nCounters]*prometheus.Desc
	duration, wait *prometheus.Desc
	busy           *prometheus.Desc
	unhandled      *prometheus.Desc
}

func newSeriesCollector(m *Metrics) *seriesCollector {
	qt := []string{"queue", "type"}
	c := &seriesCollector{
		m:        m,
		duration: prometheus.NewDesc("jobq_job_duration_seconds", "How long handlers ran, per attempt, whatever its outcome.", qt, nil),
		wait:     prometheus.NewDesc("jobq_job_wait_seconds", "How long jobs had been due when a worker claimed them (by the backend's clock).", qt, nil),
		busy:     prometheus.NewDesc("jobq_workers_busy", "Handlers of this process running jobs of the queue now.", []string{"queue"}, nil),
		unhandled: prometheus.NewDesc("jobq_unhandled_job_age_seconds",
			"Age, since its enqueue, of the oldest job of the queue and type this process gave back for want of a handler in the last 2 minutes; absent when it gave none back. Growing past minutes, it means no worker runs the type.", qt, nil),
	}
	for i, s := range counterSpecs {
		c.counters[i] = prometheus.NewDesc("jobq_"+s.name, s.help, qt, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *seriesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.counters {
		ch <- d
	}
	ch <- c.duration
	ch <- c.wait
	ch <- c.busy
	ch <- c.unhandled
}

// Collect implements prometheus.Collector.
func (c *seriesCollector) Collect(ch chan<- prometheus.Metric) {
	all := *c.m.series.Load()
	busy := make(map[string]int64)
	now := time.Now().UnixNano()
	for _, s := range all {
		for i, d := range c.counters {
			ch <- constMetric(d, prometheus.CounterValue, float64(s.counts[i].Load()), s.queue, s.typ)
		}
		ch <- s.duration.metric(c.duration, c.m.upper, s.queue, s.typ)
		ch <- s.wait.metric(c.wait, c.m.upper, s.queue, s.typ)
		busy[s.queue] += s.busy.Load()
		if at := s.unhandledAt.Load(); at != 0 && now-at < int64(unhandledWindow) {
			ch <- constMetric(c.unhandled, prometheus.GaugeValue, time.Duration(s.unhandledAge.Load()).Seconds(), s.queue, s.typ)
		}
	}
	for q, n := range busy {
		ch <- constMetric(c.busy, prometheus.GaugeValue, float64(n), q)
	}
}

// constMetric is a constant metric, or the error that refused it as an
// invalid metric: a scrape reports it rather than the process panicking.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
