package ticker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBackground: the function runs repeatedly, and after stop returns it
// never runs again and its goroutine is gone (goleak).
func TestBackground(t *testing.T) {
	var n atomic.Int32
	ran := make(chan struct{}, 10)
	stop := Background(time.Millisecond, func(ctx context.Context) {
		n.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	<-ran
	<-ran
	stop()
	after := n.Load()
	time.Sleep(10 * time.Millisecond) // a stopped loop must stay stopped
	if n.Load() != after || after < 2 {
		t.Fatalf("ran %d times before stop and %d after; want >= 2, then none", after, n.Load()-after)
	}
}
