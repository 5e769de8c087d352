package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestWorkerBadErrorTextDoesNotStall: a real jobq.Worker on Postgres runs
// 1,000 good jobs beside two whose handlers fail with a text the server
// could not store as is: invalid UTF-8 (a body cut inside a multi-byte
// character, as the http job type's 512-byte cut can do) and a NUL byte.
// Once, such a text made the server refuse the worker's whole outcome
// batch, which the completer retried forever while claiming stopped. Now
// every good job is done (its row gone) within a bound, the bad job with
// one attempt is in failed_jobs and the other is back in pending for its
// retry, each with its text stored as backend.ErrorText normalises it.
func TestWorkerBadErrorTextDoesNotStall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker over 1,002 jobs")
	}
	t.Parallel()
	b := openTest(t, Options{})
	const good = 1000
	invalid := "upstream said: " + strings.Repeat("é", 20) + "\xc3" // cut inside "é"
	nul := "upstream said: \x00 in the body"

	reg := jobq.NewRegistry()
	reg.HandleFunc("good", func(context.Context, *jobq.Job) error { return nil })
	reg.HandleFunc("invalid-utf8", func(context.Context, *jobq.Job) error { return errors.New(invalid) })
	reg.HandleFunc("nul", func(context.Context, *jobq.Job) error { return errors.New(nul) })

	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The bad jobs go first, so they are in the worker's first claims
	// with good jobs beside them.
	failID, err := c.Enqueue(t.Context(), "invalid-utf8", nil, jobq.MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	retryID, err := c.Enqueue(t.Context(), "nul", nil, jobq.MaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]jobq.JobSpec, good)
	for i := range specs {
		specs[i] = jobq.JobSpec{Type: "good"}
	}
	if _, err := c.EnqueueMany(t.Context(), specs); err != nil {
		t.Fatal(err)
	}

	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Concurrency:     10,
		PollInterval:    50 * time.Millisecond,
		Retry:           jobq.RetryPolicy{Base: time.Hour, Max: time.Hour, NoJitter: true},
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)), // the old code logs each retried batch
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	defer func() {
		stop()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Worker.Run still running 30s after its context ended")
		}
	}()

	s := quoteIdent(b.Schema())
	// On this machine the jobs take a few seconds; a stalled worker never
	// gets there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := mustInt(t, b, "SELECT count(*) FROM "+s+".jobs WHERE type = 'good'")
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker stalled: %d of %d good jobs still in the jobs table after 60s", left, good)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".failed_jobs WHERE type = 'good'"); n != 0 {
		t.Errorf("%d good jobs in failed_jobs, want none", n)
	}
	failed, err := b.FailedList(t.Context(), backend.FailedListParams{Filter: backend.FailedFilter{Type: "invalid-utf8"}})
	if err != nil || len(failed) != 1 || failed[0].JobID != failID {
		t.Fatalf("failed jobs of type invalid-utf8 = %+v, %v; want job %d", failed, err, failID)
	}
	if want := backend.ErrorText(invalid); failed[0].Error != want {
		t.Errorf("failed job's error = %q, want %q", failed[0].Error, want)
	}
	// The retry waits an hour; until then the job is pending with the
	// normalised text of its first attempt.
	pollEvery(t, 50*time.Millisecond, time.Minute, "the nul job's retry to be written", func() bool {
		row, err := b.JobGet(t.Context(), retryID)
		return err == nil && row.Status == backend.StatePending && row.Attempts == 1
	})
	row, err := b.JobGet(t.Context(), retryID)
	if err != nil {
		t.Fatal(err)
	}
	if want := backend.ErrorText(nul); row.LastError != want {
		t.Errorf("retried job's last error = %q, want %q", row.LastError, want)
	}
}
