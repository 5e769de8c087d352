package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobq/jobq"
)

// workflowCollector exports the workflow gauges from one
// Inspector.WorkflowStats per scrape at most, cached like the queue
// depths (see depthCollector.read). A backend without workflows is asked
// once: its gauges are absent for good.
type workflowCollector struct {
	in      *jobq.Inspector
	cache   time.Duration
	timeout time.Duration
	log     *slog.Logger

	workflows, waiting *prometheus.Desc

	mu      sync.Mutex // held across a read, so scrapes share it
	readAt  time.Time
	stats   jobq.WorkflowStats
	err     error
	elapsed time.Duration
	none    bool // the backend runs no workflows
}

func newWorkflowCollector(in *jobq.Inspector, o Options) *workflowCollector {
	return &workflowCollector{
		in: in, cache: o.StatsCache, timeout: o.StatsTimeout, log: o.Logger,
		workflows: prometheus.NewDesc("jobq_workflows",
			"Workflows by state: running (a task waiting or with a live job), succeeded, failed (a task failed; replaying it runs the workflow again), cancelled. Read from the backend, cached; absent when the backend runs no workflows or the read failed.",
			[]string{"state"}, nil),
		waiting: prometheus.NewDesc("jobq_workflow_tasks_waiting",
			"Tasks of running workflows waiting for their dependencies to end: they have no job yet. Read from the backend, cached.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *workflowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.workflows
	ch <- c.waiting
}

// Collect implements prometheus.Collector.
func (c *workflowCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.read()
	if !ok {
		return
	}
	for _, v := range []struct {
		state string
		n     int64
	}{{"running", st.Running}, {"succeeded", st.Succeeded}, {"failed", st.Failed}, {"cancelled", st.Cancelled}} {
		ch <- constMetric(c.workflows, prometheus.GaugeValue, float64(v.n), v.state)
	}
	ch <- constMetric(c.waiting, prometheus.GaugeValue, float64(st.TasksWaiting))
}

// read returns the cached counts, reading them anew when the cache has
// expired (StatsCache, or slowReadFactor times the last read's duration
// when longer); ok is false when there are none to export.
func (c *workflowCollector) read() (jobq.WorkflowStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.none {
		return jobq.WorkflowStats{}, false
	}
	ttl := c.cache
	if ttl >= 0 {
		ttl = max(ttl, slowReadFactor*c.elapsed)
	}
	if c.readAt.IsZero() || time.Since(c.readAt) >= ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		start := time.Now()
		st, err := c.in.WorkflowStats(ctx)
		c.readAt, c.elapsed = time.Now(), time.Since(start)
		if errors.Is(err, jobq.ErrNoWorkflows) {
			c.none = true
			return jobq.WorkflowStats{}, false
		}
		if err != nil && (c.err == nil || c.err.Error() != err.Error()) {
			c.log.Warn("read workflow counts for metrics", "err", err)
		}
		c.stats, c.err = st, err
	}
	return c.stats, c.err == nil
}
