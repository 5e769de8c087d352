package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

func openSQLite(t testing.TB) backend.Backend {
	b, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// dashServer serves the admin handler over b on a real HTTP server.
func dashServer(t testing.TB, b backend.Backend) (*httptest.Server, *jobq.Inspector) {
	t.Helper()
	insp := jobq.NewInspector(b)
	h, err := New(Options{Inspector: insp})
	if err != nil {
		t.Fatalf("admin.New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, insp
}

// insertJobs inserts n jobs of queue in batches of 1000, with payload and
// delay.
func insertJobs(t testing.TB, b backend.Backend, queue string, n int, payload string, delay time.Duration) []int64 {
	t.Helper()
	var ids []int64
	for n > 0 {
		k := min(n, 1000)
		ps := make([]backend.InsertParams, k)
		for i := range ps {
			ps[i] = backend.InsertParams{Queue: queue, Type: "email.send", Payload: []byte(payload), MaxAttempts: 1, Delay: delay}
		}
		res, err := b.JobInsertMany(t.Context(), ps)
		if err != nil {
			t.Fatalf("insert %d jobs: %v", k, err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
		n -= k
	}
	return ids
}

// failJobs makes n failed jobs in queue (a queue of their own: every due
// job of it is claimed), with payload and error text errText.
func failJobs(t testing.TB, b backend.Backend, queue string, n int, payload, errText string) {
	t.Helper()
	insertJobs(t, b, queue, n, payload, 0)
	failAll(t, b, queue, n, errText)
}

// failAll claims the n due jobs of queue and fails them with errText, the
// newest of each claim first, so that the failed jobs' own IDs are not
// their jobs' (a page or form taking one for the other fails the tests).
func failAll(t testing.TB, b backend.Backend, queue string, n int, errText string) {
	t.Helper()
	for done := 0; done < n; {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(rows) == 0 {
			t.Fatalf("fail jobs: only %d of %d claimable", done, n)
		}
		outs := make([]backend.Outcome, len(rows))
		for i, r := range rows {
			outs[len(rows)-1-i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: errText}
		}
		if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
			t.Fatalf("complete: %v", err)
		}
		done += len(rows)
	}
}

// get fetches path from srv and returns the status and body.
func get(t testing.TB, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// postForm posts form to path as a same-origin browser would, without
// following the redirect; it returns the status and Location.
func postForm(t testing.TB, srv *httptest.Server, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header[k] = v
	}
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

// statsOfQueue reads one queue's counts from the backend.
func statsOfQueue(t testing.TB, insp *jobq.Inspector, queue string) jobq.QueueStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := insp.Stats(ctx)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	for _, s := range all {
		if s.Queue == queue {
			return s
		}
	}
	return jobq.QueueStats{Queue: queue}
}
