package jobq

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jobq/jobq/backend"
)

type (
	// QueueLimits bounds one queue across every worker: at most
	// Concurrency jobs running at once and at most Rate starts per
	// RatePeriod (zero fields: no limit). See backend.QueueController.
	QueueLimits = backend.QueueLimits
	// QueueSettings is one queue's paused flag and limits.
	QueueSettings = backend.QueueSettings
)

// QueueInfo is one queue as an operator sees it: its job counts and its
// control settings.
type QueueInfo struct {
	QueueStats
	Paused bool
	Limits QueueLimits
	Keys   KeyRules // the queue's key rules (see SetQueueKeys)
}

// controller returns the backend's queue control, or ErrNotSupported
// naming op.
func (i *Inspector) controller(op string) (backend.QueueController, error) {
	c, ok := backend.As[backend.QueueController](i.b)
	if !ok {
		return nil, fmt.Errorf("%s: %w: this backend keeps no per-queue settings", op, ErrNotSupported)
	}
	return c, nil
}

// PauseQueue pauses a queue: from its return no worker anywhere claims
// its jobs (enqueues go on; jobs already running finish normally). It is
// idempotent, keeps the queue's limits, and the queue need not exist yet.
func (i *Inspector) PauseQueue(ctx context.Context, queue string) error {
	c, err := i.controller("pause queue " + queue)
	if err != nil {
		return err
	}
	return c.QueuePause(ctx, queue, true)
}

// ResumeQueue resumes a paused queue and wakes idle workers (at once
// where the backend notifies them; see docs/backends.md on SQLite).
func (i *Inspector) ResumeQueue(ctx context.Context, queue string) error {
	c, err := i.controller("resume queue " + queue)
	if err != nil {
		return err
	}
	return c.QueuePause(ctx, queue, false)
}

// SetQueueLimits replaces a queue's limits; the zero QueueLimits clears
// them. A bad value is ErrInvalidInput naming the field.
func (i *Inspector) SetQueueLimits(ctx context.Context, queue string, limits QueueLimits) error {
	c, err := i.controller("set limits of queue " + queue)
	if err != nil {
		return err
	}
	return c.QueueSetLimits(ctx, queue, limits)
}

// QueueSettings lists the paused or limited queues, sorted by name; a
// backend without queue control has none.
func (i *Inspector) QueueSettings(ctx context.Context) ([]QueueSettings, error) {
	c, ok := backend.As[backend.QueueController](i.b)
	if !ok {
		return nil, nil
	}
	return c.QueueSettingsList(ctx)
}

// Queues lists every queue that holds jobs or has settings, sorted by
// name, with its counts, paused flag and limits.
func (i *Inspector) Queues(ctx context.Context) ([]QueueInfo, error) {
	stats, err := i.b.QueueStats(ctx)
	if err != nil {
		return nil, err
	}
	settings, err := i.QueueSettings(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*QueueInfo, len(stats)+len(settings))
	out := make([]QueueInfo, 0, len(stats)+len(settings))
	for _, s := range stats {
		out = append(out, QueueInfo{QueueStats: s})
	}
	for k := range out {
		byName[out[k].Queue] = &out[k]
	}
	var extra []QueueInfo
	for _, s := range settings {
		if q, ok := byName[s.Queue]; ok {
			q.Paused, q.Limits, q.Keys = s.Paused, s.QueueLimits, s.Keys
			continue
		}
		extra = append(extra, QueueInfo{QueueStats: QueueStats{Queue: s.Queue}, Paused: s.Paused, Limits: s.QueueLimits, Keys: s.Keys})
	}
	out = append(out, extra...)
	slices.SortFunc(out, func(x, y QueueInfo) int { return strings.Compare(x.Queue, y.Queue) })
	return out, nil
}

// JobsInserted returns how many jobs were ever inserted into the store, a
// count that only grows (see backend.InsertCounter): its rise between two
// reads is the jobs enqueued in between, which job IDs cannot tell (on
// Redis they are timestamps). A backend that keeps no such count (sync)
// returns ErrNotSupported.
func (i *Inspector) JobsInserted(ctx context.Context) (int64, error) {
	c, ok := backend.As[backend.InsertCounter](i.b)
	if !ok {
		return 0, fmt.Errorf("count inserted jobs: %w: this backend keeps no count of inserted jobs", ErrNotSupported)
	}
	return c.JobsInserted(ctx)
}
