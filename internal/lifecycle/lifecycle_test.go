package lifecycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events records what components did, in order.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.list = append(e.list, s)
	e.mu.Unlock()
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// loop is a component that runs until its context ends.
func loop(ev *events, name string) Component {
	return Component{Name: name, Run: func(ctx context.Context) {
		<-ctx.Done()
		ev.add(name + " stopped")
	}}
}

// TestGroupStopsInReverse: components stop last-started first, each
// completely before the next is asked to.
func TestGroupStopsInReverse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		var g Group
		for _, n := range []string{"a", "b", "c"} {
			if !g.Start(context.Background(), loop(&ev, n)) {
				t.Fatalf("Start %s refused", n)
			}
		}
		g.Stop()
		if got := ev.get(); !slices.Equal(got, []string{"c stopped", "b stopped", "a stopped"}) {
			t.Fatalf("stop order %v; want c, b, a", got)
		}
	})
}

// TestGroupDrain: a draining component gets Drain and its grace to finish
// by itself; one that does not is cancelled when the grace runs out.
func TestGroupDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		var g Group
		began := time.Now()
		finish := make(chan struct{})
		g.Start(context.Background(), Component{
			Name: "flusher",
			Run: func(ctx context.Context) {
				select {
				case <-finish:
					ev.add("flushed")
				case <-ctx.Done():
					ev.add("cancelled")
				}
			},
			Drain: func() { close(finish) },
			Grace: time.Minute,
		})
		g.Start(context.Background(), Component{
			Name:  "stubborn",
			Run:   func(ctx context.Context) { <-ctx.Done(); ev.add("stubborn cancelled") },
			Drain: func() { ev.add("stubborn drained") },
			Grace: 5 * time.Second,
		})
		g.Stop()
		want := []string{"stubborn drained", "stubborn cancelled", "flushed"}
		if got := ev.get(); !slices.Equal(got, want) {
			t.Fatalf("events %v; want %v", got, want)
		}
		if took := time.Since(began); took != 5*time.Second {
			t.Fatalf("Stop took %s; want the stubborn component's 5s grace and no more", took)
		}
	})
}

// TestGroupAfterStop: Start after Stop runs nothing; Stop is idempotent,
// and a second Stop during the first waits for it.
func TestGroupAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		var g Group
		release := make(chan struct{})
		g.Start(context.Background(), Component{
			Name:  "slow",
			Run:   func(ctx context.Context) { <-release; ev.add("slow done") },
			Drain: func() {},
		})
		first := make(chan struct{})
		go func() { g.Stop(); close(first) }()
		synctest.Wait()
		second := make(chan struct{})
		go func() { g.Stop(); close(second) }()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a second Stop returned while the first was still stopping")
		default:
		}
		close(release)
		<-first
		<-second
		if g.Start(context.Background(), loop(&ev, "late")) {
			t.Fatal("Start after Stop ran a component")
		}
		g.Stop()
		if got := ev.get(); !slices.Equal(got, []string{"slow done"}) {
			t.Fatalf("events %v", got)
		}
	})
}
