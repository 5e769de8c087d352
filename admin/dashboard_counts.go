package admin

import (
	"context"
	"fmt"
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
// http.Handler with no Close, so the history is sampled on request, not by
// a goroutine: when the counts are refreshed and the last sample is older
// than sampleEvery, a sample is taken: the live and failed totals and a
// high-water mark of job IDs (IDs only grow, so its rise is the number of
// jobs enqueued since the last sample). Between two samples:
//
//	enqueued = Δ high-water ID
//	finished = enqueued − Δ live jobs  (completed, cancelled or failed)
//	failed   = Δ failed jobs
//	completed ≈ finished − failed
//
// It is an estimate: a replay or purge in the interval lowers "failed"
// (shown as zero, never negative), and the chart covers only the time
// something requested the counts (an open overview does every 5 s); a gap
// longer than maxSampleGap is shown as "no data", not spread as a guess.
const (
	countsTTL    = 2 * time.Second
	sampleEvery  = 10 * time.Second
	maxSampleGap = 2 * time.Minute
	historySpan  = time.Hour
)

// sample is the state of all queues at one time.
type sample struct {
	at     time.Time
	live   int64 // pending + scheduled + reserved
	failed int64
	maxID  int64 // highest job ID seen so far; 0 when unknown
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
	maxID   int64
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
	if id := c.highWater(ctx); id > c.maxID {
		c.maxID = id
	}
	c.samples = append(c.samples, sample{at: now, live: t.Pending + t.Scheduled + t.Reserved, failed: t.Failed, maxID: c.maxID})
	cut := 0
	for cut < len(c.samples) && now.Sub(c.samples[cut].at) > historySpan+time.Minute {
		cut++
	}
	c.samples = c.samples[cut:]
}

// highWater is the highest job ID found by three index-ordered reads of
// one row: the newest due job, the newest failed one, the newest kept
// completed one. In a working system the newest job is usually one of
// them; when it is not (it is scheduled, or done and deleted), the mark
// lags and catches up with the next enqueue, so the total stays right.
// Errors (a backend that cannot list) leave the mark where it was.
func (c *countsCache) highWater(ctx context.Context) int64 {
	var best int64
	if rows, err := c.insp.JobsPage(ctx, jobq.StatePending, jobq.JobFilter{}, 1, 0); err == nil && len(rows) > 0 {
		best = max(best, rows[0].ID)
	}
	if rows, err := c.insp.FailedPage(ctx, jobq.FailedFilter{}, 1, 0); err == nil && len(rows) > 0 {
		best = max(best, rows[0].JobID)
	}
	if rows, err := c.insp.FinishedPage(ctx, jobq.StateCompleted, jobq.JobFilter{}, 1, 0); err == nil && len(rows) > 0 {
		best = max(best, rows[0].ID)
	}
	return best
}

// minute is one bar of the chart.
type minute struct {
	At        int64 `json:"at"` // Unix seconds of the minute's start
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	Known     bool  `json:"known"` // false: no samples covered it
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
	}
	for k := 1; k < len(c.samples); k++ {
		a, b := c.samples[k-1], c.samples[k]
		if b.at.Sub(a.at) > maxSampleGap {
			continue
		}
		idx := int(b.at.Truncate(time.Minute).Sub(start) / time.Minute)
		if idx < 0 || idx >= len(out) {
			continue
		}
		failed := max(0, b.failed-a.failed)
		finished := int64(0)
		if a.maxID > 0 {
			finished = max(0, (b.maxID-a.maxID)-(b.live-a.live))
		}
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
