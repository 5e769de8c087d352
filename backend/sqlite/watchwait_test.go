package sqlite

import (
	"testing"
	"time"
)

// TestWatchWait: the watcher looks every interval while commits keep
// coming, stretches its wait to a quarter of the quiet after that, up to
// quietWatchMax, and never waits less than a longer interval.
func TestWatchWait(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, c := range []struct{ interval, quiet, want time.Duration }{
		{5 * ms, 0, 5 * ms},
		{5 * ms, 20 * ms, 5 * ms},
		{5 * ms, 100 * ms, 25 * ms},
		{5 * ms, time.Second, quietWatchMax},
		{5 * ms, time.Hour, quietWatchMax},
		{time.Second, time.Hour, time.Second},
	} {
		if got := watchWait(c.interval, c.quiet); got != c.want {
			t.Errorf("watchWait(%s, %s) = %s, want %s", c.interval, c.quiet, got, c.want)
		}
	}
}
