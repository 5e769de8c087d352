package metrics

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobq/jobq"
)

// depthCollector exports the queue depths from one Inspector.Stats per
// scrape at most: concurrent scrapes wait for the same read, and a read
// serves every scrape for the cache period, so many scrapers do not load
// the backend.
type depthCollector struct {
	in      *jobq.Inspector
	cache   time.Duration
	timeout time.Duration
	log     *slog.Logger
	known   func() map[string]bool

	jobs, oldest, up, took *prometheus.Desc

	mu      sync.Mutex // held across a read, so scrapes share it
	readAt  time.Time
	stats   []jobq.QueueStats
	err     error
	elapsed time.Duration
}

func newDepthCollector(in *jobq.Inspector, o Options, known func() map[string]bool) *depthCollector {
	return &depthCollector{
		in: in, cache: o.StatsCache, timeout: o.StatsTimeout, log: o.Logger, known: known,
		jobs: prometheus.NewDesc("jobq_queue_jobs",
			"Jobs in the queue by state: pending (due now), scheduled (due later: delayed or backing off), reserved (running), failed (in the failed jobs table). Read from the backend, cached.",
			[]string{"queue", "state"}, nil),
		oldest: prometheus.NewDesc("jobq_queue_oldest_due_timestamp_seconds",
			"When the job due longest became due, in Unix seconds by the backend's clock; absent when no job is due. time() minus it is how far behind the queue is.",
			[]string{"queue"}, nil),
		up: prometheus.NewDesc("jobq_queue_stats_up",
			"1 when the last read of the queue depths succeeded; 0 when it failed, and the depth gauges are then absent.",
			nil, nil),
		took: prometheus.NewDesc("jobq_queue_stats_duration_seconds",
			"How long the last read of the queue depths took.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (d *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.jobs
	ch <- d.oldest
	ch <- d.up
	ch <- d.took
}

// Collect implements prometheus.Collector.
func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	stats, elapsed, err := d.read()
	ch <- prometheus.MustNewConstMetric(d.took, prometheus.GaugeValue, elapsed.Seconds())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, 1)
	seen := map[string]bool{}
	emit := func(s jobq.QueueStats) {
		for _, v := range []struct {
			state jobq.JobState
			n     int64
		}{{jobq.StatePending, s.Pending}, {jobq.StateScheduled, s.Scheduled}, {jobq.StateReserved, s.Reserved}, {jobq.StateFailed, s.Failed}} {
			ch <- prometheus.MustNewConstMetric(d.jobs, prometheus.GaugeValue, float64(v.n), s.Queue, string(v.state))
		}
		if !s.OldestDue.IsZero() {
			ch <- prometheus.MustNewConstMetric(d.oldest, prometheus.GaugeValue, float64(s.OldestDue.UnixMicro())/1e6, s.Queue)
		}
	}
	for _, s := range stats {
		seen[s.Queue] = true
		emit(s)
	}
	// The backend omits empty queues; the known ones show at zero, so a
	// queue that empties reads 0 rather than vanishing.
	var empty []string
	for q := range d.known() {
		if !seen[q] {
			empty = append(empty, q)
		}
	}
	sort.Strings(empty)
	for _, q := range empty {
		emit(jobq.QueueStats{Queue: q})
	}
}

// slowReadFactor keeps a slow depth read from loading the backend and the
// process: a read serves scrapes for at least this many times as long as
// it took, so reads take at most 2 % of the time, however big the tables
// grow and however often they are scraped. A factor a tenth as large cost
// a worker with a large SQLite backlog a noticeable share of a core
// (docs/performance.md, "Why the code is shaped this way"); the depths
// then lag by up to this many times a read's duration, which a backlog
// alert that waits minutes does not notice.
const slowReadFactor = 50

// read returns the cached depths, reading them anew when the cache has
// expired: after StatsCache, or slowReadFactor times the last read's
// duration when that is longer. A failed read is cached too: a backend
// that is down is not asked more often than one that is up.
func (d *depthCollector) read() ([]jobq.QueueStats, time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ttl := d.cache
	if ttl >= 0 {
		ttl = max(ttl, slowReadFactor*d.elapsed)
	}
	if !d.readAt.IsZero() && time.Since(d.readAt) < ttl {
		return d.stats, d.elapsed, d.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	start := time.Now()
	stats, err := d.in.Stats(ctx)
	d.readAt, d.elapsed = time.Now(), time.Since(start)
	if err != nil && (d.err == nil || d.err.Error() != err.Error()) {
		d.log.Warn("read queue depths for metrics", "err", err)
	}
	d.stats, d.err = stats, err
	return stats, d.elapsed, err
}
