package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres"
	"github.com/jobq/jobq/backend/postgres/pgtest"
	"github.com/jobq/jobq/backend/redis"
	"github.com/jobq/jobq/backend/redis/redistest"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/metrics"
)

// endpointBackends are the stores the endpoint test runs on, each opened
// fresh for one test.
var endpointBackends = []struct {
	name string
	open func(tb testing.TB) backend.Backend
}{
	{"sqlite", func(t testing.TB) backend.Backend {
		b, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
	{"redis", func(t testing.TB) backend.Backend {
		u := redistest.URL(t)
		b, err := redis.Open(t.Context(), u, redis.Options{KeyPrefix: redistest.Prefix(t, u), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
	{"postgres", func(t testing.TB) backend.Backend {
		base := pgtest.URL(t)
		u := base + "?" + url.Values{postgres.SchemaParam: {pgtest.Schema(t, base)}}.Encode()
		b, err := postgres.Open(t.Context(), u, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}

// TestEndpoint runs a worker with its metrics served over HTTP on each
// backend, does known work (n done, m retried once then done, k failed
// permanently, one scheduled for later, jobs on a queue nobody serves, a
// replay of the failed ones), scrapes /metrics and asserts the exact
// counters, histogram counts and depth gauges; 'promtool check metrics'
// passes on the scrape; /healthz and /readyz answer, and /readyz turns 503
// when the backend is closed.
func TestEndpoint(t *testing.T) {
	for _, tb := range endpointBackends {
		t.Run(tb.name, func(t *testing.T) {
			t.Parallel()
			testEndpoint(t, tb.open(t))
		})
	}
}

func testEndpoint(t *testing.T, b backend.Backend) {
	const n, m, k = 5, 3, 2
	ctx := t.Context()
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.Close()
		}
	})
	met, err := metrics.New(metrics.Options{StatsCache: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}

	reg := jobq.NewRegistry()
	reg.HandleFunc("ok", func(context.Context, *jobq.Job) error { return nil })
	reg.HandleFunc("flaky", func(_ context.Context, j *jobq.Job) error {
		if j.Attempt == 1 {
			return errors.New("try again")
		}
		return nil
	})
	reg.HandleFunc("bad", func(context.Context, *jobq.Job) error { return jobq.Permanent(errors.New("no")) })
	reg.HandleFunc("unused", func(context.Context, *jobq.Job) error { return nil })

	client, err := jobq.NewClient(b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{met.ClientHooks()}})
	if err != nil {
		t.Fatal(err)
	}
	var specs []jobq.JobSpec
	add := func(count int, typ string, opts ...jobq.EnqueueOption) {
		for range count {
			specs = append(specs, jobq.JobSpec{Type: typ, Options: opts})
		}
	}
	add(n, "ok", jobq.Queue("work"))
	add(m, "flaky", jobq.Queue("work"))
	add(k, "bad", jobq.Queue("work"))
	add(1, "ok", jobq.Queue("work"), jobq.Delay(time.Hour))
	add(2, "ok", jobq.Queue("idle"))
	before := time.Now()
	if _, err := client.EnqueueMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	// A unique-key duplicate is not counted as enqueued.
	if _, err := client.Enqueue(ctx, "ok", nil, jobq.Queue("idle"), jobq.UniqueKey("u")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, "ok", nil, jobq.Queue("idle"), jobq.UniqueKey("u")); !errors.Is(err, jobq.ErrDuplicate) {
		t.Fatalf("second enqueue with the same key: %v, want ErrDuplicate", err)
	}

	// Written may come before Finished of the same attempt: the test
	// waits for both.
	var finished, written atomic.Int64
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Queues: []string{"work"}, Concurrency: 4, PollInterval: 10 * time.Millisecond,
		Retry:  jobq.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		Logger: slog.New(slog.DiscardHandler),
		Hooks:  []jobq.WorkerHooks{met.WorkerHooks(), {Finished: func(jobq.Event) { finished.Add(1) }, Written: func(jobq.Event) { written.Add(1) }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	met.AddWorker(w, reg)
	in := jobq.NewInspector(b, met.InspectorHooks())
	if err := met.ObserveQueues(in); err != nil {
		t.Fatal(err)
	}
	base := serve(t, metrics.NewServeMux(met, metrics.BackendReady(b)))

	wctx, stopWorker := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	stop := func() {
		stopWorker()
		if err := <-ran; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	defer func() {
		if wctx.Err() == nil {
			stop()
		}
	}()

	// settled waits for attempts finished and their outcomes written: the
	// depth gauges show nothing due or running and failed jobs failed.
	settled := func(attempts int64) scrape {
		t.Helper()
		var s scrape
		eventually(t, 30*time.Second, "the work to be done and written", func() bool {
			if finished.Load() < attempts || written.Load() < attempts {
				return false
			}
			s = scrapeURL(t, base+"/metrics")
			pending, _ := s.value("jobq_queue_jobs", map[string]string{"queue": "work", "state": "pending"})
			reserved, _ := s.value("jobq_queue_jobs", map[string]string{"queue": "work", "state": "reserved"})
			failed, _ := s.value("jobq_queue_jobs", map[string]string{"queue": "work", "state": "failed"})
			return pending == 0 && reserved == 0 && failed == k
		})
		return s
	}
	s := settled(n + 2*m + k)
	if written.Load() != n+2*m+k {
		t.Fatalf("%d attempts written, want %d", written.Load(), n+2*m+k)
	}
	expect := want{
		"jobq_jobs_enqueued_total{queue=work,type=ok}":       n + 1,
		"jobq_jobs_enqueued_total{queue=work,type=flaky}":    m,
		"jobq_jobs_enqueued_total{queue=work,type=bad}":      k,
		"jobq_jobs_enqueued_total{queue=idle,type=ok}":       3,
		"jobq_jobs_started_total{queue=work,type=ok}":        n,
		"jobq_jobs_started_total{queue=work,type=flaky}":     2 * m,
		"jobq_jobs_started_total{queue=work,type=bad}":       k,
		"jobq_jobs_completed_total{queue=work,type=ok}":      n,
		"jobq_jobs_completed_total{queue=work,type=flaky}":   m,
		"jobq_jobs_completed_total{queue=work,type=bad}":     0,
		"jobq_jobs_retried_total{queue=work,type=flaky}":     m,
		"jobq_jobs_retried_total{queue=work,type=ok}":        0,
		"jobq_jobs_failed_total{queue=work,type=bad}":        k,
		"jobq_jobs_failed_total{queue=work,type=flaky}":      0,
		"jobq_jobs_rescued_total{queue=work,type=bad}":       0,
		"jobq_jobs_released_total{queue=work,type=ok}":       0,
		"jobq_jobs_stale_outcomes_total{queue=work,type=ok}": 0,
		"jobq_jobs_replayed_total{queue=work,type=bad}":      0,
		// Made at zero for the worker's queue and every registered type.
		"jobq_jobs_started_total{queue=work,type=unused}":     0,
		"jobq_job_duration_seconds{queue=work,type=unused}":   0,
		"jobq_job_duration_seconds{queue=work,type=ok}":       n,
		"jobq_job_duration_seconds{queue=work,type=flaky}":    2 * m,
		"jobq_job_duration_seconds{queue=work,type=bad}":      k,
		"jobq_job_wait_seconds{queue=work,type=ok}":           n,
		"jobq_job_wait_seconds{queue=work,type=flaky}":        2 * m,
		"jobq_job_wait_seconds{queue=work,type=bad}":          k,
		"jobq_queue_jobs{queue=work,state=pending}":           0,
		"jobq_queue_jobs{queue=work,state=scheduled}":         1,
		"jobq_queue_jobs{queue=work,state=reserved}":          0,
		"jobq_queue_jobs{queue=work,state=failed}":            k,
		"jobq_queue_jobs{queue=idle,state=pending}":           3,
		"jobq_queue_jobs{queue=idle,state=scheduled}":         0,
		"jobq_queue_jobs{queue=idle,state=failed}":            0,
		"jobq_queue_oldest_due_timestamp_seconds{queue=work}": absent,
		"jobq_workers_busy{queue=work}":                       0,
		"jobq_workers_capacity{queue=work}":                   4,
		"jobq_queue_stats_up":                                 1,
		"jobq_build_info":                                     1,
	}
	s.check(t, expect)
	oldest, _ := s.value("jobq_queue_oldest_due_timestamp_seconds", map[string]string{"queue": "idle"})
	if due := time.UnixMicro(int64(oldest * 1e6)); due.Before(before.Add(-time.Minute)) || due.After(time.Now().Add(time.Minute)) {
		t.Errorf("oldest due job of idle due at %s, want about %s (when it was enqueued)", due, before)
	}
	checkMetrics(t, s.text)

	// Replaying the failed jobs through the instrumented inspector counts
	// them; the worker runs them again and they fail again.
	if replayed, _, err := in.ReplayAll(ctx, jobq.FailedFilter{Queue: "work"}); err != nil || replayed != k {
		t.Fatalf("replay: %d, %v; want %d", replayed, err, k)
	}
	s = settled(n + 2*m + 2*k)
	expect["jobq_jobs_replayed_total{queue=work,type=bad}"] = k
	expect["jobq_jobs_started_total{queue=work,type=bad}"] = 2 * k
	expect["jobq_jobs_failed_total{queue=work,type=bad}"] = 2 * k
	expect["jobq_job_duration_seconds{queue=work,type=bad}"] = 2 * k
	expect["jobq_job_wait_seconds{queue=work,type=bad}"] = 2 * k
	s.check(t, expect)

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+path); code != http.StatusOK {
			t.Errorf("GET %s = %d %q, want 200", path, code, body)
		}
	}
	stop()
	closed = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with the backend closed = %d %q, want 503", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz with the backend closed = %d, want 200 (the process is up)", code)
	}
	s = scrapeURL(t, base+"/metrics")
	s.check(t, want{"jobq_queue_stats_up": 0, "jobq_queue_jobs{queue=work,state=pending}": absent})
}

// serve serves h on a free loopback port until the test ends and returns
// its base URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- metrics.Serve(ctx, l, h, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}
