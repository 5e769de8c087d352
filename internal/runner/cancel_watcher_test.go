package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// flakyCanceller fails JobCancelling while fail is set, else lists none.
type flakyCanceller struct {
	backend.Canceller
	fail bool
}

func (f *flakyCanceller) JobCancelling(context.Context) ([]backend.JobRef, error) {
	if f.fail {
		return nil, errors.New("connection refused")
	}
	return nil, nil
}

// TestCancelWatcherWarnsOncePerOutage: polls that keep failing (the
// watcher polls every 250ms by default) give one warning, not one per
// poll, and the recovery is said once.
func TestCancelWatcherWarnsOncePerOutage(t *testing.T) {
	b, rows := claimed(t, 1, time.Minute)
	e := NewLeaseExtender(b, time.Minute, time.Second, quiet)
	e.Add(rows[0].Ref(), time.Now().Add(time.Minute), func(error) {})
	var logs logLines
	c := &flakyCanceller{fail: true}
	w := NewCancelWatcher(c, e, 10*time.Millisecond, logs.logger())
	for range 5 {
		w.RunOnce(t.Context())
	}
	c.fail = false
	w.RunOnce(t.Context())
	w.RunOnce(t.Context())
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("%d warnings over 5 failed polls, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "working again"); n != 1 {
		t.Fatalf("recovery logged %d times, want 1:\n%s", n, out)
	}
}
