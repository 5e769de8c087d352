package jobq_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestProcessRollingDeploy: the producer is upgraded before the workers.
// An old worker process, without the handler of the new type, runs alone
// while 300 jobs of that type are enqueued, then beside a new worker
// process that has it. The old one gives every job it claims back
// untouched: each job runs exactly once, on attempt 1, on the new
// process; none fails; and the old one did give jobs back (it spent no
// attempt of theirs doing so).
func TestProcessRollingDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "jobs.db")
	b := openSQLite(t, db)
	old := startChild(t, db, dir, 0, 4, 30*time.Second, childOldEnv+"=1")
	const total = 300
	specs := make([]jobq.JobSpec, total)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "record"}
	}
	client := mustClient(t, b, jobq.ClientConfig{})
	if _, err := client.EnqueueMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	// The old process alone, until it has given back jobs.
	eventually(t, 30*time.Second, "the old worker to give jobs back", func() bool {
		return len(readLedgers(t, old)) >= 20
	})
	deferredAlone := len(readLedgers(t, old))
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("%d jobs failed while only the worker without the handler ran: %s", len(f), f[0].Error)
	}
	// The new one beside it.
	upgraded := startChild(t, db, dir, 1, 4, 30*time.Second)
	drained(t, b, time.Minute, "the new worker to run every job")
	old.stop(t)
	upgraded.stop(t)

	runs := map[int64]int{}
	deferred := 0
	for _, l := range readLedgers(t, old, upgraded) {
		switch {
		case l.event == "deferred":
			deferred++
			if l.pid != old.cmd.Process.Pid {
				t.Errorf("job %d given back by process %d, the one with the handler", l.id, l.pid)
			}
		case l.pid != upgraded.cmd.Process.Pid:
			t.Errorf("job %d %s on process %d, the one without the handler", l.id, l.event, l.pid)
		default:
			runs[l.id]++
			if l.attempt != 1 {
				t.Errorf("job %d ran as attempt %d: an attempt was spent before it", l.id, l.attempt)
			}
		}
	}
	wantEachOnce(t, runs, total)
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("%d jobs failed", len(f))
	}
	t.Logf("given back by the old worker: %d alone, %d in all; run by the new one: %d, all on attempt 1", deferredAlone, deferred, len(runs))
}
