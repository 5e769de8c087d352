package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// LeaseSweeper returns jobs whose holder stopped heartbeating (a crashed or
// partitioned worker) to pending, or to failed_jobs when their attempts are
// spent. Every worker runs one; the backend makes concurrent sweeps safe.
type LeaseSweeper struct {
	b        backend.Backend
	interval time.Duration
	log      *slog.Logger
	onSweep  func(backend.SweepResult)
}

// sweepPage is how many expired leases one LeaseSweep call handles.
const sweepPage = backend.DefaultSweepLimit

// NewLeaseSweeper sweeps every interval; onSweep (may be nil) hears of each
// sweep call that moved jobs.
func NewLeaseSweeper(b backend.Backend, interval time.Duration, log *slog.Logger, onSweep func(backend.SweepResult)) *LeaseSweeper {
	return &LeaseSweeper{b: b, interval: interval, log: log, onSweep: onSweep}
}

// Run sweeps at once, then every interval, until ctx ends.
func (s *LeaseSweeper) Run(ctx context.Context) {
	s.RunOnce(ctx)
	ticker.Loop(ctx, s.interval, s.RunOnce)
}

// RunOnce sweeps until no expired lease is left, a page at a time.
func (s *LeaseSweeper) RunOnce(ctx context.Context) {
	for ctx.Err() == nil {
		res, err := s.b.LeaseSweep(ctx, backend.SweepParams{Limit: sweepPage})
		// A failed sweep may still report what it committed before it
		// failed (see backend.Backend.LeaseSweep).
		// Expired jobs (deadline passed unclaimed) count as moved: a
		// sweep that moved only those must still be reported and paged.
		moved := res.Rescued + res.Failed + res.Expired
		if moved > 0 {
			s.log.Info("rescued jobs with expired leases", "rescued", res.Rescued, "failed", res.Failed, "expired", res.Expired)
			if s.onSweep != nil {
				s.onSweep(res)
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sweep expired leases", "err", err)
			}
			return
		}
		if moved < sweepPage {
			return
		}
	}
}
