package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jobq/jobq/backend"
)

var _ backend.InsertCounter = (*Backend)(nil)

// qJobsInserted: no parameters. Returns the highest jobs.id ever handed
// out: jobs.id is AUTOINCREMENT, so SQLite keeps it in sqlite_sequence and
// never hands an ID out twice, even when the newest jobs are deleted. No
// row until the first insert.
const qJobsInserted = `SELECT seq FROM sqlite_sequence WHERE name = 'jobs'`

// JobsInserted implements backend.InsertCounter with the jobs table's
// AUTOINCREMENT sequence: each inserted job (a tick's included) takes the
// next ID. A replay re-inserts a job under its old ID, below the sequence,
// which SQLite then leaves as it is: replays do not count. A rolled back
// insert leaves no trace, so the count is exact.
func (b *Backend) JobsInserted(ctx context.Context) (int64, error) {
	const op = "count inserted jobs"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	var n int64
	err := b.r.QueryRowContext(ctx, qJobsInserted).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	return n, nil
}
