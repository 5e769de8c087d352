package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/jobq/jobq/backend"
)

// QueueStats implements backend.Backend.
func (b *Backend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	if err := b.lock(ctx, "queue stats"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	out := make([]backend.QueueStats, 0, len(b.queues))
	for name, q := range b.queues {
		q.promote(now)
		if q.empty() {
			continue
		}
		out = append(out, backend.QueueStats{
			Queue:     name,
			Pending:   int64(q.ready.len() + q.keyedReady),
			Scheduled: int64(q.scheduled.len()),
			Reserved:  int64(q.reserved),
			Failed:    int64(q.failed),
			OldestDue: q.oldestDue(),
		})
	}
	slices.SortFunc(out, func(x, y backend.QueueStats) int { return cmp.Compare(x.Queue, y.Queue) })
	return out, nil
}

// JobsInserted implements backend.InsertCounter: every insert (a tick's
// included, a replay not) takes the next job ID, so the last one handed
// out is the count.
func (b *Backend) JobsInserted(ctx context.Context) (int64, error) {
	if err := b.lock(ctx, "count inserted jobs"); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	return b.lastJobID, nil
}
