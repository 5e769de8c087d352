package jobview

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/redact"
)

// TestViews: payloads, metadata and errors come out masked; an empty
// payload is null and one that is not JSON a string; a job whose cancel
// was requested shows cancelling whatever state it was listed under; zero
// times are left out.
func TestViews(t *testing.T) {
	m := redact.Default
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	row := &jobq.JobRow{ID: 7, Queue: "q", Type: "mail", Payload: []byte(`{"password":"pw-1","to":"a@b"}`),
		Status: backend.StateCancelling, CreatedAt: now, ReservedAt: now,
		LastError: "dial https://u:pw-2@h.example/x", Metadata: map[string]string{"api_key": "k-3", "traceparent": "tp"}}
	live, err := json.Marshal(Live(m, jobq.StateReserved, row))
	if err != nil {
		t.Fatal(err)
	}
	got := string(live)
	for _, secret := range []string{"pw-1", "pw-2", "k-3"} {
		if strings.Contains(got, secret) {
			t.Errorf("Live shows %s: %s", secret, got)
		}
	}
	for _, want := range []string{`"state":"cancelling"`, `"to":"a@b"`, `"traceparent":"tp"`, `"reserved_at"`} {
		if !strings.Contains(got, want) {
			t.Errorf("Live lacks %s: %s", want, got)
		}
	}
	if strings.Contains(got, "available_at") || strings.Contains(got, "finished_at") {
		t.Errorf("Live shows zero times: %s", got)
	}
	for raw, want := range map[string]string{"": "null", "not json": `"not json"`, `{"a":1}`: `{"a":1}`} {
		if p := string(Payload(m, []byte(raw))); p != want {
			t.Errorf("Payload(%q) = %s, want %s", raw, p, want)
		}
	}
	f, err := json.Marshal(FailedJob(m, &jobq.FailedJob{ID: 1, JobID: 7, Payload: []byte(`{"token":"t-4"}`),
		Error: "https://u:pw-5@h.example", Metadata: map[string]string{"cookie": "c-6"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"t-4", "pw-5", "c-6"} {
		if strings.Contains(string(f), secret) {
			t.Errorf("FailedJob shows %s: %s", secret, f)
		}
	}
}

// TestAttemptErrors: one job's view carries every attempt's error, masked,
// its duration in milliseconds and its worker, oldest first; lists leave
// the history out.
func TestAttemptErrors(t *testing.T) {
	m := redact.Default
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	errs := []backend.AttemptError{
		{Attempt: 1, At: at, Duration: 1500 * time.Microsecond, Worker: "host-a:1", Error: "dial https://u:pw-7@h.example"},
		{Attempt: 2, At: at.Add(time.Minute), Worker: "", Error: backend.LeaseExpiredError},
	}
	f := &jobq.FailedJob{ID: 1, JobID: 7, Payload: []byte(`{}`), Error: backend.LeaseExpiredError, Errors: errs}
	one, err := json.Marshal(FailedJob(m, f))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Errors []map[string]any `json:"errors"`
	}
	if err := json.Unmarshal(one, &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"attempt": 1.0, "at": "2026-11-30T12:00:00Z", "duration_ms": 1.5, "worker": "host-a:1", "error": "dial https://u:***@h.example"},
		{"attempt": 2.0, "at": "2026-11-30T12:01:00Z", "duration_ms": 0.0, "worker": "", "error": "lease expired"},
	}
	if len(got.Errors) != len(want) {
		t.Fatalf("errors %v, want %v", got.Errors, want)
	}
	for i := range want {
		for k, v := range want[i] {
			if got.Errors[i][k] != v {
				t.Errorf("errors[%d].%s = %v, want %v (%s)", i, k, got.Errors[i][k], v, one)
			}
		}
	}
	if strings.Contains(string(one), "pw-7") {
		t.Errorf("an attempt's error shows its secret: %s", one)
	}
	live, _ := json.Marshal(Live(m, jobq.StatePending, &jobq.JobRow{ID: 7, Errors: errs}))
	if !strings.Contains(string(live), `"errors":[{"attempt":1,`) {
		t.Errorf("Live lacks the history: %s", live)
	}
	for _, list := range []any{FailedList(m, []*jobq.FailedJob{f}), LiveList(m, jobq.StatePending, []*jobq.JobRow{{ID: 7, Errors: errs}})} {
		if b, _ := json.Marshal(list); strings.Contains(string(b), `"errors"`) {
			t.Errorf("a list carries the history: %s", b)
		}
	}
}
