package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq/backend"
)

var _ backend.Retainer = (*Backend)(nil)

// scriptPruneCompleted prunes completed jobs, each type by its age (see
// the script in scripts.lua); declared here, beside its one caller.
var scriptPruneCompleted = mustScript("prunecompleted", "completed", "completedAt", "finishedPrefix", "base")

// listQueues is the queues a list filtered by queue looks at.
func (b *Backend) listQueues(ctx context.Context, queue string) ([]string, error) {
	return b.filterQueues(ctx, backend.FailedFilter{Queue: queue})
}

// optMicros is a time bound for a script: µs since 1970, ” for none.
func optMicros(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return micro(t)
}

// upperTS is a queue's exclusive upper bound for the IDs below beforeID
// (” for none).
func upperTS(beforeID int64, idx int) string {
	if beforeID <= 0 {
		return ""
	}
	return tsBelow(beforeID, idx)
}

// FinishedList implements backend.Retainer: one script per queue, the
// pages merged newest first.
func (b *Backend) FinishedList(ctx context.Context, params backend.FinishedListParams) ([]*backend.FinishedJob, error) {
	const op = "list finished jobs"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	limit, err := backend.ValidateFinishedList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := b.finishedList(ctx, params, limit)
	return out, b.fail(op, err)
}

// flag is a script's yes/no argument: "1" for yes.
func flag(yes bool) string {
	if yes {
		return "1"
	}
	return ""
}

// finishedWidth is how many values the script finishedscan returns per
// job.
const finishedWidth = 11

func (b *Backend) finishedList(ctx context.Context, params backend.FinishedListParams, limit int) ([]*backend.FinishedJob, error) {
	queues, err := b.listQueues(ctx, params.Filter.Queue)
	if err != nil {
		return nil, err
	}
	var all []*backend.FinishedJob
	for _, name := range queues {
		idx, ok, err := b.reg.lookup(ctx, name)
		if err != nil || !ok {
			return nil, err
		}
		q := b.keys.queue(name)
		res, err := scriptFinishedScan.eval(ctx, b.c, scriptFinishedScan.keysOf(q), []any{
			upperTS(params.BeforeID, idx), params.Filter.Type,
			optMicros(params.Filter.Since), optMicros(params.Filter.Until), limit, string(params.State),
			params.Filter.Key, flag(params.Results),
		})
		if err != nil {
			return nil, err
		}
		v, err := asSlice(res)
		if err != nil || len(v)%finishedWidth != 0 {
			return nil, fmt.Errorf("list finished jobs of %s: unexpected reply", name)
		}
		f := fields{v: v}
		for i := 0; i < len(v); i += finishedWidth {
			j := &backend.FinishedJob{
				ID: f.id(i, idx), Queue: name, State: params.State,
				Priority: f.int(i + 2), Attempts: f.int(i + 3), LastError: f.str(i + 4),
				UniqueKey: f.str(i + 5), Metadata: f.metadata(i + 6),
				CreatedAt: f.micros(i + 7), FinishedAt: f.micros(i + 8),
			}
			j.Key, _ = keyField(f.str(i + 9))
			j.MaxAttempts, j.Type, j.Payload = f.record(i + 1)
			if r := f.str(i + 10); r != "" {
				j.Result = []byte(r)
			}
			all = append(all, j)
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	slices.SortFunc(all, func(x, y *backend.FinishedJob) int { return cmp.Compare(y.ID, x.ID) })
	return all[:min(limit, len(all))], nil
}

// FinishedPrune implements backend.Retainer: per queue, chunks of
// backend.ChunkSize until none is left. Completed jobs are pruned by the
// script "prunecompleted" whether or not params gives ages per type, so
// that the jobs an earlier prune by type moved to their type's zset are
// pruned all the same.
func (b *Backend) FinishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	const op = "prune finished jobs"
	if err := b.begin(op); err != nil {
		return 0, err
	}
	if err := backend.ValidatePrune(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	n, err := b.finishedPrune(ctx, params)
	return n, b.fail(op, err)
}

func (b *Backend) finishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return 0, err
	}
	s, args := scriptPruneFinished, []any{ageMicros(params.OlderThan), backend.ChunkSize, string(params.State)}
	if params.State == backend.StateCompleted {
		s, args = scriptPruneCompleted, []any{ageMicros(params.OlderThan), backend.ChunkSize}
		for _, typ := range slices.Sorted(maps.Keys(params.Types)) {
			args = append(args, typ, ageMicros(params.Types[typ]))
		}
	}
	total := 0
	for _, name := range queues {
		q := b.keys.queue(name)
		idx, _, err := b.reg.lookup(ctx, name)
		if err != nil {
			return total, err
		}
		for {
			res, err := s.eval(ctx, b.c, s.keysOf(q), args)
			if err != nil {
				return total, err
			}
			n, read, held, err := pruneReply(s, res, idx)
			if err != nil {
				return total, err
			}
			// The completed jobs pruned with their unique keys free them
			// (backend.UniqueCompleted), while the keys still name them.
			b.releaseUnique(ctx, held)
			total += n
			if read < backend.ChunkSize {
				break
			}
		}
	}
	return total, nil
}

// ageMicros is an age for a prune script: whole µs, rounded up, so that
// a job is never deleted before its age is up.
func ageMicros(d time.Duration) string { return strconv.FormatInt(microsCeil(d), 10) }

// pruneReply reads a prune script's reply: how many jobs it deleted, how
// many it read (fewer than backend.ChunkSize: none left) and the unique
// keys the deleted jobs of the queue of index idx may hold.
func pruneReply(s *luaScript, res any, idx int) (deleted, read int, held []uniqueHeld, err error) {
	if s != scriptPruneCompleted {
		n, err := asInt(res)
		return int(n), int(n), nil, err
	}
	v, err := asSlice(res)
	if err != nil || len(v) != 3 {
		return 0, 0, nil, fmt.Errorf("prune completed jobs: unexpected reply")
	}
	f := fields{v: v}
	deleted, read = f.int(0), f.int(1)
	if held, err = readHeld(v[2], idx); err != nil {
		return 0, 0, nil, fmt.Errorf("prune completed jobs: %w", err)
	}
	return deleted, read, held, f.err
}

// JobList implements backend.Retainer: per queue, a script picks the IDs
// and one pipelined read fetches the jobs.
func (b *Backend) JobList(ctx context.Context, params backend.JobListParams) ([]*backend.JobRow, error) {
	const op = "list jobs"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	limit, err := backend.ValidateJobList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := b.jobList(ctx, params, limit)
	return out, b.fail(op, err)
}

func (b *Backend) jobList(ctx context.Context, params backend.JobListParams, limit int) ([]*backend.JobRow, error) {
	queues, err := b.listQueues(ctx, params.Filter.Queue)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, name := range queues {
		idx, ok, err := b.reg.lookup(ctx, name)
		if err != nil || !ok {
			return nil, err
		}
		q := b.keys.queue(name)
		res, err := scriptJobList.eval(ctx, b.c, scriptJobList.keysOf(q), []any{
			string(params.State), upperTS(params.BeforeID, idx), params.Filter.Type,
			optMicros(params.Filter.Since), optMicros(params.Filter.Until), limit, params.Filter.Key,
		})
		if err != nil {
			return nil, err
		}
		v, err := asSlice(res)
		if err != nil {
			return nil, err
		}
		f := fields{v: v}
		for i := range v {
			ids = append(ids, f.id(i, idx))
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	slices.SortFunc(ids, func(x, y int64) int { return cmp.Compare(y, x) })
	ids = ids[:min(limit, len(ids))]
	out := make([]*backend.JobRow, 0, len(ids))
	for _, id := range ids {
		row, err := b.jobGet(ctx, id)
		if err != nil {
			if errors.Is(err, backend.ErrNotFound) {
				continue // ended meanwhile
			}
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// PruneTurn implements backend.Retainer with one key set with an expiry
// (P:turn:prune), by the Redis clock.
func (b *Backend) PruneTurn(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	const op = "take prune turn"
	if err := b.begin(op); err != nil {
		return false, err
	}
	if err := backend.ValidatePruneTurn(holder, ttl); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	res, err := scriptTurn.eval(ctx, b.c, scriptTurn.prefixKeys(b.keys), []any{holder, max(1, ttl.Milliseconds())})
	if err != nil {
		return false, b.fail(op, err)
	}
	n, err := asInt(res)
	return n == 1, b.fail(op, err)
}
