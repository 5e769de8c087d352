package jobq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestUnknownTypeDeferred: a worker without a handler for a job's type
// neither runs nor fails it: it gives the job back untouched (pending,
// no attempt spent, even with MaxAttempts 1), due again after a delay
// that grows with the job's age (a tenth of it, from a second to a
// minute); no Claimed, Started or Finished hook fires, Written reports
// EventDeferred with ErrNoHandler; one paced log line says so, at warn
// level, or at error level once the job is older than
// NoHandlerAlertAfter. A worker with the handler then runs it on its
// first attempt.
func TestUnknownTypeDeferred(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b := newMemory(t, clock)
	c := mustClient(t, b, jobq.ClientConfig{})
	young, err := c.Enqueue(t.Context(), "email.welcome", nil, jobq.MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.Enqueue(t.Context(), "email.welcome", nil, jobq.MaxAttempts(1), jobq.Queue("old"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		hmu     sync.Mutex
		others  int
		written = map[int64]jobq.Event{}
	)
	other := func() { hmu.Lock(); others++; hmu.Unlock() }
	hooks := jobq.WorkerHooks{
		Claimed:  func(jobq.ClaimedEvent) { other() },
		Started:  func(context.Context, *jobq.Job) { other() },
		Finished: func(jobq.Event) { other() },
		Written: func(e jobq.Event) {
			hmu.Lock()
			written[e.Job.ID] = e
			hmu.Unlock()
		},
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("other", func(context.Context, *jobq.Job) error { return nil })
	var logs logBuffer
	cfg := fastConfig()
	cfg.Queues = []string{"default"}
	cfg.Logger, cfg.Hooks = logs.logger(), []jobq.WorkerHooks{hooks}
	seen := func(id int64) bool { hmu.Lock(); defer hmu.Unlock(); _, ok := written[id]; return ok }

	// The young job: given back for a second.
	stop := startWorker(t, b, reg, cfg)
	eventually(t, settle, "the young job to be given back", func() bool { return seen(young) })
	stop()
	// The old one, 20 minutes after its enqueue: a minute, and the alert.
	advance(20 * time.Minute)
	cfg.Queues, cfg.NoHandlerAlertAfter = []string{"old"}, 10*time.Minute
	stop = startWorker(t, b, reg, cfg)
	eventually(t, settle, "the old job to be given back", func() bool { return seen(old) })
	stop()

	hmu.Lock()
	if others != 0 {
		t.Errorf("Claimed, Started and Finished fired %d times, want none: no handler started", others)
	}
	// The delay: a tenth of the age within [1s, 1m], plus up to a fifth.
	base := map[int64]time.Duration{young: time.Second, old: time.Minute}
	givenAt := map[int64]time.Time{young: now.Add(-20 * time.Minute), old: now}
	for id, want := range base {
		e := written[id]
		if e.Kind != jobq.EventDeferred || !errors.Is(e.Err, jobq.ErrNoHandler) || e.RetryDelay < want || e.RetryDelay > want+want/5 {
			t.Errorf("job %d: Written %s, err %v, delay %s; want deferred, ErrNoHandler, %s to %s", id, e.Kind, e.Err, e.RetryDelay, want, want+want/5)
		}
	}
	hmu.Unlock()
	for id, given := range givenAt {
		j, err := b.JobGet(t.Context(), id)
		if err != nil || j.Status != backend.StatePending || j.Attempts != 0 || j.LastError != "" {
			t.Fatalf("job %d after it was given back: %+v, %v; want pending, 0 attempts, no error", id, j, err)
		}
		hmu.Lock()
		wantAt := given.Add(written[id].RetryDelay)
		hmu.Unlock()
		if !j.AvailableAt.Equal(wantAt) {
			t.Errorf("job %d due at %v, want %v: given back at %v, due after the delay Written reported", id, j.AvailableAt, wantAt, given)
		}
	}
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("%d failed jobs, want none", len(f))
	}
	lines := logs.String()
	if n := strings.Count(lines, "level=WARN msg=\"jobs of a type this worker has no handler for"); n != 1 ||
		!strings.Contains(lines, "type=email.welcome") {
		t.Errorf("want 1 warn line naming the type for the young job, got %d:\n%s", n, lines)
	}
	if n := strings.Count(lines, "level=ERROR msg=\"no worker seems able to run this job type"); n != 1 || !strings.Contains(lines, "age=20m0s") {
		t.Errorf("want 1 error line for the job 20m old, got %d:\n%s", n, lines)
	}

	// The upgraded worker takes both once due, each on attempt 1.
	advance(time.Minute + time.Minute/5)
	reg.HandleFunc("email.welcome", func(_ context.Context, j *jobq.Job) error {
		if j.Attempt != 1 {
			return jobq.Permanent(errors.New("an attempt was spent before this one"))
		}
		return nil
	})
	cfg.Queues, cfg.Hooks = []string{"default", "old"}, nil
	stop = startWorker(t, b, reg, cfg)
	eventually(t, settle, "the upgraded worker to run both", func() bool { return jobGone(b, young) && jobGone(b, old) })
	stop()
	if f := failedJobs(t, b); len(f) != 0 {
		t.Fatalf("failed: %s", f[0].Error)
	}
}

// TestUnknownTypePacedLog: many jobs of a type without a handler make one
// line a minute per queue and type, not one per job.
func TestUnknownTypePacedLog(t *testing.T) {
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	specs := make([]jobq.JobSpec, 50)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "report.build"}
	}
	if _, err := c.EnqueueMany(t.Context(), specs); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cfg := fastConfig()
	cfg.Logger = logs.logger()
	stop := startWorker(t, b, jobq.NewRegistry(), cfg)
	eventually(t, settle, "every job given back", func() bool {
		s, err := b.QueueStats(t.Context())
		return err == nil && len(s) == 1 && s[0].Scheduled == 50
	})
	stop()
	if n := strings.Count(logs.String(), "no handler for"); n != 1 {
		t.Fatalf("%d log lines for 50 jobs given back, want 1:\n%s", n, logs.String())
	}
}
