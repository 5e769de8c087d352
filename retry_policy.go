package jobq

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides how long a failed job waits before its next attempt:
// Base × 2^(attempt−1), multiplied by a random factor in [1−Jitter, 1+Jitter]
// so that jobs failing together do not retry together, then capped at Max.
// The zero value means the defaults; a field left zero takes its default.
// NewWorker refuses a negative Base or Max, a Jitter outside [0, 1] and a
// Max shorter than Base (after defaults are filled in).
type RetryPolicy struct {
	// Base is the delay after the first failed attempt. Defaults to 10s.
	Base time.Duration
	// Max caps every delay. Defaults to 1h.
	Max time.Duration
	// Jitter is the fraction of random spread, in [0, 1]. Defaults to 0.2;
	// set NoJitter to turn it off.
	Jitter float64
	// NoJitter disables jitter (Jitter is then ignored).
	NoJitter bool
}

// Default retry settings; see RetryPolicy and EnqueueOptions.
const (
	DefaultRetryBase   = 10 * time.Second
	DefaultRetryMax    = time.Hour
	DefaultRetryJitter = 0.2
	DefaultMaxAttempts = 3
)

// withDefaults fills zero fields from base (which is itself complete).
func (p RetryPolicy) withDefaults(base RetryPolicy) RetryPolicy {
	if p.Base == 0 {
		p.Base = base.Base
	}
	if p.Max == 0 {
		p.Max = base.Max
	}
	if p.Jitter == 0 && !p.NoJitter {
		p.Jitter = base.Jitter
		p.NoJitter = base.NoJitter
	}
	return p
}

func (p RetryPolicy) validate(field string) error {
	if p.Base < 0 {
		return fmt.Errorf("%w: %s.Base %s is negative", ErrInvalidInput, field, p.Base)
	}
	if p.Max < 0 {
		return fmt.Errorf("%w: %s.Max %s is negative", ErrInvalidInput, field, p.Max)
	}
	if p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter) {
		return fmt.Errorf("%w: %s.Jitter %v is outside [0, 1] (a fraction: 0.2 means ±20%%)", ErrInvalidInput, field, p.Jitter)
	}
	if p.Base > 0 && p.Max > 0 && p.Max < p.Base {
		return fmt.Errorf("%w: %s.Max %s is shorter than Base %s", ErrInvalidInput, field, p.Max, p.Base)
	}
	return nil
}

var defaultRetryPolicy = RetryPolicy{Base: DefaultRetryBase, Max: DefaultRetryMax, Jitter: DefaultRetryJitter}

// Delay returns the wait before the attempt after failed attempt number
// attempt (1 for the first try). The policy's zero fields take defaults.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	p = p.withDefaults(defaultRetryPolicy)
	if attempt < 1 {
		attempt = 1
	}
	d := float64(p.Base) * math.Pow(2, float64(attempt-1))
	if !p.NoJitter && p.Jitter > 0 {
		d *= 1 - p.Jitter + 2*p.Jitter*rand.Float64()
	}
	if d > float64(p.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		return p.Max
	}
	return time.Duration(d)
}
