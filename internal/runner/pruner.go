package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// PrunerConfig says what a Pruner deletes; a zero duration or count
// prunes nothing of that kind.
type PrunerConfig struct {
	Interval       time.Duration // between passes; the turn lasts three of them
	Holder         string        // this process's name for the prune turn
	Completed      time.Duration // completed jobs older than this
	Cancelled      time.Duration // cancelled jobs older than this
	FailedMaxAge   time.Duration // failed jobs older than this
	FailedMaxCount int           // failed jobs beyond the newest this many
	Workflows      time.Duration // ended workflows older than this, when the backend runs them

	// CompletedTypes gives some job types' completed jobs an age of their
	// own instead of Completed (backend.FinishedPruneParams.Types), so
	// completed jobs are pruned when either is set.
	CompletedTypes map[string]time.Duration
}

// Pruner deletes finished and failed jobs past their retention, one pass
// per interval, in the one worker process that holds the prune turn
// (backend.Retainer.PruneTurn): the others skip while it renews the turn,
// and one of them takes over within three intervals when it stops.
type Pruner struct {
	r   backend.Retainer
	b   backend.Backend
	cfg PrunerConfig
	log *slog.Logger
}

// NewPruner prunes r (which is b) as cfg says.
func NewPruner(r backend.Retainer, b backend.Backend, cfg PrunerConfig, log *slog.Logger) *Pruner {
	return &Pruner{r: r, b: b, cfg: cfg, log: log}
}

// Run prunes every interval until ctx ends; the first pass comes at once.
func (p *Pruner) Run(ctx context.Context) {
	p.RunOnce(ctx)
	ticker.Loop(ctx, p.cfg.Interval, p.RunOnce)
}

// RunOnce takes (or renews) the turn and, holding it, prunes each kind
// once. An error is logged and the next pass tries again.
func (p *Pruner) RunOnce(ctx context.Context) {
	mine, err := p.r.PruneTurn(ctx, p.cfg.Holder, 3*p.cfg.Interval)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("take prune turn", "err", err)
		}
		return
	}
	if !mine {
		return
	}
	wf, hasWorkflows := backend.As[backend.Workflower](p.b)
	steps := []struct {
		what string
		on   bool
		run  func() (int, error)
	}{
		{"completed jobs", p.cfg.Completed > 0 || len(p.cfg.CompletedTypes) > 0, func() (int, error) {
			return p.r.FinishedPrune(ctx, backend.FinishedPruneParams{
				State: backend.StateCompleted, OlderThan: p.cfg.Completed, Types: p.cfg.CompletedTypes,
			})
		}},
		{"cancelled jobs", p.cfg.Cancelled > 0, func() (int, error) {
			return p.r.FinishedPrune(ctx, backend.FinishedPruneParams{State: backend.StateCancelled, OlderThan: p.cfg.Cancelled})
		}},
		{"failed jobs (age)", p.cfg.FailedMaxAge > 0, func() (int, error) {
			// A held key's failed head waits for an operator, however old.
			return p.b.FailedPurge(ctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{OlderThan: p.cfg.FailedMaxAge, KeepHeld: true}})
		}},
		{"failed jobs (count)", p.cfg.FailedMaxCount > 0, func() (int, error) {
			return p.b.FailedPurge(ctx, backend.FailedPurgeParams{KeepNewest: p.cfg.FailedMaxCount, Filter: backend.FailedFilter{KeepHeld: true}})
		}},
		{"workflows", hasWorkflows && p.cfg.Workflows > 0, func() (int, error) {
			return wf.WorkflowPrune(ctx, p.cfg.Workflows)
		}},
	}
	for _, s := range steps {
		if !s.on {
			continue
		}
		n, err := s.run()
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("prune "+s.what, "pruned", n, "err", err)
		case n > 0:
			p.log.Info("pruned "+s.what, "count", n)
		}
	}
}
