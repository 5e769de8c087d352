// Package ticker is the one loop shape every background component shares:
// run a pass every interval until a context ends (Loop), and wait between
// tries until a context ends (Sleep).
package ticker

import (
	"context"
	"time"
)

// Loop calls fn every interval until ctx ends. The first call comes one
// interval after the start.
func Loop(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// Sleep waits d, or until ctx ends; it reports whether the whole wait
// passed (false: ctx ended first), so loops that back off between tries
// stop with their context.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
