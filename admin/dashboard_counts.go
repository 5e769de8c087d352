package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// The counts cache and the throughput history.
//
// Every page view needs the queues' counts; many viewers (and each open
// overview polling every few seconds) would each run the backend's
// QueueStats. So the counts come from one Inspector.Queues call shared by
// everyone for countsTTL.
//
// The backend keeps no per-minute counters, and New returns a plain
// http.Handler with no Close, so the history is sampled on request: when
// the counts are refreshed and the last sample is older than sampleEvery,
// a sample is taken (with Options.Sample, a loop also refreshes them every
// sampleEvery until that context ends; see sampleUntil): the live and failed totals and the
// number of jobs ever inserted (Inspector.JobsInserted, a count that only
// grows). Between two samples:
//
//	enqueued = Δ jobs inserted
//	finished = enqueued − Δ live jobs  (completed, cancelled or failed)
//	failed   = Δ failed jobs
//	completed ≈ finished − failed
//
// Job IDs cannot stand in for the insert count: on Redis they are
// timestamps, and the newest ID the inspector can see lags whenever the
// newest jobs are already done and deleted.
//
// It is an estimate: a replay or purge in the interval lowers "failed"
// and a replay raises the live jobs without an insert (each shown as zero,
// never negative), and the chart covers only the time something requested
// the counts (an open overview does every 5 s); a gap longer than
// maxSampleGap, or a sample whose insert count could not be read, is shown
// as "no data", not spread as a guess. A backend that keeps no insert
// count (sync) has no data at all, and every minute says so.
const (
	countsTTL    = 2 * time.Second
	sampleEvery  = 10 * time.Second
	maxSampleGap = 2 * time.Minute
	historySpan  = time.Hour
)

// sample is the state of all queues at one time.
type sample struct {
	at       time.Time
	live     int64 // pending + scheduled + reserved
	failed   int64
	inserted int64 // jobs ever inserted, when known
	known    bool  // false: inserted could not be read
}

// countsCache holds the last counts and the history of samples.
type countsCache struct {
	insp *jobq.Inspector
	now  func() time.Time
	ttl  time.Duration

	mu      sync.Mutex // held during a refresh, so concurrent viewers share one query
	at      time.Time
	queues  []jobq.QueueInfo
	samples []sample // oldest first, within historySpan
	// unsupported: the backend keeps no insert count, so no throughput.
	unsupported bool
}

func newCountsCache(insp *jobq.Inspector, now func() time.Time) *countsCache {
	return &countsCache{insp: insp, now: now, ttl: countsTTL}
}

// get returns every queue's counts and settings, at most ttl old.
func (c *countsCache) get(ctx context.Context) ([]jobq.QueueInfo, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.at.IsZero() && now.Sub(c.at) < c.ttl {
		return c.queues, c.at, nil
	}
	qs, err := c.insp.Queues(ctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read queue counts: %w", err)
	}
	c.queues, c.at = qs, now
	if n := len(c.samples); n == 0 || now.Sub(c.samples[n-1].at) >= sampleEvery {
		c.record(ctx, now, qs)
	}
	return c.queues, c.at, nil
}

// invalidate makes the next get read the counts afresh: after a change
// the operator made, the page must show it.
func (c *countsCache) invalidate() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// record appends a sample and forgets those older than historySpan.
func (c *countsCache) record(ctx context.Context, now time.Time, qs []jobq.QueueInfo) {
	t := jobq.Totals(statsOf(qs))
	s := sample{at: now, live: t.Pending + t.Scheduled + t.Reserved, failed: t.Failed}
	n, err := c.insp.JobsInserted(ctx)
	// A failed read leaves this sample unknown: the minutes it bounds show
	// no data rather than a guess.
	s.inserted, s.known = n, err == nil
	c.unsupported = errors.Is(err, jobq.ErrNotSupported)
	c.samples = append(c.samples, s)
	cut := 0
	for cut < len(c.samples) && now.Sub(c.samples[cut].at) > historySpan+time.Minute {
		cut++
	}
	c.samples = c.samples[cut:]
}

// minute is one bar of the chart.
type minute struct {
	At        int64 `json:"at"` // Unix seconds of the minute's start
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	Known     bool  `json:"known"` // false: no samples covered it
	// Unsupported: the backend keeps no insert count, so no minute can
	// be known (the chart says throughput is not available).
	Unsupported bool `json:"unsupported,omitempty"`
}

// history turns the samples into one bar per minute of the last hour,
// oldest first.
func (c *countsCache) history() []minute {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now().Truncate(time.Minute)
	start := now.Add(-historySpan + time.Minute)
	out := make([]minute, 60)
	for k := range out {
		out[k].At = start.Add(time.Duration(k) * time.Minute).Unix()
		out[k].Unsupported = c.unsupported
	}
	for k := 1; k < len(c.samples); k++ {
		a, b := c.samples[k-1], c.samples[k]
		if b.at.Sub(a.at) > maxSampleGap || !a.known || !b.known {
			continue
		}
		idx := int(b.at.Truncate(time.Minute).Sub(start) / time.Minute)
		if idx < 0 || idx >= len(out) {
			continue
		}
		failed := max(0, b.failed-a.failed)
		enqueued := max(0, b.inserted-a.inserted)
		finished := max(0, enqueued-(b.live-a.live))
		out[idx].Known = true
		out[idx].Failed += failed
		out[idx].Completed += max(0, finished-failed)
	}
	return out
}

// statsOf returns the counts of qs.
func statsOf(qs []jobq.QueueInfo) []jobq.QueueStats {
	out := make([]jobq.QueueStats, len(qs))
	for k, q := range qs {
		out[k] = q.QueueStats
	}
	return out
}

// sampleUntil refreshes the counts, and so takes a sample, every
// sampleEvery until ctx ends, so the chart covers time nobody had the
// dashboard open. A failed read is logged at most once per outage and the
// loop goes on: the chart then shows those minutes as "no data".
func (c *countsCache) sampleUntil(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.invalidate()
		_, _, err := c.get(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("admin: sample the queue counts for the dashboard's chart", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}
