package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jobq/jobq/backend"
)

var _ backend.InsertCounter = (*Backend)(nil)

// JobsInserted implements backend.InsertCounter: the sum of the queues'
// counters P:{Q}:i, which the scripts insert, insert1 and tick raise by the
// jobs they write, in the same atomic step (so the count is exact). A
// replay re-creates failed jobs under their old IDs and does not count,
// as on SQLite and Postgres. Jobs inserted by a build without the counter
// were never counted: the sum starts from the first insert of one that
// has it. The counters are read in one pipeline.
func (b *Backend) JobsInserted(ctx context.Context) (int64, error) {
	const op = "count inserted jobs"
	if err := b.begin(op); err != nil {
		return 0, err
	}
	n, err := b.jobsInserted(ctx)
	return n, b.fail(op, err)
}

func (b *Backend) jobsInserted(ctx context.Context) (int64, error) {
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return 0, err
	}
	keys := make([]string, len(queues))
	for i, q := range queues {
		keys[i] = b.keys.queue(q).inserted
	}
	vals, err := b.c.getEach(ctx, keys)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, v := range vals {
		if v == "" {
			continue // no insert counted in this queue yet
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("queue %s: malformed insert count %.20q", queues[i], v)
		}
		total += n
	}
	return total, nil
}
