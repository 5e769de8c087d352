package storetest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// ProgressMessage is a progress message with markup that a page must show
// as text.
const ProgressMessage = `copied 3/5 <img src=x onerror="window.__xss=37">`

// RunningWithProgress inserts a job into queue of b, claims it for an
// hour and reports percent and msg as its holder's progress, for the tests
// of what shows a running job's progress. It returns the job's ID.
func RunningWithProgress(t testing.TB, b backend.Backend, queue string, percent int, msg string) int64 {
	t.Helper()
	pr, ok := backend.As[backend.ProgressReporter](b)
	if !ok {
		t.Fatalf("%T reports no progress", b)
	}
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: queue, Type: "copy", Payload: []byte(`{}`), MaxAttempts: 3}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim the job of queue %s: %d rows, %v", queue, len(rows), err)
	}
	if err := pr.JobProgress(t.Context(), rows[0].Ref(), backend.Progress{Percent: percent, Message: msg}); err != nil {
		t.Fatal(err)
	}
	return rows[0].ID
}
