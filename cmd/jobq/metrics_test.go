package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// metricsURL waits for the "serving metrics" log line and returns the
// base URL it names.
func metricsURL(t *testing.T, log *lineWatch) string {
	t.Helper()
	await(t, log.seen, "the metrics server to listen", log)
	m := regexp.MustCompile(`url"?[=:]"?(http://[0-9.:]+)/metrics`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no metrics URL in the log:\n%s", log)
	}
	return m[1]
}

// httpGet returns the status and body of GET url, or the error.
func httpGet(t *testing.T, url string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestWorkerMetricsProcess runs 'jobq worker --metrics-addr' as a process:
// /metrics counts its jobs and shows the queue depths, /healthz and
// /readyz answer, each outcome is logged at its level with the job's id
// and no payload, and SIGTERM stops the worker and then the server.
func TestWorkerMetricsProcess(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	db := tempDB(t)
	for _, p := range []string{"/ok", "/ok", "/gone"} {
		jobID(t, run(t, "--db", db, "enqueue", "http", `{"url":"`+srv.URL+p+`","headers":{"Authorization":"Bearer s3cret-token"}}`))
	}
	jobID(t, run(t, "--db", db, "enqueue", "http", `{"url":"`+srv.URL+`"}`, "--queue", "elsewhere"))

	log := &lineWatch{want: "serving metrics", seen: make(chan struct{})}
	worker := startProcess(t, bin, log, "--db", db, "worker", "--poll", "20ms", "--http-allow", "127.0.0.1",
		"--metrics-addr", "127.0.0.1:0", "--metrics-cache", "10ms", "--log-format", "json", "--log-level", "debug")
	base := metricsURL(t, log)
	want := []string{
		`jobq_jobs_completed_total{queue="default",type="http"} 2`,
		`jobq_jobs_failed_total{queue="default",type="http"} 1`,
		`jobq_jobs_started_total{queue="default",type="http"} 3`,
		`jobq_jobs_retried_total{queue="default",type="http"} 0`,
		`jobq_job_duration_seconds_count{queue="default",type="http"} 3`,
		`jobq_queue_jobs{queue="default",state="failed"} 1`,
		`jobq_queue_jobs{queue="default",state="pending"} 0`,
		`jobq_queue_jobs{queue="elsewhere",state="pending"} 1`,
		`jobq_workers_capacity{queue="default"} 10`,
		`jobq_workers_busy{queue="default"} 0`,
	}
	var page string
	waitFor(t, "the jobs to show in /metrics", func() bool {
		code, body, err := httpGet(t, base+"/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", code, err)
		}
		page = body
		for _, w := range want {
			if !strings.Contains(page, w+"\n") {
				return false
			}
		}
		return true
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := httpGet(t, base+path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s = %d %q %v, want 200", path, code, body, err)
		}
	}

	if err := worker.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := worker.wait(t, log); code != 0 {
		t.Fatalf("worker exited %d; log:\n%s", code, log)
	}
	if _, _, err := httpGet(t, base+"/metrics"); err == nil {
		t.Errorf("the metrics server still answers after the worker exited")
	}
	out := log.String()
	for _, w := range []string{`"level":"DEBUG","msg":"job done"`, `"level":"ERROR","msg":"job failed; moved to failed jobs"`, `"job_id":3`, `"error":"permanent: GET http://`} {
		if !strings.Contains(out, w) {
			t.Errorf("worker log lacks %s:\n%s", w, out)
		}
	}
	if strings.Contains(out, "s3cret-token") {
		t.Errorf("a payload reached the log:\n%s", out)
	}
}

// TestMetricsSidecar runs 'jobq metrics' as a process: it exports the
// depths of every queue (and of --queues at zero) and none of a worker's
// counters, and stops on SIGTERM; on a store without a jobq schema it
// creates nothing and names the migrate command.
func TestMetricsSidecar(t *testing.T) {
	bin := jobqBinary(t)
	t.Parallel()
	db := tempDB(t)
	for range 2 {
		jobID(t, run(t, "--db", db, "enqueue", "http", `{"url":"http://127.0.0.1:1/"}`, "--queue", "mail"))
	}
	log := &lineWatch{want: "serving metrics", seen: make(chan struct{})}
	p := startProcess(t, bin, log, "--db", db, "metrics", "--addr", "127.0.0.1:0", "--queues", "quiet")
	base := metricsURL(t, log)
	code, page, err := httpGet(t, base+"/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, w := range []string{
		`jobq_queue_jobs{queue="mail",state="pending"} 2`,
		`jobq_queue_jobs{queue="quiet",state="pending"} 0`,
		`jobq_queue_stats_up 1`,
		`jobq_queue_oldest_due_timestamp_seconds{queue="mail"} `,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("/metrics lacks %s:\n%s", w, page)
		}
	}
	if strings.Contains(page, "jobq_jobs_") || strings.Contains(page, "jobq_workers_") {
		t.Errorf("the sidecar exports a worker's series:\n%s", page)
	}
	if code, _, err := httpGet(t, base+"/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /readyz = %d %v", code, err)
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, log); code != 0 {
		t.Fatalf("jobq metrics exited %d; log:\n%s", code, log)
	}

	typo := t.TempDir() + "/typo.db"
	r := runBinary(t, "", nil, "--db", "sqlite:"+typo, "metrics", "--addr", "127.0.0.1:0")
	if r.code != exitError || !strings.Contains(r.stderr, "jobq migrate --db sqlite:"+typo) {
		t.Fatalf("jobq metrics on a missing store: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("jobq metrics created %s: %v", typo, err)
	}
}

// TestLogFlags: --log-format and --log-level are checked before anything
// runs; --json-logs still works, and contradicting --log-format is refused.
func TestLogFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format", "yaml"}, `--log-format "yaml": use text or json`},
		{[]string{"--log-level", "loud"}, `--log-level "loud": use debug, info, warn or error`},
		{[]string{"--log-level", "info+2"}, `--log-level "info+2"`},
		{[]string{"--json-logs", "--log-format", "text"}, "--json-logs contradicts --log-format text"},
		{[]string{"--metrics-depth=false"}, "--metrics-depth only applies with --metrics-addr"},
	} {
		r := run(t, append([]string{"--db", tempDB(t), "worker"}, c.args...)...)
		if r.code() != exitUsage || r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("worker %v: exit %d, %v; want usage error %q", c.args, r.code(), r.err, c.want)
		}
	}
	r := run(t, "--db", tempDB(t), "metrics", "--log-format", "xml")
	if r.code() != exitUsage {
		t.Errorf("metrics --log-format xml: exit %d, %v", r.code(), r.err)
	}
}
