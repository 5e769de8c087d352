package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestWorkerRecordsAttempts: the worker tells the backend how long each
// failed attempt ran and which worker ran it (WorkerConfig.Name, by
// default "<hostname>:<pid>"), so the job's history shows both.
func TestWorkerRecordsAttempts(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := newMemory(t, clock.Now)
	reg := jobq.NewRegistry()
	reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // the handler must take measurable time: the duration recorded is the subject
		return fmt.Errorf("attempt %d failed", j.Attempt)
	})
	ctx := context.Background()
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(ctx, "slow", nil, jobq.MaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Retry = jobq.RetryPolicy{Base: time.Minute, Max: time.Hour, NoJitter: true}
	named := cfg
	named.Name = "mailer-7"
	workers := []jobq.WorkerConfig{cfg, named}
	host, _ := os.Hostname()
	wantNames := []string{fmt.Sprintf("%s:%d", host, os.Getpid()), "mailer-7"}
	for i, c := range workers {
		w, err := jobq.NewWorker(b, reg, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := w.RunOne(ctx); !ok || err != nil {
			t.Fatalf("attempt %d: ran %v, %v", i+1, ok, err)
		}
		clock.Advance(time.Hour)
	}
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(failed) != 1 || failed[0].JobID != id {
		t.Fatalf("failed jobs %+v, %v; want job %d", failed, err, id)
	}
	errs := failed[0].Errors
	if len(errs) != 2 {
		t.Fatalf("Errors %+v, want 2", errs)
	}
	for i, e := range errs {
		if e.Attempt != i+1 || e.Worker != wantNames[i] || e.Error != fmt.Sprintf("attempt %d failed", i+1) {
			t.Errorf("entry %d = %+v, want attempt %d by %q", i, e, i+1, wantNames[i])
		}
		if e.Duration < 20*time.Millisecond || e.Duration > time.Minute {
			t.Errorf("entry %d Duration %s, want the handler's ~20ms", i, e.Duration)
		}
	}
}

// TestWorkerNameInvalid: a name the backend would have to change is
// refused when the worker is made, naming the field.
func TestWorkerNameInvalid(t *testing.T) {
	t.Parallel()
	b := newMemory(t, time.Now)
	for _, name := range []string{strings.Repeat("x", 201), "bad\x00name", "bad\xffname"} {
		cfg := fastConfig()
		cfg.Name = name
		_, err := jobq.NewWorker(b, jobq.NewRegistry(), cfg)
		if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "WorkerConfig.Name") {
			t.Errorf("Name %.20q: error %v, want ErrInvalidInput naming WorkerConfig.Name", name, err)
		}
	}
}
