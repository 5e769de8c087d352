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
