package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// failTwice enqueues a job of 2 attempts on queue and ends both with
// errors (the first carrying a secret), returning its ID: the job's,
// which names it in the failed jobs too.
func (e *env) failTwice(queue string) int64 {
	e.t.Helper()
	ctx := context.Background()
	id, err := e.client.Enqueue(ctx, "mail", map[string]any{"n": 1}, jobq.Queue(queue), jobq.MaxAttempts(2))
	if err != nil {
		e.t.Fatal(err)
	}
	outcomes := []backend.Outcome{
		{Kind: backend.OutcomeRetry, Error: "dial https://bot:pw-4402@h.example/x: refused", Duration: 1500 * time.Millisecond, Worker: "host-a:101"},
		{Kind: backend.OutcomeFail, Error: "http 503", Duration: 250 * time.Microsecond, Worker: "host-b:202"},
	}
	for _, o := range outcomes {
		rows, err := e.b.JobClaim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			e.t.Fatalf("claim: %v, %d rows", err, len(rows))
		}
		o.Ref = rows[0].Ref()
		if _, err := e.b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil {
			e.t.Fatal(err)
		}
	}
	got, err := e.insp.FailedPage(ctx, jobq.FailedFilter{Queue: queue}, 1, 0)
	if err != nil || len(got) != 1 || got[0].JobID != id {
		e.t.Fatalf("failed page: %v, %v; want job %d", got, err, id)
	}
	return id
}

// wantAttempts asserts the body's errors are the two attempts failTwice
// made, masked.
func wantAttempts(t *testing.T, what string, r resp) {
	t.Helper()
	list, _ := r.body["errors"].([]any)
	if len(list) != 2 {
		t.Fatalf("%s: errors %v, want 2 entries (%s)", what, r.body["errors"], r.raw)
	}
	want := []map[string]any{
		{"attempt": "1", "duration_ms": "1500", "worker": "host-a:101", "error": "dial https://bot:***@h.example/x: refused"},
		{"attempt": "2", "duration_ms": "0.25", "worker": "host-b:202", "error": "http 503"},
	}
	for i, w := range want {
		got := list[i].(map[string]any)
		for k, v := range w {
			if fmt.Sprint(got[k]) != v {
				t.Errorf("%s: errors[%d].%s = %v, want %v", what, i, k, got[k], v)
			}
		}
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["at"]))
		if err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
			t.Errorf("%s: errors[%d].at = %v, want about now", what, i, got["at"])
		}
	}
	if strings.Contains(string(r.raw), "pw-4402") {
		t.Errorf("%s shows an attempt's secret: %s", what, r.raw)
	}
}

// TestAPIAttemptErrors: GET /api/v1/failed/{id} and /api/v1/jobs/{id}
// carry every failed attempt (masked, with duration and worker), kept
// across a replay; the lists leave them out.
func TestAPIAttemptErrors(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	jobID := e.failTwice("q")
	g := e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", jobID)})
	e.want(g, http.StatusOK, "")
	wantAttempts(t, "GET failed/{id}", g)
	l := e.do(req{path: "/api/v1/failed?queue=q"})
	e.want(l, http.StatusOK, "")
	if strings.Contains(string(l.raw), `"errors"`) {
		t.Errorf("the failed list carries the history: %s", l.raw)
	}

	// The job's route shows the failed job too, with its history.
	fj := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", jobID)})
	e.want(fj, http.StatusOK, "")
	wantAttempts(t, "GET jobs/{id} of the failed job", fj)

	e.want(e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", jobID)}), http.StatusOK, "")
	j := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", jobID)})
	e.want(j, http.StatusOK, "")
	wantAttempts(t, "GET jobs/{id} after replay", j)
	if n := num(j.body["attempts"]); n != 0 {
		t.Errorf("replayed job attempts %d, want 0", n)
	}
}
