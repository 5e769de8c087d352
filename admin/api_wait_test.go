package admin

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestWaitJob: GET /api/v1/jobs/{id}/wait answers 200 with a finished
// job's final state (a completed one's result, masked; a failed one's
// error), 202 with finished false when its timeout ends first, 404 for a
// job the store has nowhere, 400 for a bad timeout; and a request already
// waiting returns once the job completes.
func TestWaitJob(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	ctx := context.Background()
	enqueue := func(queue string) int64 {
		t.Helper()
		id, err := e.client.Enqueue(ctx, "w", nil, jobq.Queue(queue))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	complete := func(queue string, o backend.Outcome) {
		t.Helper()
		rows, err := e.b.JobClaim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v", err)
		}
		o.Ref = rows[0].Ref()
		if _, err := e.b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{o}}); err != nil {
			t.Fatal(err)
		}
	}

	// Waiting first, completed meanwhile.
	done := enqueue("done")
	got := make(chan resp, 1)
	go func() { got <- e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d/wait?timeout=60s", done)}) }()
	complete("done", backend.Outcome{Kind: backend.OutcomeDone, Keep: true, Result: []byte(`{"password":"hunter2","url":"s3://b/1.png"}`)})
	r := <-got
	e.want(r, http.StatusOK, "")
	res, _ := r.body["result"].(map[string]any)
	if r.body["finished"] != true || r.body["state"] != "completed" || res["url"] != "s3://b/1.png" || res["password"] == "hunter2" || r.num("id") != done {
		t.Fatalf("wait on a completing job: %s", r.raw)
	}

	failed := enqueue("failed")
	complete("failed", backend.Outcome{Kind: backend.OutcomeFail, Error: "no such invoice"})
	r = e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d/wait", failed)})
	e.want(r, http.StatusOK, "")
	if r.body["state"] != "failed" || r.body["error"] != "no such invoice" || r.body["finished_at"] == nil {
		t.Fatalf("wait on a failed job: %s", r.raw)
	}

	pending := enqueue("pending")
	start := time.Now()
	r = e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d/wait?timeout=100ms", pending)})
	e.want(r, http.StatusAccepted, "")
	if r.body["finished"] != false || r.num("id") != pending || r.body["state"] != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("wait past its timeout: %s after %s", r.raw, time.Since(start))
	}

	r = e.do(req{path: "/api/v1/jobs/999999/wait?timeout=1s"})
	e.want(r, http.StatusNotFound, "not_found")

	for _, q := range []string{"0s", "-1s", "61s", "soon"} {
		r = e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d/wait?timeout=%s", pending, q)})
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != "timeout" {
			t.Errorf("timeout=%s: field %q, want timeout", q, r.errorField())
		}
	}
	r = e.do(req{path: "/api/v1/jobs/x/wait"})
	e.want(r, http.StatusBadRequest, "invalid_input")
}
