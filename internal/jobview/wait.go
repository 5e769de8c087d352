package jobview

import (
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/redact"
)

// Wait is a job Wait returned, as GET /api/v1/jobs/{id}/wait and 'jobq
// jobs wait --json' show it: Finished false (and only the ID) when the
// wait's timeout ended first.
type Wait struct {
	ID         int64           `json:"id"`
	Finished   bool            `json:"finished"`
	State      jobq.JobState   `json:"state,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// Waited is res, a finished job, with its result and error masked.
func Waited(m *redact.Masker, res jobq.WaitResult) Wait {
	out := Wait{ID: res.ID, Finished: true, State: res.State, Error: m.Text(res.Error), FinishedAt: timePtr(res.FinishedAt)}
	if len(res.Result) > 0 {
		out.Result = Payload(m, res.Result)
	}
	return out
}
