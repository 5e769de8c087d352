package redis

import (
	"context"

	"github.com/jobq/jobq/backend"
)

var _ backend.ProgressReporter = (*Backend)(nil)

// JobProgress implements backend.ProgressReporter with one call of the
// script "progress" on the job's hash: hash fields tagged with the claim's
// token, which old code ignores, so the layout is unchanged.
func (b *Backend) JobProgress(ctx context.Context, ref backend.JobRef, p backend.Progress) error {
	return backend.ReportProgress(ref, p, func(op string) (bool, error) {
		if err := b.begin(op); err != nil {
			return false, err
		}
		queue, ok, err := b.reg.name(ctx, queueIndexOf(ref.ID))
		if err != nil || !ok || ref.ID <= 0 {
			return false, b.fail(op, err) // an unknown queue holds no job
		}
		q := b.keys.queue(queue)
		keys := scriptProgress.itemKeys(scriptProgress.keysFor(q, 1), q, ref.ID)
		res, err := scriptProgress.eval(ctx, b.c, keys, []any{p.Percent, p.Message, ref.Token})
		if err != nil {
			return false, b.fail(op, err)
		}
		refused, err := asSlice(res)
		return len(refused) == 0 && err == nil, b.fail(op, err)
	})
}
