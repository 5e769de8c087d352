package metrics

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestHistogramBuckets: an observation on a bound counts in that bound's
// bucket (Prometheus's le), one just above it in the next, one above every
// bound only in +Inf; the scraped buckets are cumulative, the count is
// every observation and the sum is in seconds.
func TestHistogramBuckets(t *testing.T) {
	upper, bs, err := histogramBounds([]float64{0.001, 0.0025, 3600})
	if err != nil {
		t.Fatal(err)
	}
	var h histogram
	for _, d := range []time.Duration{0, time.Millisecond, time.Millisecond + 1, 2500 * time.Microsecond, time.Hour, 2 * time.Hour} {
		h.observe(bs, d)
	}
	var m dto.Metric
	desc := prometheus.NewDesc("x", "x", []string{"queue"}, nil)
	if err := h.metric(desc, upper, "q").Write(&m); err != nil {
		t.Fatal(err)
	}
	got := map[float64]uint64{}
	for _, b := range m.Histogram.GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	want := map[float64]uint64{0.001: 2, 0.0025: 4, 3600: 5}
	for le, n := range want {
		if got[le] != n {
			t.Errorf("bucket le=%g: %d, want %d (all: %v)", le, got[le], n, got)
		}
	}
	if c := m.Histogram.GetSampleCount(); c != 6 {
		t.Errorf("count %d, want 6", c)
	}
	wantSum := 0.001 + 0.001000001 + 0.0025 + 3600 + 7200
	if s := m.Histogram.GetSampleSum(); math.Abs(s-wantSum) > 1e-9 {
		t.Errorf("sum %.9f, want %.9f", s, wantSum)
	}
}

// TestHistogramBoundsRefused: New refuses Buckets it cannot use, saying
// which bound is wrong.
func TestHistogramBoundsRefused(t *testing.T) {
	for _, b := range [][]float64{
		nil,
		make([]float64, maxBuckets+1),
		{0.1, 0.1},
		{1, 0.5},
		{0, 1},
		{1, math.Inf(1)},
		{math.NaN()},
		{1e10},
		{1e-10},
		{1, 1 + 1e-12},
	} {
		if _, _, err := histogramBounds(b); err == nil {
			t.Errorf("bounds %v accepted", b)
		}
	}
	if _, bs, err := histogramBounds(Buckets); err != nil || bs[0] != time.Millisecond || bs[len(bs)-1] != time.Hour {
		t.Errorf("default buckets: %v, %v", bs, err)
	}
}

// TestRecentSlotsChecked: names that share a slot of the lookup cache (the
// same lengths and sampled bytes) still get their own series, in turn and
// from many goroutines, and a type past MaxTypes, whose series is the
// overflow one, never takes a labelled type's series from the cache.
func TestRecentSlotsChecked(t *testing.T) {
	m, err := New(Options{MaxTypes: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Differ only in a byte slotOf does not read.
	names := []string{"send-xa-mail", "send-ya-mail", "send-za-mail"}
	for _, n := range names[1:] {
		if slotOf("q", n) != slotOf("q", names[0]) {
			t.Fatalf("%q and %q are in different slots; the test needs them to share one", n, names[0])
		}
	}
	for _, n := range names {
		m.of("q", n) // labelled first: the next is past MaxTypes
	}
	over := "send-wa-mail"
	all := append(names[:len(names):len(names)], over)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				n := all[(i+g)%len(all)]
				s := m.of("q", strings.Clone(n)) // a job's names are its own copies
				want := n
				if n == over {
					want = OverflowType
				}
				if s.queue != "q" || s.typ != want {
					t.Errorf("of(q, %s) = series of (%s, %s), want (q, %s)", n, s.queue, s.typ, want)
					return
				}
				s.inc(cStarted)
			}
		})
	}
	wg.Wait()
	for _, n := range append(names, OverflowType) {
		if got := m.of("q", n).counts[cStarted].Load(); got != 1000 {
			t.Errorf("%s started %d times, want 1000", n, got)
		}
	}
}
