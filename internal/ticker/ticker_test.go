package ticker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLoop: the function runs once per interval, the first one interval
// after the start, and never again once the context has ended.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		began := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loop(ctx, time.Second, func(context.Context) { at = append(at, time.Since(began)) })
		}()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		<-done
		time.Sleep(5 * time.Second) // a stopped loop stays stopped
		if len(at) != 3 || at[0] != time.Second || at[2] != 3*time.Second {
			t.Fatalf("ran at %v; want 1s, 2s, 3s and nothing after the stop", at)
		}
	})
}
