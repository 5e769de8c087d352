package jobq_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	syncb "github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/memory"
)

func TestInspectorQueues(t *testing.T) {
	b := memory.New(memory.Options{})
	defer b.Close()
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{
		{Queue: "busy", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1},
		{Queue: "mail", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1},
	}); err != nil {
		t.Fatal(err)
	}
	in := jobq.NewInspector(b)
	ctx := t.Context()
	if err := in.PauseQueue(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	lim := jobq.QueueLimits{Concurrency: 2, Rate: 5, RatePeriod: time.Second}
	if err := in.SetQueueLimits(ctx, "quiet", lim); err != nil {
		t.Fatal(err)
	}
	got, err := in.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobq.QueueInfo{
		{QueueStats: jobq.QueueStats{Queue: "busy", Pending: 1}},
		{QueueStats: jobq.QueueStats{Queue: "mail", Pending: 1}, Paused: true},
		{QueueStats: jobq.QueueStats{Queue: "quiet"}, Limits: lim},
	}
	for i := range got {
		got[i].OldestDue = time.Time{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Queues =\n%+v\nwant\n%+v", got, want)
	}
	if err := in.ResumeQueue(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	if err := in.SetQueueLimits(ctx, "quiet", jobq.QueueLimits{Concurrency: -1}); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("negative concurrency: %v, want ErrInvalidInput", err)
	}
	if s, err := in.QueueSettings(ctx); err != nil || len(s) != 1 || s[0].Queue != "quiet" {
		t.Fatalf("QueueSettings = %+v, %v; want quiet only", s, err)
	}
	// Pausing and limiting inserted nothing: the two jobs are the count.
	if n, err := in.JobsInserted(ctx); err != nil || n != 2 {
		t.Fatalf("JobsInserted = %d, %v; want 2", n, err)
	}
}

func TestInspectorQueuesSyncUnsupported(t *testing.T) {
	in := jobq.NewInspector(syncb.New())
	for name, err := range map[string]error{
		"pause":  in.PauseQueue(t.Context(), "q"),
		"resume": in.ResumeQueue(t.Context(), "q"),
		"limit":  in.SetQueueLimits(t.Context(), "q", jobq.QueueLimits{Concurrency: 1}),
	} {
		if !errors.Is(err, jobq.ErrNotSupported) {
			t.Errorf("%s on sync: %v, want ErrNotSupported", name, err)
		}
	}
	if q, err := in.Queues(t.Context()); err != nil || len(q) != 0 {
		t.Fatalf("Queues on sync = %+v, %v; want none", q, err)
	}
	if n, err := in.JobsInserted(t.Context()); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("JobsInserted on sync = %d, %v; want ErrNotSupported", n, err)
	}
}
