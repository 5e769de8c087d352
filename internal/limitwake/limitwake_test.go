package limitwake

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type woken struct {
	mu sync.Mutex
	qs []string
}

func (w *woken) wake(q string) { w.mu.Lock(); w.qs = append(w.qs, q); w.mu.Unlock() }
func (w *woken) get() []string { w.mu.Lock(); defer w.mu.Unlock(); return slices.Clone(w.qs) }

func TestEndedWakesOnlyTrackedQueues(t *testing.T) {
	var w woken
	tr := New(w.wake)
	defer tr.Close()
	tr.Ended([]backend.JobRef{{ID: 1, Attempt: 1}}) // nothing tracked: no wake
	tr.Claimed("lim", []*backend.JobRow{{ID: 1, Attempts: 1}, {ID: 2, Attempts: 1}})
	tr.Ended([]backend.JobRef{{ID: 1, Attempt: 2}}) // another attempt: not this one
	if got := w.get(); len(got) != 0 {
		t.Fatalf("woke %v before a tracked attempt ended", got)
	}
	tr.EndedOutcomes([]backend.Outcome{{Ref: backend.JobRef{ID: 1, Attempt: 1}}, {Ref: backend.JobRef{ID: 2, Attempt: 1}}})
	if got := w.get(); !slices.Equal(got, []string{"lim"}) {
		t.Fatalf("woke %v, want lim once", got)
	}
	tr.Ended([]backend.JobRef{{ID: 1, Attempt: 1}}) // already ended
	if got := w.get(); len(got) != 1 {
		t.Fatalf("woke %v, want no second wake", got)
	}
}

func TestWakeAtAndClose(t *testing.T) {
	var w woken
	tr := New(w.wake)
	tr.WakeAt("r", time.Now().Add(20*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for len(w.get()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := w.get(); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("woke %v, want r", got)
	}
	tr.WakeAt("r", time.Now().Add(50*time.Millisecond))
	tr.Close()
	tr.WakeAt("r", time.Now())
	time.Sleep(100 * time.Millisecond)
	if got := w.get(); len(got) != 1 {
		t.Fatalf("woke %v after Close, want nothing more", got)
	}
}
