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

// Background runs Loop in a goroutine of its own, for components whose
// lifetime is an object's rather than a caller's context. stop cancels the
// loop and waits for it to return; call it once.
func Background(interval time.Duration, fn func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, interval, fn)
	}()
	return func() {
		cancel()
		<-done
	}
}
