package jobq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
)

// ProgressInterval is the least time between two progress writes of one
// attempt: SetProgress calls within it only replace the value the next
// write sends, so a handler may report from a tight loop.
const ProgressInterval = 250 * time.Millisecond

// SetProgress reports the running job's progress: percent (0..100) and a
// short message (at most backend.MaxProgressMessageBytes of UTF-8), which
// Inspector.Job, `jobq jobs show` and the dashboard show while the attempt
// runs. It is cheap enough to call in a loop: it records the value and
// returns, and the worker writes the latest one at most once per
// ProgressInterval, off the handler's goroutine, fenced by the attempt's
// claim. A value still waiting when the handler returns is dropped: the
// attempt is over, and the next attempt (if any) starts with no progress.
//
// Bad input (a percent out of range, a message that is not one short
// line of printable UTF-8, a context that is not a handler's) is an error
// wrapping ErrInvalidInput.
// A write the store refuses (the claim was lost: the job was taken over
// or cancelled) or that fails is logged once per attempt and not
// returned: progress is informational, and the attempt's own outcome
// reports a lost claim. On a backend without backend.ProgressReporter
// (the sync backend) it does nothing and returns nil.
func SetProgress(ctx context.Context, percent int, message string) error {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return fmt.Errorf("%w: SetProgress must be called with a handler's context", ErrInvalidInput)
	}
	p := backend.Progress{Percent: percent, Message: message}
	if err := backend.ValidateProgress(p); err != nil {
		return fmt.Errorf("set progress of job %d: %w", jc.ref.ID, err)
	}
	if jc.reporter == nil {
		return nil
	}
	jc.progressMu.Lock()
	defer jc.progressMu.Unlock()
	if jc.progressEnded {
		return nil // a goroutine of the handler's, after it returned
	}
	if jc.progress == nil {
		jc.progress = startProgress(ctx, jc.reporter, jc.ref, jc.log)
	}
	jc.progress.set(p)
	return nil
}

// stopProgress ends the attempt's progress writes, waiting for one in
// flight, before the attempt's outcome is written: a progress write after
// it would only be refused by the fence.
func (jc *jobCtx) stopProgress() {
	jc.progressMu.Lock()
	jc.progressEnded = true
	s := jc.progress
	jc.progressMu.Unlock()
	if s != nil {
		s.stop()
	}
}

// progressWriter is the goroutine of one attempt that writes its latest
// progress, at most once per ProgressInterval. It starts with the
// attempt's first SetProgress, so an attempt that reports none costs
// nothing, and stop ends it.
type progressWriter struct {
	pr     backend.ProgressReporter
	ref    backend.JobRef
	log    *slog.Logger
	cancel context.CancelFunc
	kick   chan struct{} // a buffer of one: a value is waiting
	done   chan struct{}

	mu      sync.Mutex
	pending *backend.Progress
}

func startProgress(ctx context.Context, pr backend.ProgressReporter, ref backend.JobRef, log *slog.Logger) *progressWriter {
	// The writes outlive a handler context's cancellation (the value
	// stays readable) until stop: they keep its values (a trace) only.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &progressWriter{pr: pr, ref: ref, log: log, cancel: cancel, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// set makes p the value the next write sends.
func (s *progressWriter) set(p backend.Progress) {
	s.mu.Lock()
	s.pending = &p
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *progressWriter) stop() {
	s.cancel()
	<-s.done
}

func (s *progressWriter) run(ctx context.Context) {
	defer close(s.done)
	pace := time.NewTimer(0)
	defer pace.Stop()
	logged := false
	for {
		// The pace first: a write waits out ProgressInterval after the
		// one before, so a burst of reports becomes one write.
		select {
		case <-pace.C:
		case <-ctx.Done():
			return
		}
		select {
		case <-s.kick:
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
		p := s.pending
		s.pending = nil
		s.mu.Unlock()
		if p == nil {
			pace.Reset(0)
			continue
		}
		err := s.pr.JobProgress(ctx, s.ref, *p)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, backend.ErrStale):
			// The claim is gone for good: nothing more of this attempt
			// can be written.
			s.log.Warn("progress refused: the job is no longer held by this attempt (its lease was lost, or it was cancelled)",
				"job", s.ref.ID, "attempt", s.ref.Attempt)
			<-ctx.Done()
			return
		case !logged:
			logged = true
			s.log.Warn("progress not written; later reports of this attempt are tried without logging again",
				"job", s.ref.ID, "attempt", s.ref.Attempt, "error", err)
		}
		pace.Reset(ProgressInterval)
	}
}
