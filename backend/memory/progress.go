package memory

import (
	"context"

	"github.com/jobq/jobq/backend"
)

// JobProgress implements backend.ProgressReporter. The progress lives on
// the stored row, which unreserve clears when the attempt ends; rows are
// never changed in place once handed out (cloneJob copies the struct, and
// this replaces the pointer), so readers share it safely.
func (b *Backend) JobProgress(ctx context.Context, ref backend.JobRef, p backend.Progress) error {
	return backend.ReportProgress(ref, p, func(op string) (bool, error) {
		if err := b.lock(ctx, op); err != nil {
			return false, err
		}
		defer b.mu.Unlock()
		j := b.held(ref)
		if j == nil {
			return false, nil
		}
		p.At = b.now()
		j.Progress = &p
		return true, nil
	})
}
