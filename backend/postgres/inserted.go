package postgres

import (
	"context"

	"github.com/jobq/jobq/backend"
)

var _ backend.InsertCounter = (*Backend)(nil)

// JobsInserted implements backend.InsertCounter with the last value of the
// job ID sequence, read without calling nextval. Every insert takes its
// IDs from it, a tick's included; a replay re-creates the job under its
// old ID and takes none, so it does not count. The count runs ahead of the
// jobs written by the IDs an insert took and then did not use (a rolled
// back transaction, a unique key already held): the gaps of any sequence.
func (b *Backend) JobsInserted(ctx context.Context) (int64, error) {
	var n int64
	err := b.do(ctx, "count inserted jobs", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.q.jobsInserted).Scan(&n)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
