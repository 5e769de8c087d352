package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobq/jobq"
)

// workflowCollector exports the workflow gauges from one
// Inspector.WorkflowStats per scrape at most, cached like the queue
// depths (see depthCollector.read). A backend without workflows is asked
// once: its gauges are absent for good.
type workflowCollector struct {
	stats              *cachedRead[jobq.WorkflowStats]
	workflows, waiting *prometheus.Desc
}

func newWorkflowCollector(in *jobq.Inspector, o Options) *workflowCollector {
	return &workflowCollector{
		stats: &cachedRead[jobq.WorkflowStats]{
			cache: o.StatsCache, timeout: o.StatsTimeout, log: o.Logger,
			what: "workflow counts", read: in.WorkflowStats,
			none: func(err error) bool { return errors.Is(err, jobq.ErrNoWorkflows) },
		},
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
	st, ok := c.stats.get()
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
