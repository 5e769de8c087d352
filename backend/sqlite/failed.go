package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/attemptlog"
)

// FailedList implements backend.Backend on the read connections.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	const op = "list failed jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := backend.ValidateFilter(params.Filter); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	where, args := failedWhere(params.Filter, params.Filter.Cutoff(b.now()), params.BeforeID)
	return listRows(ctx, b, op, failedListSQL(where), append(args, int64(limit)), scanFailed)
}

// FailedGet implements backend.Backend on the read connections: jobID
// is the job's ID.
func (b *Backend) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	op := fmt.Sprintf("get failed job %d", jobID)
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	st, err := b.statements(ctx)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	f, err := scanFailed(st.failedGet.QueryRowContext(ctx, jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return f, nil
}

// FailedReplay implements backend.Backend. Listed job IDs are replayed in
// one write transaction, and one without a failed row rolls the whole call
// back with ErrNotFound. A replay by filter works in chunks of at most
// backend.ChunkSize jobs, each in a write transaction of its own, so other
// writers (claims, enqueues) get the write lock between chunks and the
// replayed jobs are claimable as soon as their chunk commits; it stops at
// the highest failed_jobs ID it saw when it started. On an error, the
// result counts the chunks committed before it.
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (res backend.ReplayResult, err error) {
	const op = "replay failed jobs"
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	if err := backend.ValidateFilter(params.Filter); err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	var step backend.ReplayResult
	woken := map[string]struct{}{}
	// The counts per queue and type of the transaction in progress, and
	// of those committed.
	stepTypes, byType := map[backend.TypeCount]int{}, map[backend.TypeCount]int{}
	replay := func(tx *sql.Tx, st *stmts, ids []int64) error {
		step = backend.ReplayResult{}
		clear(woken)
		clear(stepTypes)
		return replayTx(ctx, tx, st, ids, micros(b.now()), &step, woken, stepTypes)
	}
	committed := func() {
		res.Replayed += step.Replayed
		res.Skipped += step.Skipped
		for k, n := range stepTypes {
			byType[k] += n
		}
		b.hub.notify(woken)
	}
	defer func() { // res is returned with what committed, error or not
		for k, n := range byType {
			k.Count = n
			res.ByType = append(res.ByType, k)
		}
	}()
	if len(params.IDs) > 0 {
		jobIDs := slices.Compact(slices.Sorted(slices.Values(params.IDs)))
		err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
			ids, err := failedOfJobs(ctx, tx, jobIDs)
			if err != nil {
				return err
			}
			return replay(tx, st, ids)
		})
		if err != nil {
			return res, err
		}
		committed()
		return res, nil
	}
	where, args := failedWhere(params.Filter, params.Filter.Cutoff(b.now()), 0)
	last, err := b.failedMaxID(ctx, op)
	if err != nil {
		return res, err
	}
	return res, b.inChunks(ctx, op, where, args, last, replay, committed)
}

// failedOfJobs returns the failed_jobs ids of the failed rows of the jobs
// jobIDs, in ascending order (the order they failed), or ErrNotFound
// naming the first job that has none.
func failedOfJobs(ctx context.Context, tx *sql.Tx, jobIDs []int64) ([]int64, error) {
	ids := make([]int64, 0, len(jobIDs))
	for _, jobID := range jobIDs {
		var id int64
		switch err := tx.QueryRowContext(ctx, qFailedOfJob, jobID).Scan(&id); {
		case errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("failed job %d: %w", jobID, backend.ErrNotFound)
		case err != nil:
			return nil, err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// replayTx replays the failed jobs ids (failed_jobs ids) inside tx, counting them into res
// and byType and adding the queues of replayed jobs to woken.
func replayTx(ctx context.Context, tx *sql.Tx, st *stmts, ids []int64, now int64, res *backend.ReplayResult, woken map[string]struct{}, byType map[backend.TypeCount]int) error {
	replay, del, exists := tx.StmtContext(ctx, st.replay), tx.StmtContext(ctx, st.failedDelete), tx.StmtContext(ctx, st.failedExists)
	// A replayed task's job brings its task back (see wfTx.restore).
	wt := wfTx{ctx: ctx, tx: tx, st: st, now: fromMicros(now), woken: woken}
	for _, id := range ids {
		var queue, typ string
		var wf sql.NullInt64
		var jobID int64
		err := replay.QueryRowContext(ctx, id, now).Scan(&queue, &typ, &wf, &jobID)
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			switch err := exists.QueryRowContext(ctx, id).Scan(&one); {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("failed job %d: %w", id, backend.ErrNotFound)
			case err != nil:
				return err
			}
			res.Skipped++
			continue
		}
		if err != nil {
			return err
		}
		if _, err := del.ExecContext(ctx, id); err != nil {
			return err
		}
		if wf.Valid {
			// The job kept its ID, which its task still names.
			if err := wt.restore(jobID); err != nil {
				return err
			}
		}
		res.Replayed++
		woken[queue] = struct{}{}
		byType[backend.TypeCount{Queue: queue, Type: typ}]++
	}
	return nil
}

// FailedPurge implements backend.Backend. The failed rows of listed job
// IDs are deleted in one write transaction; job IDs without one are not
// counted and are not an error. A purge by filter works in chunks of at most backend.ChunkSize
// jobs, each in a write transaction of its own (see FailedReplay); with
// KeepNewest, the jobs to keep are chosen when it starts. On an error, the
// count includes the chunks committed before it.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	const op = "purge failed jobs"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	if err := backend.ValidatePurge(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateFilter(params.Filter); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	purged, step := 0, 0
	if len(params.IDs) > 0 {
		err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
			step = 0
			for _, id := range slices.Compact(slices.Sorted(slices.Values(params.IDs))) {
				r, err := tx.ExecContext(ctx, qFailedDeleteJob, id)
				if err != nil {
					return err
				}
				n, _ := r.RowsAffected()
				step += int(n)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if step > 0 {
			b.wakeKeyQueues() // a purged head no longer holds its key
		}
		return step, nil
	}
	where, args := failedWhere(params.Filter, params.Filter.Cutoff(b.now()), 0)
	var last int64
	if params.KeepNewest > 0 {
		// Everything below the oldest kept job goes.
		err := b.r.QueryRowContext(ctx, failedKeepSQL(where), append(slices.Clip(args), int64(params.KeepNewest-1))...).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		if err != nil {
			return 0, b.mapErr(ctx, op, err)
		}
		last--
	} else {
		var err error
		if last, err = b.failedMaxID(ctx, op); err != nil {
			return 0, err
		}
	}
	query := failedPurgeChunkSQL(where)
	err := b.inChunks(ctx, op, where, args, last, func(tx *sql.Tx, _ *stmts, ids []int64) error {
		r, err := tx.ExecContext(ctx, query, append(slices.Clip(args), ids[0], ids[len(ids)-1])...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		step = int(n)
		return err
	}, func() { purged += step })
	if purged > 0 {
		b.wakeKeyQueues() // a purged head no longer holds its key
	}
	return purged, err
}

// failedMaxID returns the highest failed_jobs ID now, 0 when there is none.
func (b *Backend) failedMaxID(ctx context.Context, op string) (int64, error) {
	var last int64
	if err := b.r.QueryRowContext(ctx, qFailedMaxID).Scan(&last); err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	return last, nil
}

// inChunks calls fn for each chunk of at most backend.ChunkSize failed jobs
// matching where (with args) whose IDs are at most last, lowest first, each
// chunk in a write transaction of its own, and committed after each commit.
//
// Between chunks the write lock is free. Writers of this process waiting
// for the write connection get it at once (database/sql hands a released
// connection to a waiting caller). Writers of other processes poll for the
// lock (SQLite's busy handler sleeps between tries, up to 100ms), so a
// chunk that followed the last at once would starve them, past their busy
// timeout on a large table: after each chunk the loop pauses for half the
// time the chunk held the lock, which keeps their waits to tens of
// milliseconds and costs a bulk operation a third of its speed at most.
func (b *Backend) inChunks(ctx context.Context, op, where string, args []any, last int64,
	fn func(tx *sql.Tx, st *stmts, ids []int64) error, committed func()) error {
	query := failedChunkSQL(where)
	qargs := append(slices.Clip(args), int64(0), last, int64(backend.ChunkSize))
	after := &qargs[len(args)]
	ids := make([]int64, 0, backend.ChunkSize)
	var pause *time.Timer
	defer func() {
		if pause != nil {
			pause.Stop()
		}
	}()
	for {
		var locked time.Time
		err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
			locked = time.Now()
			ids = ids[:0]
			rows, err := tx.QueryContext(ctx, query, qargs...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					_ = rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil || len(ids) == 0 {
				return err
			}
			return fn(tx, st, ids)
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		committed()
		if len(ids) < backend.ChunkSize {
			return nil
		}
		*after = ids[len(ids)-1]
		d := time.Since(locked) / 2
		if pause == nil {
			pause = time.NewTimer(d)
		} else {
			pause.Reset(d)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		case <-pause.C:
		}
	}
}

// scanFailed reads one row of failedColumns.
func scanFailed(s scanner) (*backend.FailedJob, error) {
	var (
		f                      backend.FailedJob
		attempts, maxAtt, prio int64
		uniqueKey, metadata    sql.NullString
		errs, task, key        sql.NullString
		created, failed        int64
		workflowID             sql.NullInt64
	)
	if err := s.Scan(&f.ID, &f.JobID, &f.Queue, &f.Type, &f.Payload, &attempts, &maxAtt, &prio,
		&f.Error, &uniqueKey, &created, &failed, &metadata, &errs, &workflowID, &task, &key, &f.Turn); err != nil {
		return nil, err
	}
	md, err := decodeMetadata(metadata.String, metadata.Valid)
	if err != nil {
		return nil, err
	}
	f.Metadata = md
	if f.Errors, err = attemptlog.Decode([]byte(errs.String)); err != nil {
		return nil, err
	}
	f.Attempts, f.MaxAttempts, f.Priority = int(attempts), int(maxAtt), int(prio)
	f.UniqueKey = uniqueKey.String
	f.WorkflowID, f.Task = workflowID.Int64, task.String
	f.Key = key.String
	f.CreatedAt = fromMicros(created)
	f.FailedAt = fromMicros(failed)
	return &f, nil
}
