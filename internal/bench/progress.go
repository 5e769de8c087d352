package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress redraws one status line in place until finish. A nil *progress
// (no writer) does nothing, so workloads call it unconditionally.
type progress struct {
	w     io.Writer
	name  string
	frac  func() float64
	count func() int64
	start time.Time
	stop  chan struct{}
	done  chan struct{}
}

// startProgress draws name's bar every 100ms: frac is the share done (0..1),
// count the jobs so far.
func startProgress(w io.Writer, name string, frac func() float64, count func() int64) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, name: name, frac: frac, count: count, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.draw()
		select {
		case <-p.stop:
			fmt.Fprint(p.w, "\r\x1b[K") // leave the line clean for what follows
			return
		case <-t.C:
		}
	}
}

func (p *progress) draw() {
	const width = 30
	f := min(max(p.frac(), 0), 1)
	filled := int(f * width)
	fmt.Fprintf(p.w, "\r\x1b[K%-15s [%s%s] %3.0f%%  %d jobs  %.1fs", p.name,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), f*100, p.count(), time.Since(p.start).Seconds())
}

// finish stops redrawing and clears the line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
}

// fracOf returns the share of n that counter reached.
func fracOf(get func() int64, n int64) func() float64 {
	return func() float64 { return float64(get()) / float64(max(n, 1)) }
}

// fracOfTime returns the share of d elapsed since start.
func fracOfTime(start time.Time, d time.Duration) func() float64 {
	return func() float64 { return float64(time.Since(start)) / float64(d) }
}
