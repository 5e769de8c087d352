package metrics

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobq/jobq"
)

// maxHeldKeys bounds the held keys one scrape reads: past it the count is
// a floor, and the oldest may be missed. A queue with thousands of keys
// waiting for an operator has its alert firing long before.
const maxHeldKeys = 10000

// keyCollector exports the held keys per queue (never a label per key:
// keys are unbounded) from one Inspector.Keys per scrape at most, cached
// like the queue depths. A backend without keys is asked once.
type keyCollector struct {
	held   *cachedRead[[]jobq.KeyInfo]
	count  *prometheus.Desc
	oldest *prometheus.Desc
}

func newKeyCollector(in *jobq.Inspector, o Options) *keyCollector {
	return &keyCollector{
		held: &cachedRead[[]jobq.KeyInfo]{
			cache: o.StatsCache, timeout: o.StatsTimeout, log: o.Logger,
			what: "held keys",
			read: func(ctx context.Context) ([]jobq.KeyInfo, error) {
				return in.Keys(ctx, jobq.KeyListParams{Held: true, Limit: maxHeldKeys})
			},
			none: func(err error) bool { return errors.Is(err, jobq.ErrNotSupported) },
		},
		count: prometheus.NewDesc("jobq_keys_held",
			"Ordered keys waiting for an operator: their head failed for good under the hold policy, and nothing of the key runs until it is retried or purged ('jobq keys list --held'). Read from the backend, cached; absent when the backend keeps no keys.",
			[]string{"queue"}, nil),
		oldest: prometheus.NewDesc("jobq_keys_held_oldest_timestamp_seconds",
			"When the head of the queue's longest-held key failed (Unix seconds): now minus it is how long that key has waited. Absent when no key of the queue is held.",
			[]string{"queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
}

// Collect implements prometheus.Collector.
func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	keys, ok := c.held.get()
	if !ok {
		return
	}
	type queueHeld struct {
		n      int
		oldest float64
	}
	byQueue := map[string]*queueHeld{}
	for _, k := range keys {
		q := byQueue[k.Queue]
		since := float64(k.HeldSince.UnixNano()) / 1e9
		if q == nil {
			q = &queueHeld{oldest: since}
			byQueue[k.Queue] = q
		}
		q.n++
		q.oldest = min(q.oldest, since)
	}
	for name, q := range byQueue {
		ch <- constMetric(c.count, prometheus.GaugeValue, float64(q.n), name)
		ch <- constMetric(c.oldest, prometheus.GaugeValue, q.oldest, name)
	}
}
