package wakeup

import (
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// woken reports whether ch holds a wake-up, taking it.
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWakeFiltersByQueue(t *testing.T) {
	var s Set
	a, cancelA := s.Subscribe([]string{"a", "b"})
	defer cancelA()
	c, cancelC := s.Subscribe([]string{"c"})
	defer cancelC()
	none, cancelNone := s.Subscribe(nil)
	defer cancelNone()

	s.Wake("b")
	if !woken(a) || woken(c) || woken(none) {
		t.Fatal("Wake(b) should wake the subscription of a and b only")
	}
	s.Wake("x", "c")
	if woken(a) || !woken(c) {
		t.Fatal("Wake(x, c) should wake the subscription of c only")
	}
	s.WakeAll()
	if !woken(a) || !woken(c) || woken(none) {
		t.Fatal("WakeAll should wake every subscription that watches a queue")
	}
}

func TestWakeCoalesces(t *testing.T) {
	var s Set
	ch, cancel := s.Subscribe([]string{"q", "q"})
	defer cancel()
	for range 3 {
		s.Wake("q") // must not block on the full buffer
	}
	s.WakeAll()
	if !woken(ch) {
		t.Fatal("no wake-up")
	}
	if woken(ch) {
		t.Fatal("wake-ups did not coalesce")
	}
}

func TestCancel(t *testing.T) {
	var s Set
	ch, cancel := s.Subscribe([]string{"q"})
	other, cancelOther := s.Subscribe([]string{"q"})
	defer cancelOther()
	cancel()
	cancel()
	s.Wake("q")
	s.WakeAll()
	if woken(ch) {
		t.Fatal("a cancelled subscription was woken")
	}
	if !woken(other) {
		t.Fatal("cancelling one subscription silenced another")
	}
	if !s.Watched("q") {
		t.Fatal("q is still watched by the other subscription")
	}
	cancelOther()
	if s.Watched("q") {
		t.Fatal("q is watched after its last subscription was cancelled")
	}
}

func TestClose(t *testing.T) {
	var s Set
	ch, cancel := s.Subscribe([]string{"q"})
	s.Close()
	s.Close()
	s.Wake("q")
	s.WakeAll()
	if woken(ch) {
		t.Fatal("woken after Close")
	}
	cancel()
	cancel()
	ch2, cancel2 := s.Subscribe([]string{"q"})
	defer cancel2()
	s.Wake("q")
	if woken(ch2) || s.Watched("q") {
		t.Fatal("a subscription made after Close was woken or watched")
	}
}

type watchLog struct {
	mu  sync.Mutex
	got []string
}

func (w *watchLog) watch(queues []string, watched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	queues = slices.Sorted(slices.Values(queues))
	for _, q := range queues {
		if watched {
			w.got = append(w.got, "+"+q)
		} else {
			w.got = append(w.got, "-"+q)
		}
	}
}

func (w *watchLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

func TestWatch(t *testing.T) {
	var w watchLog
	s := Set{Watch: w.watch}
	_, cancel1 := s.Subscribe([]string{"a", "b", "a"})
	if got := w.take(); !slices.Equal(got, []string{"+a", "+b"}) {
		t.Fatalf("first subscription: Watch saw %v, want +a +b", got)
	}
	_, cancel2 := s.Subscribe([]string{"b", "c"})
	if got := w.take(); !slices.Equal(got, []string{"+c"}) {
		t.Fatalf("second subscription: Watch saw %v, want +c", got)
	}
	cancel1()
	cancel1()
	if got := w.take(); !slices.Equal(got, []string{"-a"}) {
		t.Fatalf("first cancel: Watch saw %v, want -a", got)
	}
	if !s.Watched("b") || s.Watched("a") {
		t.Fatal("Watched disagrees with the subscriptions left")
	}
	s.Close()
	cancel2()
	if got := w.take(); len(got) != 0 {
		t.Fatalf("Close and a later cancel: Watch saw %v, want nothing", got)
	}
}

// TestConcurrent runs every method at once, for the race detector.
func TestConcurrent(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				ch, cancel := s.Subscribe([]string{"q", string(rune('a' + i))})
				s.Wake("q")
				s.WakeAll()
				woken(ch)
				cancel()
			}
		})
	}
	wg.Wait()
	s.Close()
}
