package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq/backend"
)

// The deadline workload's classes of deadline, by how far ahead of its
// batch's first send a job's deadline is (see deadlinePlanner).
const (
	deadlineVeryShort = iota // 50ms to a quarter lease: the poll and a busy queue expire many
	deadlineShort            // a quarter lease to two leases: a fault on the holder expires some
	deadlineLong             // 10 to 30 leases: expires only when the queue stalls
	deadlineClasses
)

// deadlineClassNames name the classes in the report.
var deadlineClassNames = [deadlineClasses]string{"very short", "short", "long"}

// plannedDeadline is the deadline a job of the deadline workload was sent
// with, and its class.
type plannedDeadline struct {
	at    time.Time
	class int
}

// deadlinePlanner draws, job by job in seq order, whether a job of the
// deadline workload has a deadline (share of them do) and how far ahead:
// an equal chance of each class. The first returned value is 0 for a job
// without one.
func deadlinePlanner(share float64, lease time.Duration, rng *rand.Rand) func(seq int64) (time.Duration, int) {
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(max(1, hi-lo))))
	}
	quarter := max(lease/4, 100*time.Millisecond)
	return func(int64) (time.Duration, int) {
		if rng.Float64() >= share {
			return 0, 0
		}
		switch class := rng.IntN(deadlineClasses); class {
		case deadlineVeryShort:
			return between(50*time.Millisecond, quarter), class
		case deadlineShort:
			return between(quarter, 2*lease), class
		default:
			return between(10*lease, 30*lease), class
		}
	}
}

// setupDeadlines refuses, before anything is enqueued, a deadline
// workload on a backend that keeps no deadlines.
func (r *verifier) setupDeadlines(ctx context.Context) error {
	if r.cfg.Deadlines == 0 {
		return nil
	}
	err := probeDeadlines(ctx, r.direct, r.queue)
	if errors.Is(err, backend.ErrNotSupported) {
		return fmt.Errorf("verify: the deadline workload needs a backend that keeps deadlines, and this %s backend does not: %w", schemeOf(r.db), err)
	}
	return err
}

// probeDeadlines asks b whether it keeps deadlines without writing
// anything: it inserts into queue a job whose deadline passed an hour
// ago. A backend with deadlines refuses it as bad input (the deadline
// has passed by its clock: backend.CheckDeadlines); one without refuses
// it with ErrNotSupported (backend.RefuseDeadlines, which such a backend
// calls before anything else of an insert but the checks that need no
// clock). It returns nil, an error wrapping ErrNotSupported, or one
// saying what else happened.
func probeDeadlines(ctx context.Context, b backend.Backend, queue string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := b.JobInsertMany(ctx, []backend.InsertParams{{
		Queue: queue, Type: JobType, Payload: []byte(`{"run":"probe","seq":-1}`), MaxAttempts: 1,
		Deadline: time.Now().Add(-time.Hour).Truncate(time.Second),
	}})
	var ie *backend.InputError
	switch {
	case errors.As(err, &ie) && ie.Field == "deadline":
		return nil
	case errors.Is(err, backend.ErrNotSupported):
		return err
	case err != nil:
		return fmt.Errorf("verify: ask the backend whether it keeps deadlines: %w", err)
	}
	return errors.New("verify: the backend accepted a job whose deadline had passed an hour before, which it must refuse: its deadlines cannot be verified")
}
