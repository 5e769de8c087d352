package jobq

import (
	"context"
	"testing"
)

// TestFireOrderAndCost: fire calls the picked hook of each set, in order,
// skipping unset ones, and allocates nothing, Started's adapter included
// (it is made once, in newHookList, not per attempt).
func TestFireOrderAndCost(t *testing.T) {
	var got []string
	l := newHookList([]WorkerHooks{
		{Started: func(ctx context.Context, j *Job) { got = append(got, "a "+j.Type) }, Claimed: func(e ClaimedEvent) { got = append(got, "a claimed") }},
		{},
		{Started: func(ctx context.Context, j *Job) { got = append(got, "c "+j.Type) }},
	})
	job := &Job{Type: "t"}
	fire(l, claimedHook, ClaimedEvent{Job: job})
	fire(l, startedHook, startedEvent{context.Background(), job})
	fire(l, finishedHook, Event{Job: job}) // none set
	want := []string{"a claimed", "a t", "c t"}
	if len(got) != len(want) {
		t.Fatalf("hooks ran %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hooks ran %q, want %q", got, want)
		}
	}
	quiet := newHookList([]WorkerHooks{{Started: func(context.Context, *Job) {}}, {Started: func(context.Context, *Job) {}}})
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { fire(quiet, startedHook, startedEvent{ctx, job}) }); n != 0 {
		t.Errorf("firing Started allocates %v times per call, want 0", n)
	}
}
