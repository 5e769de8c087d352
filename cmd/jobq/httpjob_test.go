package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/netguard"
)

// workHTTPJob enqueues one http job whose payload is made from the test
// server's URL, runs a memory-backed worker and returns its events up to
// and including the first for which stop is true.
func workHTTPJob(t *testing.T, h http.HandlerFunc, payload func(url string) string, stop func(jobq.Event) bool) (backend.Backend, []jobq.Event) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := openDB(t, "memory:")
	reg := jobq.NewRegistry()
	registerHTTP(reg, guardedClient(t, "127.0.0.1"))

	events := make(chan jobq.Event, 16)
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		PollInterval: 10 * time.Millisecond,
		Retry:        jobq.RetryPolicy{Base: 10 * time.Millisecond, NoJitter: true},
		Logger:       slog.New(slog.DiscardHandler),
		Hooks:        []jobq.WorkerHooks{{Finished: func(e jobq.Event) { events <- e }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(t.Context(), httpJobType, []byte(payload(srv.URL))); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var got []jobq.Event
	deadline := time.After(time.Minute) // a failure deadline; events come in milliseconds when quiet
	for {
		select {
		case e := <-events:
			got = append(got, e)
			if stop(e) {
				return b, got
			}
		case <-deadline:
			t.Fatalf("no final event in a minute; got %+v", got)
		}
	}
}

// guardedClient is the worker's http job client with --http-allow set to
// allow, closed when the test ends.
func guardedClient(t *testing.T, allow ...string) *http.Client {
	t.Helper()
	f := httpFlags{allow: allow}
	policy, err := f.policy()
	if err != nil {
		t.Fatal(err)
	}
	client, closeIdle := newHTTPClient(policy)
	t.Cleanup(closeIdle)
	return client
}

func kinds(events []jobq.Event) string {
	var s []string
	for _, e := range events {
		s = append(s, e.Kind.String())
	}
	return strings.Join(s, ",")
}

func finished(e jobq.Event) bool { return e.Kind == jobq.EventDone || e.Kind == jobq.EventFailed }

func TestHTTPJobSuccess(t *testing.T) {
	t.Parallel()
	var seen atomic.Value
	h := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.Store(r.Method + " " + r.URL.Path + " " + r.Header.Get("X-Key") + " " + r.Header.Get("Content-Type") + " " + string(body))
		w.WriteHeader(http.StatusNoContent)
	}
	payload := func(u string) string {
		// The timeout is not what is tested: a minute, so that a
		// loaded machine's slow answer does not turn done into retry.
		return `{"url":"` + u + `/hook","headers":{"X-Key":"k1"},"body":{"event":"signup"},"timeout":"1m"}`
	}
	_, events := workHTTPJob(t, h, payload, finished)
	if kinds(events) != "done" {
		t.Fatalf("events = %s (%v)", kinds(events), events[0].Err)
	}
	if got, want := seen.Load(), `POST /hook k1 application/json {"event":"signup"}`; got != want {
		t.Fatalf("server saw %q, want %q", got, want)
	}
}

func TestHTTPJobRetriesServerError(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "database down", http.StatusInternalServerError)
		}
	}
	_, events := workHTTPJob(t, h, func(u string) string { return `{"url":"` + u + `"}` }, finished)
	if kinds(events) != "retry,done" {
		t.Fatalf("events = %s", kinds(events))
	}
	if e := events[0]; e.RetryDelay != 10*time.Millisecond || !strings.Contains(e.Err.Error(), "500 Internal Server Error: database down") {
		t.Fatalf("retry after %s with %v, want the policy's 10ms and the status and body", e.RetryDelay, e.Err)
	}
	if calls.Load() != 2 {
		t.Fatalf("server called %d times, want 2", calls.Load())
	}
}

func TestHTTPJobHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	stop := func(e jobq.Event) bool { return true }
	_, events := workHTTPJob(t, h, func(u string) string { return `{"url":"` + u + `"}` }, stop)
	if e := events[0]; e.Kind != jobq.EventRetry || e.RetryDelay != 7*time.Second {
		t.Fatalf("event %s after %s, want retry after 7s", e.Kind, e.RetryDelay)
	}
}

func TestHTTPJobClientErrorIsPermanent(t *testing.T) {
	t.Parallel()
	h := func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }
	b, events := workHTTPJob(t, h, func(u string) string { return `{"url":"` + u + `/gone"}` }, finished)
	if e := events[0]; len(events) != 1 || e.Kind != jobq.EventFailed || !jobq.IsPermanent(e.Err) || e.Job.Attempt != 1 {
		t.Fatalf("events = %s, want one permanent failure on attempt 1", kinds(events))
	}
	failed, err := b.FailedList(t.Context(), backend.FailedListParams{})
	if err != nil || len(failed) != 1 || !strings.Contains(failed[0].Error, "404 Not Found") {
		t.Fatalf("failed_jobs = %v, %v", failed, err)
	}
}

func TestHTTPJobOutcomes(t *testing.T) {
	t.Parallel()
	status := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	client := guardedClient(t, "127.0.0.1")

	cases := []struct {
		name, payload string
		permanent     bool
	}{
		{"408 retries", `{"url":"` + status(408) + `"}`, false},
		{"503 retries", `{"url":"` + status(503) + `"}`, false},
		{"network error retries", `{"url":"` + closed.URL + `"}`, false},
		{"400 is permanent", `{"url":"` + status(400) + `"}`, true},
		{"501 is permanent", `{"url":"` + status(501) + `"}`, true},
		{"502 retries", `{"url":"` + status(502) + `"}`, false},
		{"method typo", `{"url":"http://example.com","method":"POTS"}`, true},
		{"connect", `{"url":"http://example.com","method":"CONNECT"}`, true},
		{"extension method not a token", `{"url":"http://example.com","method":"NO PE","extension_method":true}`, true},
		{"no url", `{"method":"POST"}`, true},
		{"bad scheme", `{"url":"ftp://example.com/x"}`, true},
		{"no host", `{"url":"http:///x"}`, true},
		{"bad timeout", `{"url":"http://example.com","timeout":"soon"}`, true},
		{"misspelt field", `{"url":"http://example.com","heders":{}}`, true},
		{"not an object", `[1,2]`, true},
	}
	for _, c := range cases {
		err := deliver(t.Context(), client, []byte(c.payload))
		if err == nil || jobq.IsPermanent(err) != c.permanent {
			t.Errorf("%s: err %v, want permanent=%v", c.name, err, c.permanent)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{"Wed, 02 Jan 2030 15:05:05 GMT", time.Minute, true},
		{"Wed, 02 Jan 2030 15:00:00 GMT", 0, true}, // in the past: now
		{"", 0, false},
		{"soon", 0, false},
		{"-5", 0, false},
	}
	for _, c := range cases {
		if got, ok := parseRetryAfter(c.in, now); got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestHTTPJobMethods: standard methods in any case; anything else only
// with extension_method, sent as given.
func TestHTTPJobMethods(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Method }))
	t.Cleanup(srv.Close)
	loopback := guardedClient(t, "127.0.0.1")
	cases := []struct{ payload, want string }{
		{`{"url":"` + srv.URL + `"}`, "GET"},
		{`{"url":"` + srv.URL + `","body":"x"}`, "POST"},
		{`{"url":"` + srv.URL + `","method":"put"}`, "PUT"},
		{`{"url":"` + srv.URL + `","method":"Patch"}`, "PATCH"},
		{`{"url":"` + srv.URL + `","method":"PROPFIND","extension_method":true}`, "PROPFIND"},
		{`{"url":"` + srv.URL + `","method":"purge","extension_method":true}`, "purge"},
	}
	for _, c := range cases {
		if err := deliver(t.Context(), loopback, []byte(c.payload)); err != nil {
			t.Errorf("%s: %v", c.payload, err)
			continue
		}
		if m := <-got; m != c.want {
			t.Errorf("%s: server saw %s, want %s", c.payload, m, c.want)
		}
	}
	err := deliver(t.Context(), loopback, []byte(`{"url":"`+srv.URL+`","method":"PROPFIND"}`))
	if !jobq.IsPermanent(err) || !strings.Contains(err.Error(), `"extension_method": true`) {
		t.Errorf("PROPFIND without extension_method: %v, want a permanent error naming extension_method", err)
	}
	select {
	case m := <-got:
		t.Errorf("a refused method reached the server as %s", m)
	default:
	}
}

// TestHTTPJobTimeoutNamesIt: an attempt cut off by the payload's timeout
// says so (and is retried); one cut off by the worker says the worker's
// reason instead.
func TestHTTPJobTimeoutNamesIt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(srv.Close)
	loopback := guardedClient(t, "127.0.0.1")
	payload := []byte(`{"url":"` + srv.URL + `","timeout":"50ms"}`)
	err := deliver(t.Context(), loopback, payload)
	if err == nil || jobq.IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "no response within the job's 50ms timeout") {
		t.Fatalf("timed-out attempt: %v; want a retryable error naming the 50ms timeout", err)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("lease lost"))
	err = deliver(ctx, loopback, []byte(`{"url":"`+srv.URL+`"}`))
	if err == nil || !strings.HasSuffix(err.Error(), "lease lost") || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("attempt cancelled by the worker: %v; want its cause and no mention of the job's timeout", err)
	}
}

// TestHTTPJobErrorBodyCutOnRune: the 512-byte excerpt of a response body
// never ends inside a multi-byte character.
func TestHTTPJobErrorBodyCutOnRune(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("a", httpErrorBody-1) + "é and more"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, body, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	loopback := guardedClient(t, "127.0.0.1")
	err := deliver(t.Context(), loopback, []byte(`{"url":"`+srv.URL+`"}`))
	if err == nil || !utf8.ValidString(err.Error()) || !strings.HasSuffix(err.Error(), ": "+strings.Repeat("a", httpErrorBody-1)) {
		t.Fatalf("error %q: want valid UTF-8 ending with the 511 whole bytes", err)
	}
}

func TestTrimPartialRune(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":              "",
		"abc":           "abc",
		"aé":            "aé",
		"a\xc3":         "a",
		"a€":            "a€",
		"a\xe2\x82":     "a",
		"a\xf0\x9f\x98": "a",
		"a😀":            "a😀",
		"a\x80":         "a\x80", // not a cut character: left to the error-text normaliser
		"\xff":          "\xff",
	} {
		if got := string(trimPartialRune([]byte(in))); got != want {
			t.Errorf("trimPartialRune(%q) = %q, want %q", in, got, want)
		}
	}
}

// countingServer is a test target on 127.0.0.1 that counts its requests.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestHTTPJobRefusesInternalAddresses: with no --http-allow, loopback
// (by address, mapped address and a name that resolves to it), private and
// cloud metadata URLs fail the job for good with the guard's refusal,
// before a request is sent; the error shows no user info, path or query.
func TestHTTPJobRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, nil)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	deny := guardedClient(t)
	for _, c := range []struct{ url, refused string }{
		{srv.URL + "/hook?token=s3cret", "127.0.0.1:" + port},
		{"http://user:s3cret@10.0.0.1/hook", "10.0.0.1:80"},
		{"http://169.254.169.254/latest/meta-data/iam/security-credentials/s3cret", "169.254.169.254:80"},
		{"http://[::1]:" + port + "/?access_token=s3cret", "[::1]:" + port},
		{"http://[::ffff:127.0.0.1]:" + port + "/", "127.0.0.1:" + port},
		{"https://localhost:" + port + "/", ":" + port + " (localhost:" + port + " resolved to it)"},
	} {
		err := deliver(t.Context(), deny, []byte(`{"url":"`+c.url+`","timeout":"5s"}`))
		var refused *netguard.RefusedError
		msg := fmt.Sprint(err)
		switch {
		case !jobq.IsPermanent(err) || !errors.As(err, &refused):
			t.Errorf("%s: %v, want a permanent refusal", c.url, err)
		case !strings.Contains(msg, "refused to connect to ") || !strings.Contains(msg, c.refused) ||
			!strings.Contains(msg, "to --http-allow"):
			t.Errorf("%s: %q, want it to name %s and --http-allow", c.url, msg, c.refused)
		case strings.Contains(msg, "s3cret") || strings.Contains(msg, "/hook") || strings.Contains(msg, "dial tcp"):
			t.Errorf("%s: %q shows more than scheme://host and the refusal", c.url, msg)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the loopback server got %d requests", hits.Load())
	}
}

// TestHTTPJobAllowList: --http-allow host:port lets a job reach that
// server, but not a refused address it redirects to.
func TestHTTPJobAllowList(t *testing.T) {
	t.Parallel()
	inner, innerHits := countingServer(t, nil)
	outer, outerHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, inner.URL+"/internal", http.StatusFound)
		}
	})
	allowed := guardedClient(t, strings.TrimPrefix(outer.URL, "http://"))
	if err := deliver(t.Context(), allowed, []byte(`{"url":"`+outer.URL+`/ok"}`)); err != nil {
		t.Fatalf("allowed server: %v", err)
	}
	err := deliver(t.Context(), allowed, []byte(`{"url":"`+outer.URL+`/redirect"}`))
	var refused *netguard.RefusedError
	if !jobq.IsPermanent(err) || !errors.As(err, &refused) || refused.Host != strings.TrimPrefix(inner.URL, "http://") {
		t.Fatalf("redirect to %s: %v, want a permanent refusal of it", inner.URL, err)
	}
	if outerHits.Load() != 2 || innerHits.Load() != 0 {
		t.Fatalf("allowed server got %d requests (want 2), redirect target %d (want 0)", outerHits.Load(), innerHits.Load())
	}
}

func TestHTTPAllowFlagValues(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "internal.example", ""} {
		f := httpFlags{allow: []string{"10.0.0.0/8", bad}}
		_, err := f.policy()
		var u usageError
		if !errors.As(err, &u) || !strings.HasPrefix(err.Error(), "--http-allow: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want a one-line usage error naming --http-allow", bad, err)
		}
	}
}

// urlSecrets are the parts of the test URLs below an error must never
// show: user info, path and query.
var urlSecrets = []string{"secretpath", "parsesecret", "apikey", "token=", "user", "hunter2", "locsecret", "k3y-value", "s1gnature", "T0K3N"}

// TestHTTPJobPayloadErrorsHideURL: every way a payload's url can be
// refused names at most its scheme and host, and still says what is wrong.
func TestHTTPJobPayloadErrorsHideURL(t *testing.T) {
	t.Parallel()
	client := guardedClient(t)
	cases := []struct {
		url, method string
		want        string
		forbid      []string // besides urlSecrets
	}{
		{url: "gopher://user:hunter2@127.0.0.1:1/_secretpath?apikey=k", want: `url "gopher://127.0.0.1:1": scheme must be http or https`},
		{url: strings.Repeat("x", 100) + "://user:hunter2@h/secretpath", want: `url "xxxxxxxxxxxxxxxx…://h": scheme must be http or https`},
		{url: "secretpath/x?apikey=k", want: "url: must begin with http:// or https://"},
		{url: "user:hunter2@h/secretpath", want: "url: must begin with http:// or https://"},
		{url: "http://user:hunter2@[::1/parsesecret?token=t", want: "url: missing ']' in host"},
		{url: "http://user:hunter2@h:12ab/secretpath?token=t", want: `url: invalid port ":12ab" after host`},
		{url: "http://user:hunter2@h/secretpath%zz?token=t", want: "url: invalid URL escape", forbid: []string{"%zz"}},
		{url: "http://user:hu%zznter2@h/secretpath", want: "url: invalid URL escape", forbid: []string{"%zz"}},
		{url: "http:///secretpath?apikey=k", want: "url: no host after http://"},
		{url: "https:user:hunter2@secretpath?token=t", want: "url: no host after https://"},
		{url: "http://user:hunter2@h/secretpath?token=t", method: "NO PE", want: `invalid method "NO PE"`},
	}
	for _, c := range cases {
		payload, err := json.Marshal(map[string]any{"url": c.url, "method": c.method, "extension_method": c.method != ""})
		if err != nil {
			t.Fatal(err)
		}
		err = deliver(t.Context(), client, payload)
		msg := fmt.Sprint(err)
		if !jobq.IsPermanent(err) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want a permanent error saying %q", c.url, msg, c.want)
		}
		for _, s := range append(c.forbid, urlSecrets...) {
			if strings.Contains(msg, s) {
				t.Errorf("%s: %q shows %q", c.url, msg, s)
			}
		}
	}
}

// TestHTTPJobResponseErrorsHideURL: a server that echoes the request's
// path, query or credentials in its answer (as many 404 pages do), its
// status line or a redirect's Location does not get them into the error,
// nor does the answer at the end of a redirect echo the URL it went to.
func TestHTTPJobResponseErrorsHideURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/start"):
			http.Redirect(w, r, "/signed/secretpath-2?sig=s1gnature-value", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/badlocation"):
			w.Header().Set("Location", "http://[::1/locsecret?token=t")
			w.WriteHeader(http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/status"):
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			fmt.Fprintf(buf, "HTTP/1.1 400 No such page %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", r.URL.RequestURI())
			buf.Flush()
		default:
			user, pass, _ := r.BasicAuth()
			http.Error(w, fmt.Sprintf("Cannot %s %s (path %s, key %s, page %s, login %s:%s)", r.Method, r.URL.RequestURI(),
				r.URL.Path, r.URL.Query().Get("apikey"), r.URL.Query().Get("page"), user, pass), http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1)
	client := guardedClient(t, "127.0.0.1")
	for _, c := range []struct{ path, want string }{
		{"/hooks/secretpath-T0K3N%2Fx?apikey=k3y-value-123&page=2", "404 Not Found: Cannot GET "},
		{"/start/secretpath-1?apikey=k3y-value-456", "404 Not Found: Cannot GET "},
		{"/badlocation/secretpath?apikey=k3y-value-789", "redirect"},
		{"/status/secretpath-T0K3N?apikey=k3y-value-000", "400 No such page"},
	} {
		err := deliver(t.Context(), client, []byte(`{"url":"`+base+c.path+`"}`))
		msg := fmt.Sprint(err)
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, srv.URL) {
			t.Errorf("%s: %q, want it to name %s and say %q", c.path, msg, srv.URL, c.want)
		}
		for _, s := range urlSecrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s: %q shows %q", c.path, msg, s)
			}
		}
	}
}
