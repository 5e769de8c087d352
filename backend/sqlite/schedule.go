package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

var _ backend.ScheduleStore = (*Backend)(nil)

// scheduleColumns is the column list scanSchedule reads.
const scheduleColumns = `name, spec, queue, type, created_at, registered_at, last_tick, last_enqueued_at, last_job_id`

// qScheduleUpsert: ?1 name, ?2 spec, ?3 queue, ?4 type, ?5 now. Inserts a
// schedule or refreshes its definition, keeping its last tick.
const qScheduleUpsert = `INSERT INTO schedules (name, spec, queue, type, created_at, registered_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?5)
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, queue = excluded.queue, type = excluded.type,
	registered_at = excluded.registered_at
RETURNING ` + scheduleColumns

// qScheduleAdvance: ?1 name, ?2 tick, ?3 now. The compare-and-set: moves
// last_tick forward to ?2 only when it is unset or earlier. The write
// transaction holds the file's write lock, so no other process reads the
// old value in between.
const qScheduleAdvance = `UPDATE schedules SET last_tick = ?2, last_enqueued_at = ?3, last_job_id = NULL
WHERE name = ?1 AND (last_tick IS NULL OR last_tick < ?2)`

// qScheduleSetJob: ?1 name, ?2 job id. Records the job of the tick just
// advanced, in the same transaction.
const qScheduleSetJob = `UPDATE schedules SET last_job_id = ?2 WHERE name = ?1`

// qScheduleLastTick: ?1 name. The stored last tick (NULL when none).
const qScheduleLastTick = `SELECT last_tick FROM schedules WHERE name = ?1`

// qScheduleList: no parameters. Every schedule by name.
const qScheduleList = `SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name`

// ScheduleUpsert implements backend.ScheduleStore in one write transaction.
func (b *Backend) ScheduleUpsert(ctx context.Context, defs []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	const op = "register schedules"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	for _, d := range defs {
		if err := backend.ValidateScheduleDef(d); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	out := make([]backend.ScheduleRow, len(defs))
	if len(defs) == 0 {
		return out, nil
	}
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		// Read under the write lock: a schedule is registered when this
		// commits, not when the call began waiting for the lock (seconds,
		// with several processes starting on one file), and its first
		// tick is the first after that.
		now := micros(b.now())
		for i, d := range defs {
			r, err := scanSchedule(tx.QueryRowContext(ctx, qScheduleUpsert, d.Name, d.Spec, d.Queue, d.Type, now))
			if err != nil {
				return err
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleTick implements backend.ScheduleStore: the compare-and-set of
// last_tick, the job's insert and the record of its ID are one write
// transaction.
func (b *Backend) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	op := fmt.Sprintf("enqueue tick of schedule %s", p.Name)
	var res backend.ScheduleTickResult
	if err := b.checkOpen(op); err != nil {
		return res, err
	}
	if err := backend.ValidateScheduleTick(p); err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	now := b.now()
	tick := micros(p.Tick)
	err := b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		r, err := tx.ExecContext(ctx, qScheduleAdvance, p.Name, tick, micros(now))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			var last sql.NullInt64
			switch err := tx.QueryRowContext(ctx, qScheduleLastTick, p.Name).Scan(&last); {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("schedule %s: %w (a scheduler registers it first)", p.Name, backend.ErrNotFound)
			case err != nil:
				return err
			}
			res.LastTick = fromMicros(last.Int64)
			return nil
		}
		results := make([]backend.InsertResult, 1)
		if err := insertTx(ctx, tx, st, []backend.InsertParams{p.Job}, results, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qScheduleSetJob, p.Name, results[0].ID); err != nil {
			return err
		}
		res = backend.ScheduleTickResult{Enqueued: true, JobID: results[0].ID, LastTick: fromMicros(tick)}
		return nil
	})
	if err != nil {
		return backend.ScheduleTickResult{}, err
	}
	if res.Enqueued {
		b.hub.notify(map[string]struct{}{p.Job.Queue: {}})
	}
	return res, nil
}

// ScheduleList implements backend.ScheduleStore on the read connections.
func (b *Backend) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	const op = "list schedules"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	var out []backend.ScheduleRow
	err := b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, qScheduleList)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(row interface{ Scan(...any) error }) (backend.ScheduleRow, error) {
	var (
		r                        backend.ScheduleRow
		created, registered      int64
		lastTick, lastAt, lastID sql.NullInt64
	)
	if err := row.Scan(&r.Name, &r.Spec, &r.Queue, &r.Type, &created, &registered, &lastTick, &lastAt, &lastID); err != nil {
		return r, err
	}
	r.CreatedAt, r.RegisteredAt = fromMicros(created), fromMicros(registered)
	r.LastTick = optMicros(lastTick)
	r.LastEnqueuedAt = optMicros(lastAt)
	r.LastJobID = lastID.Int64
	return r, nil
}

// optMicros reads a nullable time column: zero for NULL.
func optMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}
