package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/metrics"
)

// newMetrics returns Metrics on a registry of their own, logging to log
// (discarded when nil).
func newMetrics(t *testing.T, o metrics.Options) *metrics.Metrics {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := metrics.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrapeOf reads m's metrics page through its handler.
func scrapeOf(t *testing.T, m *metrics.Metrics) scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return parse(t, rec.Body.String())
}

// TestTypeLabelBounded: past MaxTypes distinct types, further types count
// under OverflowType, whatever the hook that saw them.
func TestTypeLabelBounded(t *testing.T) {
	m := newMetrics(t, metrics.Options{MaxTypes: 2})
	h := m.WorkerHooks()
	for _, typ := range []string{"a", "b", "c", "d", "a", "d"} {
		h.Started(t.Context(), &jobq.Job{Queue: "q", Type: typ})
	}
	m.ClientHooks().AfterEnqueue(t.Context(), jobq.EnqueueInfo{Queue: "q", Type: "e"}, jobq.EnqueueResult{ID: 1}, nil)
	m.InspectorHooks().Replayed(t.Context(), []jobq.TypeCount{{Queue: "q", Type: "b", Count: 2}, {Queue: "q", Type: "f", Count: 3}})
	s := scrapeOf(t, m)
	s.check(t, want{
		"jobq_jobs_started_total{queue=q,type=a}":       2,
		"jobq_jobs_started_total{queue=q,type=b}":       1,
		"jobq_jobs_started_total{queue=q,type=_other}":  3,
		"jobq_jobs_started_total{queue=q,type=c}":       absent,
		"jobq_jobs_started_total{queue=q,type=d}":       absent,
		"jobq_jobs_enqueued_total{queue=q,type=_other}": 1,
		"jobq_jobs_replayed_total{queue=q,type=b}":      2,
		"jobq_jobs_replayed_total{queue=q,type=_other}": 3,
		"jobq_workers_busy{queue=q}":                    6,
	})
	if got := len(s.fams["jobq_jobs_started_total"].GetMetric()); got != 3 {
		t.Fatalf("%d started series, want 3 (a, b and %s)", got, metrics.OverflowType)
	}
}

// TestInvalidUTF8Type: a type that is not valid UTF-8 (the backends check
// types for control characters only) counts under OverflowType, and the
// scrape still succeeds.
func TestInvalidUTF8Type(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	h := m.WorkerHooks()
	h.Started(t.Context(), &jobq.Job{Queue: "q", Type: "bad\xff"})
	h.Started(t.Context(), &jobq.Job{Queue: "q", Type: "ok"})
	scrapeOf(t, m).check(t, want{
		"jobq_jobs_started_total{queue=q,type=_other}": 1,
		"jobq_jobs_started_total{queue=q,type=ok}":     1,
	})
}

// TestOutcomeCounters: each kind of written outcome lands in its counter;
// a swept job with no attempt left counts as rescued and failed, an
// expired one as expired and failed, not rescued; an
// interrupted attempt (released) or an abandoned one (never written) as
// released; an outcome the fence refused as stale only, not as what it
// said; a duplicate or failed enqueue as nothing.
func TestOutcomeCounters(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	h := m.WorkerHooks()
	job := &jobq.Job{Queue: "q", Type: "t"}
	for _, k := range []jobq.EventKind{jobq.EventDone, jobq.EventRetry, jobq.EventFailed, jobq.EventReleased, jobq.EventAbandoned} {
		h.Started(t.Context(), job)
		ev := jobq.Event{Kind: k, Job: job, Duration: 2 * time.Second}
		h.Finished(ev)
		if k != jobq.EventAbandoned {
			h.Written(ev)
		}
	}
	h.Claimed(jobq.ClaimedEvent{Job: job, Wait: 90 * time.Second})
	h.Rescued(jobq.RescuedEvent{Queue: "q", Type: "t"})
	h.Rescued(jobq.RescuedEvent{Queue: "q", Type: "t", Failed: true})
	h.Rescued(jobq.RescuedEvent{Queue: "q", Type: "t", Failed: true, Expired: true})
	// A done attempt whose lease was lost: finished, refused, not written.
	h.Started(t.Context(), job)
	h.Finished(jobq.Event{Kind: jobq.EventDone, Job: job, Duration: 2 * time.Second})
	h.Stale(jobq.StaleEvent{Queue: "q", Type: "t"})
	c := m.ClientHooks()
	c.AfterEnqueue(t.Context(), jobq.EnqueueInfo{Queue: "q", Type: "t"}, jobq.EnqueueResult{ID: 1, Duplicate: true}, nil)
	c.AfterEnqueue(t.Context(), jobq.EnqueueInfo{Queue: "q", Type: "t"}, jobq.EnqueueResult{}, errors.New("down"))
	s := scrapeOf(t, m)
	s.check(t, want{
		"jobq_jobs_started_total{queue=q,type=t}":        6,
		"jobq_jobs_completed_total{queue=q,type=t}":      1,
		"jobq_jobs_retried_total{queue=q,type=t}":        1,
		"jobq_jobs_failed_total{queue=q,type=t}":         3,
		"jobq_jobs_expired_total{queue=q,type=t}":        1,
		"jobq_jobs_released_total{queue=q,type=t}":       2,
		"jobq_jobs_rescued_total{queue=q,type=t}":        2,
		"jobq_jobs_stale_outcomes_total{queue=q,type=t}": 1,
		"jobq_jobs_enqueued_total{queue=q,type=t}":       0,
		"jobq_job_duration_seconds{queue=q,type=t}":      6,
		"jobq_job_wait_seconds{queue=q,type=t}":          1,
		"jobq_workers_busy{queue=q}":                     0,
	})
	d, _ := s.find("jobq_job_duration_seconds", map[string]string{"queue": "q", "type": "t"})
	w, _ := s.find("jobq_job_wait_seconds", map[string]string{"queue": "q", "type": "t"})
	if d.Histogram.GetSampleSum() != 12 || w.Histogram.GetSampleSum() != 90 {
		t.Fatalf("duration sum %g, wait sum %g; want 12 and 90 seconds", d.Histogram.GetSampleSum(), w.Histogram.GetSampleSum())
	}
}

// countingBackend counts QueueStats calls, makes each take delay, and
// fails them while down is set.
type countingBackend struct {
	backend.Backend
	calls atomic.Int64
	down  atomic.Bool
	delay time.Duration
}

func (b *countingBackend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	b.calls.Add(1)
	time.Sleep(b.delay)
	if b.down.Load() {
		return nil, errors.New("queue stats: connection refused")
	}
	return b.Backend.QueueStats(ctx)
}

// TestDepthCache: scrapes within StatsCache share one read of the queue
// depths, concurrent ones included; past it the next scrape reads again;
// a failed read shows as jobq_queue_stats_up 0, is logged once, and is
// cached like a successful one.
// An attempt stopped by a cancel counts as cancelled, and so does one
// whose handler returned nil as its cancel was requested (the backend
// ended the job cancelled instead), so every started attempt lands in one
// outcome counter.
func TestCancelledCounted(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	h := m.WorkerHooks()
	job := &jobq.Job{Queue: "q", Type: "t"}
	h.Started(t.Context(), job)
	stopped := jobq.Event{Kind: jobq.EventCancelled, Job: job, Duration: time.Second}
	h.Finished(stopped)
	h.Written(stopped)
	h.Started(t.Context(), job)
	h.Finished(jobq.Event{Kind: jobq.EventDone, Job: job, Duration: time.Second})
	h.Written(jobq.Event{Kind: jobq.EventCancelled, Job: job, Duration: time.Second})
	scrapeOf(t, m).check(t, want{
		"jobq_jobs_started_total{queue=q,type=t}":   2,
		"jobq_jobs_cancelled_total{queue=q,type=t}": 2,
		"jobq_jobs_completed_total{queue=q,type=t}": 0,
		"jobq_jobs_released_total{queue=q,type=t}":  0,
		"jobq_workers_busy{queue=q}":                0,
	})
}

func TestDepthCache(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	b := &countingBackend{Backend: mem}
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(t.Context(), "t", nil, jobq.Queue("q")); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logMu sync.Mutex
	const cache = 200 * time.Millisecond
	m := newMetrics(t, metrics.Options{StatsCache: cache, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))})
	if err := m.ObserveQueues(jobq.NewInspector(b), "empty"); err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveQueues(jobq.NewInspector(b)); err == nil {
		t.Fatal("a second ObserveQueues succeeded")
	}

	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			scrapeOf(t, m).check(t, want{
				"jobq_queue_jobs{queue=q,state=pending}":     1,
				"jobq_queue_jobs{queue=empty,state=pending}": 0,
				"jobq_queue_stats_up":                        1,
			})
		})
	}
	wg.Wait()
	if time.Since(start) < cache { // all eight scrapes fell within one cache period
		if got := b.calls.Load(); got != 1 {
			t.Fatalf("8 concurrent scrapes read the depths %d times, want once", got)
		}
	}
	before := b.calls.Load()
	b.down.Store(true)
	// The cache lasts 200ms or 50 times the last read, whichever is
	// longer, and a read of the memory backend that takes 100ms on a
	// loaded machine (-race, a CPU hog) keeps it 5s: the waits below are
	// failure deadlines, generous so that they do not time the reads.
	eventually(t, time.Minute, "a read after the cache expired", func() bool {
		v, _ := scrapeOf(t, m).value("jobq_queue_stats_up", nil)
		return v == 0
	})
	s := scrapeOf(t, m)
	s.check(t, want{"jobq_queue_jobs{queue=q,state=pending}": absent, "jobq_queue_stats_up": 0})
	if got := b.calls.Load() - before; got > 2 {
		t.Errorf("%d reads for the scrapes of one failure, want them cached", got)
	}
	// A second failed read, once the cache expired, is not logged again.
	failedReads := b.calls.Load()
	eventually(t, time.Minute, "a second failed read", func() bool {
		scrapeOf(t, m)
		return b.calls.Load() > failedReads
	})
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "read queue depths for metrics"); n != 1 {
		t.Fatalf("failure logged %d times, want once:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []metrics.Options{{MaxTypes: -1}, {StatsTimeout: -time.Second}} {
		if _, err := metrics.New(o); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Errorf("New(%+v) = %v, want ErrInvalidInput", o, err)
		}
	}
}

// TestSlowDepthReadCachedLonger: a read that takes longer than a fiftieth
// of StatsCache serves scrapes for 50 times its duration, so a slow
// backend (a huge table) is not kept busy by frequent scrapes.
func TestSlowDepthReadCachedLonger(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	b := &countingBackend{Backend: mem, delay: 20 * time.Millisecond}
	m := newMetrics(t, metrics.Options{StatsCache: time.Millisecond})
	if err := m.ObserveQueues(jobq.NewInspector(b)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	scrapeOf(t, m)
	scrapeOf(t, m)
	if time.Since(start) < time.Second { // within 50 times the first read's 20ms
		if got := b.calls.Load(); got != 1 {
			t.Fatalf("two scrapes within 50× a 20ms read read %d times, want once", got)
		}
	}
	// The lower bound below is the point; this wait is only a failure
	// deadline: the 20ms read takes longer on a loaded machine, and its
	// 50 times with it (a 200ms read is cached 10s).
	eventually(t, time.Minute, "a read once 50× the slow read has passed", func() bool {
		scrapeOf(t, m)
		return b.calls.Load() == 2
	})
	if took := time.Since(start); took < time.Second {
		t.Fatalf("second read after %s, want after 50× the first read's 20ms", took)
	}
}

// TestDeferredCounted: a job given back for want of a handler counts in
// jobs_deferred_total, touches no other counter nor the busy gauge, and
// shows its age (since enqueue) in jobq_unhandled_job_age_seconds, the
// oldest of the window; a queue and type with none given back has no
// such series.
func TestDeferredCounted(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	h := m.WorkerHooks()
	now := time.Now()
	for _, age := range []time.Duration{20 * time.Minute, 5 * time.Second} {
		h.Written(jobq.Event{Kind: jobq.EventDeferred, Job: &jobq.Job{Queue: "q", Type: "new.type", CreatedAt: now.Add(-age)}, RetryDelay: time.Minute})
	}
	job := &jobq.Job{Queue: "q", Type: "known"}
	h.Started(t.Context(), job)
	h.Finished(jobq.Event{Kind: jobq.EventDone, Job: job})
	h.Written(jobq.Event{Kind: jobq.EventDone, Job: job})
	s := scrapeOf(t, m)
	s.check(t, want{
		"jobq_jobs_deferred_total{queue=q,type=new.type}":    2,
		"jobq_jobs_started_total{queue=q,type=new.type}":     0,
		"jobq_jobs_retried_total{queue=q,type=new.type}":     0,
		"jobq_jobs_failed_total{queue=q,type=new.type}":      0,
		"jobq_jobs_deferred_total{queue=q,type=known}":       0,
		"jobq_unhandled_job_age_seconds{queue=q,type=known}": absent,
		"jobq_workers_busy{queue=q}":                         0,
	})
	age, ok := s.value("jobq_unhandled_job_age_seconds", map[string]string{"queue": "q", "type": "new.type"})
	if !ok || age < 1200 || age > 1260 {
		t.Fatalf("jobq_unhandled_job_age_seconds = %v (present %v), want the older job's 1200 s", age, ok)
	}
}
