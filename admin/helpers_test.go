package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/jobq/jobq/internal/proctest"
	"github.com/jobq/jobq/internal/storetest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
	"github.com/jobq/jobq/backend/memory"
)

// stores makes a fresh store of each durable backend. A missing server
// skips the test (fails it under CI=true).
var stores = storetest.Durable

// openStore opens storeURL (from stores) for the test's life.
func openStore(t testing.TB, storeURL string) backend.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := backend.Open(ctx, storeURL)
	if err != nil {
		t.Fatalf("open %s: %v", backend.RedactURL(storeURL), err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// forEachStore runs fn against a fresh store of each durable backend.
func forEachStore(t *testing.T, fn func(t *testing.T, storeURL string)) {
	for _, st := range stores {
		t.Run(st.Name, func(t *testing.T) { fn(t, st.URL(t)) })
	}
}

// The test tokens, one per scope.
const (
	readToken    = "read-0123456789abcdef"
	enqueueToken = "enqueue-0123456789abcdef"
	adminToken   = "admin-0123456789abcdef"
)

var testTokens = []Token{{readToken, ScopeRead}, {enqueueToken, ScopeEnqueue}, {adminToken, ScopeAdmin}}

// with returns a copy of e that reports to t, for subtests.
func (e *env) with(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

// env is the admin handler over a real HTTP server and a real backend.
type env struct {
	t      testing.TB
	b      backend.Backend
	client *jobq.Client
	insp   *jobq.Inspector
	srv    *httptest.Server
	s      *server
	token  string // sent by do unless a request says otherwise
	logs   *proctest.Buffer
}

// newEnv opens storeURL and serves the handler with opts (Client and
// Inspector filled in).
func newEnv(t testing.TB, storeURL string, opts Options) *env {
	t.Helper()
	return newEnvOn(t, openStore(t, storeURL), opts)
}

// newEnvOn serves the handler over b.
func newEnvOn(t testing.TB, b backend.Backend, opts Options) *env {
	t.Helper()
	if opts.Client == nil {
		client, err := jobq.NewClient(b, jobq.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Client = client
	}
	e := &env{t: t, b: b, client: opts.Client, insp: jobq.NewInspector(b), logs: &proctest.Buffer{}}
	opts.Inspector = e.insp
	opts.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	h, err := New(opts)
	if err != nil {
		t.Fatalf("admin.New: %v", err)
	}
	e.s = h.(*server)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	if len(opts.Tokens) > 0 {
		e.token = adminToken
	}
	return e
}

// req is one request; the zero value is a GET with the env's token.
type req struct {
	method  string
	path    string
	body    any // marshalled unless string or []byte
	token   *string
	headers map[string]string
}

// resp is a decoded answer.
type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r resp) errCode() string    { return r.errField("code") }
func (r resp) errorField() string { return r.errField("field") }
func (r resp) errField(k string) string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e[k].(string)
	return s
}

// num reads a number field of the body.
func (r resp) num(k string) int64 { return num(r.body[k]) }

// num reads a decoded JSON number; 0 for anything else.
func num(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}

// tok returns a pointer for req.token.
func tok(s string) *string { return &s }

// do sends q and decodes the answer.
func (e *env) do(q req) resp {
	e.t.Helper()
	if q.method == "" {
		q.method = http.MethodGet
	}
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	r, err := http.NewRequest(q.method, e.srv.URL+q.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	token := e.token
	if q.token != nil {
		token = *q.token
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range q.headers {
		if k == "Host" { // net/http sends r.Host, not a Host header
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	res, err := noRedirect.Do(r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // Redis IDs are beyond a float64's 53 bits
		if err := dec.Decode(&out.body); err != nil {
			e.t.Fatalf("%s %s: answer is not a JSON object: %v: %s", q.method, q.path, err, raw)
		}
	}
	return out
}

// noRedirect shows redirects instead of following them.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       60 * time.Second,
}

// want fails unless r has status (and, for errors, code).
func (e *env) want(r resp, status int, code string) {
	e.t.Helper()
	if r.status != status || (code != "" && r.errCode() != code) {
		e.t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

// counts is every state's count in the backend, summed over queues.
func (e *env) counts() jobq.QueueStats {
	e.t.Helper()
	st, err := e.insp.Stats(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return jobq.Totals(st)
}

// wantCounts fails unless the backend holds exactly these jobs.
func (e *env) wantCounts(pending, scheduled, failed int64) {
	e.t.Helper()
	c := e.counts()
	if c.Pending != pending || c.Scheduled != scheduled || c.Failed != failed {
		e.t.Fatalf("backend holds pending %d scheduled %d failed %d, want %d %d %d", c.Pending, c.Scheduled, c.Failed, pending, scheduled, failed)
	}
}

// failJobs enqueues n jobs on queue and fails each at once (see
// failQueued), returning their job IDs.
func (e *env) failJobs(queue string, n int) []int64 {
	e.t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := e.client.Enqueue(ctx, "mail", map[string]any{"n": i, "password": "hunter2"}, jobq.Queue(queue), jobq.MaxAttempts(1)); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.failQueued(queue, n)
}

// failQueued claims n jobs of queue and fails each, the newest first, so
// that the failed jobs' own IDs are not their jobs' (a route taking one
// for the other fails the tests), and returns the job IDs of the queue's
// failed jobs, which name them, the last to fail first.
func (e *env) failQueued(queue string, n int) []int64 {
	e.t.Helper()
	ctx := context.Background()
	var outcomes []backend.Outcome
	for len(outcomes) < n {
		rows, err := e.b.JobClaim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Minute})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range rows {
			outcomes = append(outcomes, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "boom"})
		}
	}
	slices.Reverse(outcomes)
	if _, err := e.b.JobComplete(ctx, backend.CompleteParams{Outcomes: outcomes}); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.insp.FailedPage(ctx, jobq.FailedFilter{Queue: queue}, 1000, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]int64, len(got))
	for i, f := range got {
		ids[i] = f.JobID
	}
	return ids
}

// memoryBackend is a fresh in-process backend, for tests of what does not
// depend on the store.
func memoryBackend(t testing.TB) backend.Backend {
	t.Helper()
	b := memory.New(memory.Options{})
	t.Cleanup(func() { b.Close() })
	return b
}

// syncBackend is the sync backend, which keeps nothing.
func syncBackend(t testing.TB) backend.Backend {
	t.Helper()
	b, err := backend.Open(context.Background(), "sync:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
