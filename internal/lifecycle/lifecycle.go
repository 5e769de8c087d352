// Package lifecycle is the one start/stop contract of jobq's background
// components: the worker's claimer, completer, lease extender and sweeper,
// and the backends' notifiers, vacuumer and checkpointer. Each is a
// Component, a function that works until its context ends; a Group starts
// them and stops them in the reverse of the order they were started, so a
// component may rely on every component started before it for as long as
// it runs (the claimer on the completer, say). New loops (cron, retention,
// depth pollers) are added as one more Component, not by growing the code
// that owns them.
package lifecycle

import (
	"context"
	"sync"
	"time"
)

// Component is one background loop.
type Component struct {
	// Name identifies the component in logs and tests.
	Name string
	// Run works until ctx ends, or, for a component with Drain, until
	// the work Drain asked it to finish is done. It must return promptly
	// once ctx ends.
	Run func(ctx context.Context)
	// Drain, when set, asks Run to finish what it holds and return by
	// itself (the completer writes its last outcomes): Stop calls it and
	// gives Run up to Grace before cancelling ctx. Without Drain, Stop
	// cancels ctx at once.
	Drain func()
	// Grace bounds the wait after Drain; 0 waits as long as Run takes.
	Grace time.Duration
}

// Group runs components and stops them in reverse start order. The zero
// value is ready to use; a Group is safe for concurrent use.
type Group struct {
	mu      sync.Mutex
	parts   []*part
	stopped bool
	down    chan struct{} // closed when the first Stop has finished
}

type part struct {
	c      Component
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs c in a goroutine of its own under a context derived from
// parent (which may end it early). It reports false, running nothing, when
// the group was already stopped.
func (g *Group) Start(parent context.Context, c Component) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	ctx, cancel := context.WithCancel(parent)
	p := &part{c: c, cancel: cancel, done: make(chan struct{})}
	g.parts = append(g.parts, p)
	go func() {
		defer close(p.done)
		c.Run(ctx)
	}()
	return true
}

// Stop stops every component, the last started first, each completely
// before the next: Drain and up to Grace for a draining component, then
// its context is cancelled and Stop waits for Run to return. Later calls
// and calls during a Stop return once the first Stop has finished.
func (g *Group) Stop() {
	g.mu.Lock()
	if g.down == nil {
		g.down = make(chan struct{})
	}
	down := g.down
	if g.stopped {
		g.mu.Unlock()
		<-down
		return
	}
	parts := g.parts
	g.parts = nil
	g.stopped = true
	g.mu.Unlock()
	for i := len(parts) - 1; i >= 0; i-- {
		parts[i].stop()
	}
	close(down)
}

func (p *part) stop() {
	if p.c.Drain != nil {
		p.c.Drain()
		var grace <-chan time.Time
		if p.c.Grace > 0 {
			t := time.NewTimer(p.c.Grace)
			defer t.Stop()
			grace = t.C
		}
		select {
		case <-p.done:
		case <-grace:
		}
	}
	p.cancel()
	<-p.done
}
