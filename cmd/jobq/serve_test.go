package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/httpserve"
	"github.com/jobq/jobq/internal/proctest"
)

// The test's tokens; their secrets must never reach the output.
const (
	serveAdmin = "admin:adminsecret-0123456789"
	serveRead  = "read:readsecret-0123456789"
)

func TestServeRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(empty, []byte("# nothing yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("# ok\n"+serveAdmin+"\nsuperuser:hidden-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:8080"}, "--addr 0.0.0.0:8080 is not loopback and no token is set: add --token-file"},
		{[]string{"--addr", ":8080"}, "is not loopback and no token is set"},
		{[]string{"--addr", "example.com:8080"}, "is not loopback and no token is set"},
		{[]string{"--addr", "8080"}, `--addr "8080": use host:port`},
		{[]string{"--token", "hidden-secret-0123456789"}, "--token #1: a token is written scope:secret"},
		{[]string{"--token", "admin:hidden"}, "--token #1: the secret of this admin token has 6 characters: use at least 16"},
		{[]string{"--token-file", bad}, "line 3: token: unknown scope \"superuser\""},
		{[]string{"--token-file", empty}, "holds no token"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file: open"},
		{[]string{"--concurrency", "3"}, "--concurrency only applies with --worker (add --worker to run one in this process)"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "--metrics-depth=false"}, "--metrics-depth only applies with --worker"},
		{[]string{"--metrics-cache", "1s"}, "--metrics-cache only applies with --metrics-addr"},
		{[]string{"--metrics-addr", "127.0.0.1:0", "--metrics-cache", "0s"}, "--metrics-cache 0s must be greater than zero"},
		{[]string{"--prefix", "admin/"}, "--prefix \"admin/\": use a path such as /admin"},
		{[]string{"--max-body", "10"}, "--max-body 10"},
		{[]string{"--allowed-hosts", "*"}, "--allowed-hosts '*' without a token"},
		{[]string{"--allowed-hosts", "http://jobq.test"}, `--allowed-hosts "http://jobq.test": give host names`},
		{[]string{"--read-timeout", "10ms"}, "--read-timeout 10ms: use at least 1s"},
	} {
		r := run(t, append([]string{"--db", tempDB(t), "serve"}, c.args...)...)
		if r.err == nil || exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), c.want) || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("serve %v: exit %d, %v; want exit 2 with %q", c.args, exitCode(r.err), r.err, c.want)
		}
		if r.err != nil && strings.Contains(r.err.Error(), "hidden") {
			t.Errorf("serve %v: the error shows a secret: %v", c.args, r.err)
		}
	}
}

// serving is a 'jobq serve' running in process.
type serving struct {
	url    string // with the prefix, no trailing slash
	errOut *proctest.Buffer
	stop   func() error
}

var servedURL = regexp.MustCompile(`url=(http://\S+)/ `)

// startServe runs 'jobq serve' with args until the test ends or stop.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut proctest.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetArgs(append(args, "--addr", "127.0.0.1:0"))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	s := &serving{errOut: &errOut}
	var once bool
	var err error
	s.stop = func() error {
		if !once {
			once = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = s.stop() })
	waitFor(t, "jobq serve to listen", func() bool {
		select {
		case err := <-done:
			done <- err // for stop, which the cleanup calls
			t.Fatalf("jobq serve ended: %v\n%s", err, errOut.String())
		default:
		}
		m := servedURL.FindStringSubmatch(errOut.String())
		if m != nil {
			s.url = m[1]
		}
		return m != nil
	})
	return s
}

// call sends one API request with a bearer token.
func call(t *testing.T, method, url, token, body string, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		_, secret, _ := strings.Cut(token, ":")
		r.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" { // net/http sends r.Host, not a Host header
			r.Host = header[i+1]
			continue
		}
		r.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	dec := json.NewDecoder(res.Body)
	dec.UseNumber()
	_ = dec.Decode(&m)
	return res.StatusCode, m
}

// TestServeWithWorker runs 'jobq serve --worker' under a prefix with a
// token file: a job enqueued over HTTP is run by the worker in the same
// process (it fails: nothing listens on its URL) and shows in the failed
// list; scopes hold; cancelling (SIGTERM) stops both cleanly; no secret
// reaches the log.
func TestServeWithWorker(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# operators\n"+serveAdmin+"\n\n"+serveRead+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--db", db, "serve", "--token-file", file, "--prefix", "/admin", "--worker", "--poll", "20ms", "--concurrency", "2")
	if !strings.HasSuffix(s.url, "/admin") {
		t.Fatalf("served at %s, want the prefix", s.url)
	}
	code, _ := call(t, "POST", s.url+"/api/v1/jobs", "", `{"type":"http"}`)
	if code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	code, _ = call(t, "POST", s.url+"/api/v1/jobs", serveRead, `{"type":"http"}`)
	if code != http.StatusForbidden {
		t.Fatalf("read token enqueued: %d", code)
	}
	code, body := call(t, "POST", s.url+"/api/v1/jobs", serveAdmin, `{"type":"http","payload":{"url":"http://127.0.0.1:1/"},"max_attempts":1}`, "Idempotency-Key", "k1")
	if code != http.StatusCreated {
		t.Fatalf("enqueue: %d %v", code, body)
	}
	b := openDB(t, db)
	waitFor(t, "the worker to run the job", func() bool {
		st, err := b.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return jobq.Totals(st).Failed == 1
	})
	code, body = call(t, "GET", s.url+"/api/v1/failed", serveRead, "")
	if code != http.StatusOK || len(body["failed"].([]any)) != 1 {
		t.Fatalf("failed list: %d %v", code, body)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("serve stopped with %v\n%s", err, s.errOut.String())
	}
	logs := s.errOut.String()
	if !strings.Contains(logs, "worker stopped") {
		t.Errorf("the worker did not stop cleanly:\n%s", logs)
	}
	if strings.Contains(logs, "adminsecret") || strings.Contains(logs, "readsecret") {
		t.Errorf("a token reached the log:\n%s", logs)
	}
}

// TestServeEnvTokens: $JOBQ_ADMIN_TOKENS is read (comma-separated), and a
// public address is then allowed.
func TestServeEnvTokens(t *testing.T) {
	t.Setenv(envAdminTokens, serveRead+", "+serveAdmin)
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatalf("migrate: %v", r.err)
	}
	s := startServe(t, "--db", db, "serve")
	if code, _ := call(t, "GET", s.url+"/api/v1/queues", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := call(t, "GET", s.url+"/api/v1/queues", serveRead, ""); code != http.StatusOK {
		t.Fatalf("read token: %d", code)
	}
	if code, _ := call(t, "POST", s.url+"/api/v1/failed/purge", serveRead, `{"all":true}`); code != http.StatusForbidden {
		t.Fatalf("read token purged: %d", code)
	}
	if err := s.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	f := serveFlags{addr: "0.0.0.0:8080", maxBody: 1 << 20, readLimit: httpserve.DefaultReadTimeout}
	if _, err := f.check(newRootCmd(io.Discard, io.Discard)); err != nil {
		t.Fatalf("with tokens in the environment a public address is refused: %v", err)
	}
}

// TestServeMissingStore: serving alone opens only an existing store: a
// mistyped --db is reported with the command that creates it, and nothing
// is created.
func TestServeMissingStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	r := run(t, "--db", "sqlite:"+path, "serve", "--addr", "127.0.0.1:0")
	if r.err == nil || !strings.Contains(r.err.Error(), "jobq migrate") {
		t.Fatalf("serve on a missing store: %v, want an error naming jobq migrate", r.err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve created %s (stat: %v)", path, err)
	}
}

// TestServeMetricsWithoutWorker: 'jobq serve --metrics-addr' without
// --worker serves the queue depths of --db (and /healthz, /readyz) on an
// address of its own, no worker's counters, and stops with the server.
func TestServeMetricsWithoutWorker(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	jobID(t, run(t, "--db", db, "enqueue", "http", `{"url":"http://127.0.0.1:1/"}`, "--queue", "mail"))
	s := startServe(t, "--db", db, "serve", "--metrics-addr", "127.0.0.1:0", "--metrics-cache", "10ms")
	var base string
	waitFor(t, "the metrics server to listen", func() bool {
		m := regexp.MustCompile(`url=(http://[0-9.:]+)/metrics`).FindStringSubmatch(s.errOut.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	code, page, err := httpGet(t, base+"/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	if want := `jobq_queue_jobs{queue="mail",state="pending"} 1` + "\n"; !strings.Contains(page, want) {
		t.Errorf("/metrics lacks %q:\n%s", want, page)
	}
	if strings.Contains(page, "jobq_jobs_started_total") || strings.Contains(page, "jobq_workers_capacity") {
		t.Errorf("/metrics shows a worker's series, with no worker running:\n%s", page)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := httpGet(t, base+path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s = %d %q %v, want 200", path, code, body, err)
		}
	}
	if code, _ := call(t, "GET", s.url+"/api/v1/queues", "", ""); code != http.StatusOK {
		t.Errorf("the admin API beside the metrics: %d", code)
	}
	if err := s.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve stopped with %v\n%s", err, s.errOut.String())
	}
	if _, _, err := httpGet(t, base+"/metrics"); err == nil {
		t.Errorf("the metrics server still answers after serve returned")
	}
}
