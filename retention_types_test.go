package jobq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestRetentionDeleteAtOnceByType: with Completed keeping completed jobs,
// a type marked DeleteAtOnce is deleted at its completion (Wait answers
// ErrJobGone) while the other types are kept with their results.
func TestRetentionDeleteAtOnceByType(t *testing.T) {
	b := newMemory(t, nil)
	ctx := context.Background()
	reg := jobq.NewRegistry()
	for _, typ := range []string{"chatty", "report"} {
		reg.HandleFunc(typ, func(ctx context.Context, j *jobq.Job) error { return jobq.SetResult(ctx, j.Type) })
	}
	c := mustClient(t, b, jobq.ClientConfig{})
	chatty, err := c.Enqueue(ctx, "chatty", nil)
	if err != nil {
		t.Fatal(err)
	}
	report, err := c.Enqueue(ctx, "report", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Retention = jobq.Retention{Completed: time.Hour, Types: map[string]jobq.TypeRetention{"chatty": {DeleteAtOnce: true}}}
	startWorker(t, b, reg, cfg)
	wctx, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	res, err := c.Wait(wctx, report)
	if err != nil || string(res.Result) != `"report"` {
		t.Fatalf("Wait(report) = %+v, %v; want it kept with its result", res, err)
	}
	eventually(t, settle, "the chatty job to complete", func() bool { return jobGone(b, chatty) })
	if _, err := c.Wait(wctx, chatty); !errors.Is(err, jobq.ErrJobGone) {
		t.Fatalf("Wait(chatty): %v, want ErrJobGone: its type is deleted at once", err)
	}
	kept, err := jobq.NewInspector(b).FinishedPage(ctx, jobq.StateCompleted, jobq.JobFilter{}, 100, 0)
	if err != nil || len(kept) != 1 || kept[0].ID != report {
		t.Fatalf("kept completed jobs: %d (%v), want only the report", len(kept), err)
	}
}

// TestRetentionCompletedByType: with Completed 0, a type given its own
// Completed is kept, with its result, while the other types are deleted
// at their completion.
func TestRetentionCompletedByType(t *testing.T) {
	b := newMemory(t, nil)
	ctx := context.Background()
	reg := jobq.NewRegistry()
	for _, typ := range []string{"a", "b"} {
		reg.HandleFunc(typ, func(ctx context.Context, j *jobq.Job) error { return jobq.SetResult(ctx, j.Type) })
	}
	c := mustClient(t, b, jobq.ClientConfig{})
	a, err := c.Enqueue(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Enqueue(ctx, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Retention = jobq.Retention{Types: map[string]jobq.TypeRetention{"a": {Completed: time.Hour}}}
	startWorker(t, b, reg, cfg)
	wctx, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	res, err := c.Wait(wctx, a)
	if err != nil || string(res.Result) != `"a"` {
		t.Fatalf("Wait(a) = %+v, %v; want it kept with its result", res, err)
	}
	eventually(t, settle, "the b job to complete", func() bool { return jobGone(b, other) })
	if _, err := c.Wait(wctx, other); !errors.Is(err, jobq.ErrJobGone) {
		t.Fatalf("Wait(b): %v, want ErrJobGone: only a is kept", err)
	}
	kept, err := jobq.NewInspector(b).FinishedPage(ctx, jobq.StateCompleted, jobq.JobFilter{}, 100, 0)
	if err != nil || len(kept) != 1 || kept[0].ID != a {
		t.Fatalf("kept completed jobs: %d (%v), want only the a job", len(kept), err)
	}
}

// TestRetentionTypesRefused: a type entry without a name, that says
// nothing, says two things or keeps for a negative time is refused by
// NewWorker.
func TestRetentionTypesRefused(t *testing.T) {
	b := newMemory(t, nil)
	for _, types := range []map[string]jobq.TypeRetention{
		{"": {DeleteAtOnce: true}},
		{"chatty": {}},
		{"chatty": {Completed: -time.Hour}},
		{"chatty": {DeleteAtOnce: true, Completed: time.Hour}},
	} {
		cfg := fastConfig()
		cfg.Retention = jobq.Retention{Completed: time.Hour, Types: types}
		if _, err := jobq.NewWorker(b, jobq.NewRegistry(), cfg); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "Retention.Types") {
			t.Errorf("Types %v: %v, want ErrInvalidInput", types, err)
		}
	}
}
