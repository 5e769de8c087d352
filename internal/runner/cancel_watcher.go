package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// CancelWatcher stops the handlers of cancelled jobs: every interval,
// while the worker holds jobs, it asks the backend which attempts are
// cancelling (one read of an index holding only those) and cancels the
// held ones' contexts with ErrJobCancelled. The heartbeat's refusal is the
// fallback (see LeaseExtender), a HeartbeatInterval later.
type CancelWatcher struct {
	c        backend.Canceller
	extender *LeaseExtender
	interval time.Duration
	log      *slog.Logger
	// failing is set from the first failed poll to the next good one: the
	// poll runs every few hundred milliseconds, so an outage is warned of
	// once, not four times a second.
	failing bool
}

// NewCancelWatcher polls c every interval for the attempts extender holds.
func NewCancelWatcher(c backend.Canceller, extender *LeaseExtender, interval time.Duration, log *slog.Logger) *CancelWatcher {
	return &CancelWatcher{c: c, extender: extender, interval: interval, log: log}
}

// Run polls until ctx ends.
func (w *CancelWatcher) Run(ctx context.Context) { ticker.Loop(ctx, w.interval, w.RunOnce) }

// RunOnce polls once, bounded by the interval, when jobs are held.
func (w *CancelWatcher) RunOnce(ctx context.Context) {
	if w.extender.Held() == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, max(w.interval, time.Second))
	refs, err := w.c.JobCancelling(callCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && !w.failing {
			w.failing = true
			w.log.Warn("list cancelled jobs; retrying quietly until it works again (the heartbeat still ends cancelled jobs)", "err", err)
		}
		return
	}
	if w.failing {
		w.failing = false
		w.log.Info("list cancelled jobs: working again")
	}
	for _, ref := range refs {
		if w.extender.CancelHeld([]backend.JobRef{ref}, ErrJobCancelled) > 0 {
			// Debug: the worker's hooks log the attempt's end as cancelled.
			w.log.Debug("job cancelled; cancelling its handler", "job_id", ref.ID, "attempt", ref.Attempt)
		}
	}
}
