package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/attemptlog"
)

// FailedList implements backend.Backend.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	const op = "list failed jobs"
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err == nil {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	before := pgtype.Int8{Int64: params.BeforeID, Valid: params.BeforeID > 0}
	args := append(append(filterArgs(params.Filter), before, limit), keyFilter(params.Filter)...)
	var jobs []*backend.FailedJob
	err = b.do(ctx, op, func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, b.q.failedList, args...)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, scanFailed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// FailedGet implements backend.Backend: jobID is the job's ID.
func (b *Backend) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	return getOne(ctx, b, fmt.Sprintf("get failed job %d", jobID), b.q.failedGet, jobID, scanFailed)
}

// FailedReplay implements backend.Backend. Listed job IDs are replayed in
// one transaction: when some have no failed row it rolls back and returns
// backend.ErrNotFound, replaying none of them. A replay by filter is a
// series of statements of at most backend.ChunkSize jobs each, each in
// its own transaction; when one fails, the result counts the chunks already
// committed and the error says why the rest were not replayed. A job
// whose unique key a live job or a completed one holds stays failed
// (skipped).
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	const op = "replay failed jobs"
	if ids := distinctIDs(params.IDs); ids != nil {
		return b.replayIDs(ctx, op, ids)
	}
	if err := backend.ValidateFilter(params.Filter); err != nil {
		return backend.ReplayResult{}, fmt.Errorf("%s: %w", op, err)
	}
	var res backend.ReplayResult
	byType := map[backend.TypeCount]int{}
	err := b.chunks(ctx, op, func(ctx context.Context, after int64) (last pgtype.Int8, matched int64, err error) {
		var step replayStep
		args := append(append(filterArgs(params.Filter), after, backend.ChunkSize), keyFilter(params.Filter)...)
		// In a transaction of its own, for the second look at the keys
		// of the jobs it moved back (checkReplayKeys).
		err = retryRace(func() error {
			return b.inTx(ctx, func(tx pgx.Tx) error {
				if err := step.scan(tx.QueryRow(ctx, b.q.failedReplayChunk, args...)); err != nil {
					return err
				}
				return b.checkReplayKeys(ctx, tx, step.keys)
			})
		})
		if err != nil {
			return step.last, step.matched, err
		}
		// The plain jobs the statement replayed are committed: they are
		// counted and woken now, since a retry of this chunk (after the
		// tasks' transaction below failed) no longer matches them. What
		// it left in failed_jobs, it matches again: that is counted once
		// the chunk succeeds.
		res.Replayed += int(step.replayed)
		for i, q := range step.queues {
			byType[backend.TypeCount{Queue: q, Type: step.types[i]}] += int(step.counts[i])
		}
		b.wake(step.due())
		var tasks taskReplay
		if len(step.tasks) > 0 {
			// The chunk left the jobs of workflow tasks: they come back
			// with their tasks in a transaction (workflow_replay.go).
			tasks, err = b.replayTaskRows(ctx, step.tasks)
		}
		if err == nil {
			res.Replayed += tasks.replayed
			res.Skipped += int(step.matched-step.replayed) - len(step.tasks) + tasks.matched - tasks.replayed
			tasks.addTypes(byType)
		}
		return step.last, step.matched, err
	})
	res.ByType = typeCounts(byType)
	return res, err
}

// replayIDs replays the failed jobs of the listed job IDs, all or none. The jobs of
// workflow tasks among them come back, with their tasks, in the same
// transaction (workflow_replay.go).
func (b *Backend) replayIDs(ctx context.Context, op string, ids []int64) (backend.ReplayResult, error) {
	var step replayStep
	var tasks taskReplay
	err := retryRace(func() error {
		return b.do(ctx, op, func(ctx context.Context) error {
			tasks = taskReplay{}
			return b.inTx(ctx, func(tx pgx.Tx) error {
				if err := step.scan(tx.QueryRow(ctx, b.q.failedReplayIDs, ids)); err != nil {
					return err
				}
				if int(step.matched) < len(ids) {
					return fmt.Errorf("%d of %d failed jobs: %w", len(ids)-int(step.matched), len(ids), backend.ErrNotFound)
				}
				if err := b.checkReplayKeys(ctx, tx, step.keys); err != nil {
					return err
				}
				if len(step.tasks) == 0 {
					return nil
				}
				var err error
				tasks, err = b.replayTasks(ctx, tx, step.tasks)
				return err
			})
		})
	})
	if err != nil {
		return backend.ReplayResult{}, err
	}
	replayed := int(step.replayed) + tasks.replayed
	res := backend.ReplayResult{Replayed: replayed, Skipped: int(step.matched) - replayed}
	byType := map[backend.TypeCount]int{}
	for i, q := range step.queues {
		byType[backend.TypeCount{Queue: q, Type: step.types[i]}] += int(step.counts[i])
	}
	tasks.addTypes(byType)
	res.ByType = typeCounts(byType)
	b.wake(step.due())
	b.wake(tasks.due)
	return res, nil
}

// replayStep is the row one replay statement returns (see replayTail).
type replayStep struct {
	last              pgtype.Int8
	matched, replayed int64
	queues, types     []string
	counts            []int64
	tasks             []int64  // failed_jobs ids of tasks' jobs, left to replayTasks
	keys              []string // the unique keys of the jobs moved back
}

func (s *replayStep) scan(row pgx.Row) error {
	return row.Scan(&s.last, &s.matched, &s.replayed, &s.queues, &s.types, &s.counts, &s.tasks, &s.keys)
}

// due returns the queues that got a job back, each once.
func (s *replayStep) due() []string {
	return slices.Compact(slices.Sorted(slices.Values(s.queues)))
}

// FailedPurge implements backend.Backend. Listed job IDs go in one statement;
// a purge by filter (with or without KeepNewest) is a series of statements
// of at most backend.ChunkSize jobs each, and when one fails the count
// covers the chunks already committed.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	const op = "purge failed jobs"
	err := backend.ValidatePurge(params)
	if err == nil {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if ids := distinctIDs(params.IDs); ids != nil {
		var n int64
		err := b.do(ctx, op, func(ctx context.Context) error {
			tag, err := b.pool.Exec(ctx, b.q.failedPurgeIDs, ids)
			n = tag.RowsAffected()
			return err
		})
		if n > 0 {
			b.wakeHeld(ctx)
		}
		return int(n), err
	}
	var below pgtype.Int8 // NULL: no bound
	if params.KeepNewest > 0 {
		found := false
		err := b.do(ctx, op, func(ctx context.Context) error {
			args := append(append(filterArgs(params.Filter), params.KeepNewest), keyFilter(params.Filter)...)
			err := b.pool.QueryRow(ctx, b.q.failedKeepBound, args...).Scan(&below)
			found = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		if err != nil || !found {
			return 0, err // !found: no more match than are kept
		}
	}
	var deleted int
	err = b.chunks(ctx, op, func(ctx context.Context, after int64) (last pgtype.Int8, matched int64, err error) {
		var n int64
		args := append(append(filterArgs(params.Filter), after, below, backend.ChunkSize), keyFilter(params.Filter)...)
		err = b.pool.QueryRow(ctx, b.q.failedPurgeChunk, args...).Scan(&last, &matched, &n)
		if err == nil {
			deleted += int(n)
		}
		return last, matched, err
	})
	if deleted > 0 {
		b.wakeHeld(ctx)
	}
	return deleted, err
}

// chunks runs one chunk of a replay or purge by filter after another until
// a chunk comes back short. Each call of chunk handles the matching failed
// jobs above the cursor after (0 at first), at most backend.ChunkSize, and
// returns the highest id it selected (the next cursor) and how many it
// selected. Each chunk is one statement, retried by do on its own.
func (b *Backend) chunks(ctx context.Context, op string, chunk func(ctx context.Context, after int64) (last pgtype.Int8, matched int64, err error)) error {
	var after int64
	for {
		var last pgtype.Int8
		var matched int64
		err := b.do(ctx, op, func(ctx context.Context) error {
			var err error
			last, matched, err = chunk(ctx, after)
			return err
		})
		if err != nil {
			return err
		}
		if matched < backend.ChunkSize || !last.Valid {
			return nil
		}
		after = last.Int64
	}
}

// filterArgs turns a filter into the nullable parameters $1..$4 of the
// failed_jobs statements (see failedFilter; NULL matches everything).
func filterArgs(f backend.FailedFilter) []any {
	return []any{
		pgtype.Text{String: f.Queue, Valid: f.Queue != ""},
		pgtype.Text{String: f.Type, Valid: f.Type != ""},
		pgtype.Timestamptz{Time: f.FailedBefore, Valid: !f.FailedBefore.IsZero()},
		pgtype.Int8{Int64: micros(f.OlderThan), Valid: f.OlderThan > 0},
	}
}

// keyFilter is the filter's key and KeepHeld as the failed_jobs
// statements take them, after their own parameters (see failedKeyFilter;
// a NULL key matches any).
func keyFilter(f backend.FailedFilter) []any {
	return []any{pgtype.Text{String: f.Key, Valid: f.Key != ""}, f.KeepHeld}
}

// distinctIDs drops repeats; nil for none, which the statements read as
// "use the filter".
func distinctIDs(ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// scanFailed reads one row of failedColumns.
func scanFailed(row pgx.CollectableRow) (*backend.FailedJob, error) {
	var (
		f         backend.FailedJob
		uniqueKey pgtype.Text
		metadata  []byte
		errs      []byte
		workflow  pgtype.Int8
		task      pgtype.Text
		key       pgtype.Text
	)
	err := row.Scan(&f.ID, &f.JobID, &f.Queue, &f.Type, &f.Payload, &f.Attempts, &f.MaxAttempts,
		&f.Priority, &f.Error, &uniqueKey, &f.CreatedAt, &f.FailedAt, &metadata, &errs, &key, &f.Turn, &workflow, &task)
	if err != nil {
		return nil, err
	}
	if f.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, fmt.Errorf("failed job %d: %w", f.ID, err)
	}
	if f.Errors, err = attemptlog.Decode(errs); err != nil {
		return nil, fmt.Errorf("failed job %d: %w", f.ID, err)
	}
	f.UniqueKey, f.Key = uniqueKey.String, key.String
	f.WorkflowID, f.Task = workflow.Int64, task.String
	return &f, nil
}
