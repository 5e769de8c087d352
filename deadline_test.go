package jobq_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

// TestDeadlineOption: the option reaches the store, which never hands
// out the job once its deadline passed and sweeps it to the failed jobs
// with the reason; a passed deadline, one before the due time and one
// on a workflow task are refused with nothing written.
func TestDeadlineOption(t *testing.T) {
	clock := newFakeClock()
	b := memory.New(memory.Options{Now: clock.Now})
	t.Cleanup(func() { b.Close() })
	c := mustClient(t, b, jobq.ClientConfig{})
	ctx := t.Context()
	d := clock.Now().Add(time.Minute).Truncate(time.Second)
	id, err := c.Enqueue(ctx, "quote", map[string]int{"n": 1}, jobq.Deadline(d))
	if err != nil {
		t.Fatalf("Enqueue with a deadline: %v", err)
	}
	if j, err := b.JobGet(ctx, id); err != nil || !j.Deadline.Equal(d) {
		t.Fatalf("JobGet = %+v, %v; want deadline %v", j, err, d)
	}
	for name, opts := range map[string][]jobq.EnqueueOption{
		"passed":     {jobq.Deadline(clock.Now().Add(-time.Second))},
		"before due": {jobq.Deadline(d), jobq.Delay(time.Hour)},
	} {
		_, err := c.Enqueue(ctx, "quote", map[string]int{"n": 2}, opts...)
		var ie *backend.InputError
		if !errors.As(err, &ie) || ie.Field != "deadline" {
			t.Errorf("%s: Enqueue = %v, want a deadline input error", name, err)
		}
	}
	wf := jobq.NewWorkflow("w").AddJob("a", "quote", map[string]int{}, jobq.Deadline(d))
	if _, err := c.EnqueueWorkflow(ctx, wf); !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("EnqueueWorkflow with a deadline: %v, want it refused", err)
	}

	clock.Advance(2 * time.Minute)
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"default"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 0 {
		t.Fatalf("JobClaim past the deadline = %d jobs, %v; want none (the refused enqueues wrote nothing)", len(rows), err)
	}
	res, err := b.LeaseSweep(ctx, backend.SweepParams{})
	if err != nil || res.Expired != 1 || len(res.Jobs) != 1 || !res.Jobs[0].Expired || res.Jobs[0].Ref.ID != id {
		t.Fatalf("LeaseSweep = %+v, %v; want job %d expired", res, err, id)
	}
	f, err := b.FailedGet(ctx, id)
	if err != nil || f.Error != backend.DeadlineError(d) || f.Attempts != 0 {
		t.Fatalf("FailedGet = %+v, %v; want error %q and no attempt", f, err, backend.DeadlineError(d))
	}
}
