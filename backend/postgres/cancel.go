package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

var (
	_ backend.Canceller = (*Backend)(nil)
	_ backend.Retainer  = (*Backend)(nil)
)

// JobCancel implements backend.Canceller with one statement (see
// sqlCancel), in a transaction that also ends the tasks whose jobs it
// cancelled (see endTasks): a job cancelled before it ran ends its
// workflow task in the same step.
func (b *Backend) JobCancel(ctx context.Context, ids []int64) ([]backend.CancelResult, error) {
	const op = "cancel jobs"
	if err := backend.ValidateCancelIDs(ids); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	byID := make(map[int64]backend.CancelResult, len(ids))
	var due []string
	err := b.do(ctx, op, func(ctx context.Context) error {
		clear(byID)
		return b.inTx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, b.rq.cancel, ids)
			if err != nil {
				return err
			}
			var r backend.CancelResult
			var outcome int32
			var wf pgtype.Int8
			var ends []taskEnd
			_, err = pgx.ForEachRow(rows, []any{&r.ID, &outcome, &r.Attempt, &wf}, func() error {
				r.Outcome = backend.CancelOutcome(outcome)
				byID[r.ID] = r
				if wf.Valid {
					ends = append(ends, taskEnd{workflow: wf.Int64, job: r.ID, state: backend.TaskCancelled, reason: backend.CancelledError})
				}
				return nil
			})
			if err != nil {
				return err
			}
			due, err = b.endTasks(ctx, pgxRows(tx), false, ends)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	b.wake(append(due, backend.FinishedTopic))
	out := make([]backend.CancelResult, len(ids))
	for i, id := range ids {
		r, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("%s: job %d: no result from the database", op, id)
		}
		out[i] = r
	}
	return out, nil
}

// JobCancelling implements backend.Canceller.
func (b *Backend) JobCancelling(ctx context.Context) ([]backend.JobRef, error) {
	var refs []backend.JobRef
	err := b.do(ctx, "list cancelling jobs", func(ctx context.Context) error {
		refs = refs[:0]
		rows, err := b.pool.Query(ctx, b.rq.cancelling)
		if err != nil {
			return err
		}
		var ref backend.JobRef
		_, err = pgx.ForEachRow(rows, []any{&ref.ID, &ref.Attempt, &ref.Token}, func() error {
			refs = append(refs, ref)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// finishCancelled ends the cancelling claims among refs as cancelled and
// returns them. A ref of an earlier claim of a cancelling job ends
// nothing: it is stale. It leaves the claims of tasks' jobs still held
// (reserved or cancelling) alone and returns them apart, for settleTasks
// (workflow_end.go).
func (b *Backend) finishCancelled(ctx context.Context, refs []backend.JobRef) (map[claimKey]bool, []claimKey, error) {
	ids, tokens := refArrays(refs)
	done := map[claimKey]bool{}
	var tasks []claimKey
	err := b.do(ctx, "end cancelled jobs", func(ctx context.Context) error {
		clear(done)
		tasks = tasks[:0]
		rows, err := b.pool.Query(ctx, b.rq.finishCancelled, ids, tokens)
		if err != nil {
			return err
		}
		var k claimKey
		var task bool
		_, err = pgx.ForEachRow(rows, []any{&k.id, &k.token, &task}, func() error {
			if task {
				tasks = append(tasks, k)
			} else {
				done[k] = true
			}
			return nil
		})
		return err
	})
	return done, tasks, err
}

// FinishedList implements backend.Retainer.
func (b *Backend) FinishedList(ctx context.Context, params backend.FinishedListParams) ([]*backend.FinishedJob, error) {
	const op = "list finished jobs"
	limit, err := backend.ValidateFinishedList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out []*backend.FinishedJob
	err = b.do(ctx, op, func(ctx context.Context) error {
		args := append([]any{string(params.State)}, listArgs(params.Filter, params.BeforeID, limit)...)
		rows, err := b.pool.Query(ctx, b.rq.finishedList, append(args, params.Results)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanFinished)
		return err
	})
	return out, err
}

// JobList implements backend.Retainer.
func (b *Backend) JobList(ctx context.Context, params backend.JobListParams) ([]*backend.JobRow, error) {
	const op = "list jobs"
	limit, err := backend.ValidateJobList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out []*backend.JobRow
	err = b.do(ctx, op, func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, b.rq.jobList, append([]any{string(params.State)}, listArgs(params.Filter, params.BeforeID, limit)...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanJob)
		return err
	})
	return out, err
}

// listArgs are $2..$8 of sqlFinishedList and sqlJobList.
func listArgs(f backend.JobFilter, beforeID int64, limit int) []any {
	opt := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	optTime := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t
	}
	var before any
	if beforeID > 0 {
		before = beforeID
	}
	return []any{opt(f.Queue), opt(f.Type), optTime(f.Since), optTime(f.Until), before, limit, opt(f.Key)}
}

func scanFinished(row pgx.CollectableRow) (*backend.FinishedJob, error) {
	var (
		f                    backend.FinishedJob
		state                string
		lastError, uniqueKey pgtype.Text
		key                  pgtype.Text
		haltHead             pgtype.Int8
		metadata             []byte
	)
	err := row.Scan(&f.ID, &state, &f.Queue, &f.Type, &f.Payload, &f.Attempts, &f.MaxAttempts, &f.Priority,
		&lastError, &uniqueKey, &metadata, &f.CreatedAt, &f.FinishedAt, &key, &haltHead, &f.Result)
	if err != nil {
		return nil, err
	}
	if f.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, fmt.Errorf("finished job %d: %w", f.ID, err)
	}
	f.State = backend.JobState(state)
	f.LastError, f.UniqueKey, f.Key = lastError.String, uniqueKey.String, key.String
	if haltHead.Valid {
		// The halt trigger quotes the key only as far as SQL can: Go's
		// own words are written here (see migrations/013_keys.sql).
		f.LastError = backend.HaltedError(f.Key, haltHead.Int64)
	}
	return &f, nil
}

// FinishedPrune implements backend.Retainer: one statement per age
// (backend.PruneAges), one chunk per statement.
func (b *Backend) FinishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	const op = "prune finished jobs"
	if err := backend.ValidatePrune(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	total := 0
	for _, a := range backend.PruneAges(params) {
		n, err := b.pruneAge(ctx, op, params.State, a)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneAge deletes the jobs of state that a covers and that finished
// more than a.OlderThan ago, chunk by chunk.
func (b *Backend) pruneAge(ctx context.Context, op string, state backend.JobState, a backend.PruneAge) (int, error) {
	older := micros(a.OlderThan)
	if a.Rest && len(a.Except) == 0 {
		// Every type: no row to skip, the plain prune.
		total := 0
		for {
			var n int64
			err := b.do(ctx, op, func(ctx context.Context) error {
				tag, err := b.pool.Exec(ctx, b.rq.finishedPrune, string(state), older, backend.ChunkSize)
				n = tag.RowsAffected()
				return err
			})
			if err != nil {
				return total, err
			}
			total += int(n)
			if n < backend.ChunkSize {
				return total, nil
			}
		}
	}
	query, types := b.rq.finishedPruneTypes, a.Types
	if a.Rest {
		query, types = b.rq.finishedPruneExcept, a.Except
	}
	from := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	total := 0
	for {
		var n int64
		var last pgtype.Timestamptz
		err := b.do(ctx, op, func(ctx context.Context) error {
			return b.pool.QueryRow(ctx, query, string(state), older, backend.ChunkSize, types, from).Scan(&n, &last)
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n < backend.ChunkSize {
			return total, nil
		}
		from = last
	}
}

// PruneTurn implements backend.Retainer with a row of jobq_turns.
func (b *Backend) PruneTurn(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	const op = "take prune turn"
	if err := backend.ValidatePruneTurn(holder, ttl); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	var n int64
	err := b.do(ctx, op, func(ctx context.Context) error {
		tag, err := b.pool.Exec(ctx, b.rq.pruneTurn, holder, micros(ttl))
		n = tag.RowsAffected()
		return err
	})
	return n == 1, err
}
