package jobq_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
)

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	p := jobq.RetryPolicy{Base: time.Second, Max: 100 * time.Second, Jitter: 0.25}
	for attempt := 1; attempt <= 12; attempt++ {
		nominal := min(time.Second<<(attempt-1), 100*time.Second)
		for range 200 {
			d := p.Delay(attempt)
			lo := time.Duration(float64(nominal) * 0.75)
			hi := min(time.Duration(float64(nominal)*1.25), 100*time.Second)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: delay %s outside %s..%s", attempt, d, lo, hi)
			}
		}
	}
	exact := jobq.RetryPolicy{Base: 3 * time.Second, NoJitter: true}
	if d := exact.Delay(3); d != 12*time.Second {
		t.Fatalf("no-jitter delay after attempt 3 = %s, want 12s", d)
	}
	if d := (jobq.RetryPolicy{}).Delay(1000); d != time.Hour {
		t.Fatalf("default cap: %s, want 1h", d)
	}
}
