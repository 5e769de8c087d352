package admin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// fuzzHandler is the handler over a memory backend, without a network:
// a fuzz run sends many thousands of requests.
func fuzzHandler(f *testing.F) http.Handler {
	b := memoryBackend(f)
	client, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := New(Options{Client: client, Inspector: jobq.NewInspector(b), MaxBody: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	return h
}

// FuzzEnqueue: whatever the body and Idempotency-Key, the enqueue
// endpoints answer 2xx, 400 or 413, never panic nor 5xx.
//
//	go test -run '^$' -fuzz FuzzEnqueue -fuzztime 30s ./admin
func FuzzEnqueue(f *testing.F) {
	for _, s := range []string{
		`{"type":"a"}`, `{"type":"a","payload":{"x":[1,2]},"queue":"q","priority":5,"max_attempts":3,"unique_key":"k","metadata":{"a":"b"}}`,
		`{"type":"a","delay":"1h"}`, `{"type":"a","run_at":"2030-01-01T00:00:00Z"}`, `{"type":"a","delay":"-5s"}`,
		`{"type":"a","priority":1e99}`, `{"type":"","queue":""}`, `{"type":"a","metadata":{"":"x"}}`,
		`{"jobs":[{"type":"a"},{"type":"b"}]}`, `{"jobs":null}`, `[]`, `null`, `{`, `{"type":"\u0000"}`,
		`{"type":"a","payload":` + "\"\xff\"" + `}`, `{"type":"a","max_attempts":-9223372036854775808}`,
		`{"type":"a","key":"acct:1"}`, `{"type":"a","key":"\u0001"}`, `{"jobs":[{"type":"a","key":"k"},{"type":"b","key":""}]}`,
	} {
		f.Add([]byte(s), "", false)
		f.Add([]byte(s), "key-1", true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte, idem string, batch bool) {
		path := "/api/v1/jobs"
		if batch {
			path += "/batch"
		}
		r := httptest.NewRequest("POST", path, bytes.NewReader(body))
		r.Host = "localhost" // the handler answers only loopback names without tokens
		if idem != "" {
			r.Header["Idempotency-Key"] = []string{idem}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK, http.StatusCreated, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("POST %s %q (key %q): %d %s", path, body, idem, w.Code, w.Body)
		}
	})
}

// FuzzListFilters: whatever the query, the list endpoints answer 200 or
// 400, never panic nor 5xx.
//
//	go test -run '^$' -fuzz FuzzListFilters -fuzztime 30s ./admin
func FuzzListFilters(f *testing.F) {
	for _, s := range []string{
		"state=pending", "state=completed&queue=q&type=t&limit=5&cursor=9", "since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z",
		"limit=-1", "cursor=99999999999999999999", "queue=%00", "state=failed", "older_than=1h&failed_before=2026-01-01T00:00:00Z",
		"a=b", "%zz", "limit=1&limit=2", "since=0000-01-01T00:00:00Z", "key=acct:1", "key=%00", "queue=q&key=a%2Fb&state=reserved",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, query string, failed bool) {
		path := "/api/v1/jobs"
		if failed {
			path = "/api/v1/failed"
		}
		r, err := http.NewRequest("GET", path, nil)
		if err != nil {
			t.Skip()
		}
		r.Host = "localhost" // the handler answers only loopback names without tokens
		r.URL.RawQuery = query
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("GET %s?%s: %d %s", path, query, w.Code, w.Body)
		}
	})
}

// FuzzKeys: whatever the query of the key list or the body of a key
// rules PUT, the answer is 200 or 400 (413 for a body over the limit),
// never a panic nor a 5xx.
//
//	go test -run '^$' -fuzz FuzzKeys -fuzztime 30s ./admin
func FuzzKeys(f *testing.F) {
	for _, s := range []string{
		"", "held=true", "held=maybe&limit=0", "queue=q&limit=1000", "limit=99999999999999999999", "queue=%00",
		`{}`, `{"limit":2}`, `{"ordered":true,"on_failure":"halt"}`, `{"ordered":true,"limit":2}`, `{"on_failure":"hold"}`,
		`{"limit":-1}`, `{"limit":1e99}`, `{"on_failure":null}`, `[]`, `{`, `null`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, in string, put bool) {
		r, err := http.NewRequest("GET", "/api/v1/keys", nil)
		if err != nil {
			t.Skip()
		}
		r.URL.RawQuery = in
		if put {
			r = httptest.NewRequest("PUT", "/api/v1/queues/q/keys", strings.NewReader(in))
		}
		r.Host = "localhost" // the handler answers only loopback names without tokens
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s %s %q: %d %s", r.Method, r.URL.Path, in, w.Code, w.Body)
		}
	})
}
