// Package ticker is the one loop shape every background component shares:
// run a pass every interval until a context ends.
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
