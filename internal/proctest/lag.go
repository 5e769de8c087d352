package proctest

import (
	"sync"
	"testing"
	"time"
)

// lagTick is how often a LagMeter asks to be woken.
const lagTick = 5 * time.Millisecond

// LagMeter measures how late this process's goroutines are woken while a
// timing test runs: the control for a latency bound on a shared machine.
// Under -race with other packages' tests on two cores a sleeping
// goroutine can be woken hundreds of milliseconds late; a bound that
// stands for the code under test must not count that lateness against it.
type LagMeter struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	max  time.Duration
}

// StartLagMeter starts measuring until the test ends (or Stop).
func StartLagMeter(tb testing.TB) *LagMeter {
	m := &LagMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	tb.Cleanup(m.Stop)
	return m
}

func (m *LagMeter) run() {
	defer close(m.done)
	t := time.NewTicker(lagTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			// The ticker's channel holds one tick: a wake-up late by
			// d shows as a gap of about d+lagTick since the last one.
			got := time.Now()
			late := got.Sub(last) - lagTick
			m.mu.Lock()
			m.max = max(m.max, late)
			m.mu.Unlock()
			last = got
		}
	}
}

// Max is the latest wake-up seen so far, beyond the tick asked for.
func (m *LagMeter) Max() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// Stop ends the measuring; Max keeps its value. It may be called twice.
func (m *LagMeter) Stop() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}
