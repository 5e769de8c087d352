package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// cachedRead is a backend read that gauges share: done at most once per
// StatsCache (or slowReadFactor times the last read's duration, when
// longer), under a lock held across the read so concurrent scrapes share
// it. A read that says the backend lacks the feature (none) is not tried
// again: its gauges are absent for good.
type cachedRead[T any] struct {
	cache   time.Duration
	timeout time.Duration
	log     *slog.Logger
	what    string // names the read in the warning of a failed one
	read    func(context.Context) (T, error)
	none    func(error) bool

	mu      sync.Mutex
	readAt  time.Time
	v       T
	err     error
	elapsed time.Duration
	absent  bool
}

// get returns the cached value, reading it anew when the cache expired;
// ok is false when there is none to export (the last read failed, or the
// backend lacks the feature).
func (c *cachedRead[T]) get() (v T, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.absent {
		return v, false
	}
	ttl := c.cache
	if ttl >= 0 {
		ttl = max(ttl, slowReadFactor*c.elapsed)
	}
	if c.readAt.IsZero() || time.Since(c.readAt) >= ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		start := time.Now()
		got, err := c.read(ctx)
		c.readAt, c.elapsed = time.Now(), time.Since(start)
		if err != nil && c.none(err) {
			c.absent = true
			return v, false
		}
		if err != nil && (c.err == nil || c.err.Error() != err.Error()) {
			c.log.Warn("read "+c.what+" for metrics", "err", err)
		}
		c.v, c.err = got, err
	}
	return c.v, c.err == nil
}
