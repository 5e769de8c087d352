package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

var _ backend.ScheduleStore = (*Backend)(nil)

// scheduleColumns is the column list scanSchedule reads.
const scheduleColumns = `name, spec, queue, type, created_at, registered_at, last_tick, last_enqueued_at, last_job_id`

// sqlScheduleUpsert: $1 name, $2 spec, $3 queue, $4 type. Inserts a
// schedule or refreshes its definition, keeping its last tick. The times
// are clock_timestamp(), when the row is written, not now(), when the
// transaction began (before any wait for a concurrent registration).
const sqlScheduleUpsert = `
INSERT INTO {schema}.schedules AS s (name, spec, queue, type, created_at, registered_at)
VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, queue = excluded.queue, type = excluded.type,
	registered_at = clock_timestamp()
RETURNING ` + scheduleColumns

// sqlScheduleTick is the compare-and-set of a schedule's last tick and the
// insert of the tick's job, in one statement (so one implicit transaction
// and one round trip). The UPDATE takes the schedule's row lock: a
// concurrent caller waits for it, then re-evaluates its WHERE against the
// committed last_tick (READ COMMITTED's re-check), so of callers with the
// same tick one advances and the others match no row and insert nothing.
// The job's id is drawn by the UPDATE so it is recorded with the tick.
//
//	$1 name, $2 tick, $3 queue, $4 type, $5 payload (JSON text),
//	$6 priority, $7 max_attempts, $8 delay_us, $9 run_at (NULL: now() + delay),
//	$10 metadata (JSON text; NULL: none), $11 key (NULL: none)
//
// Returns one row: (job id or NULL, due, schedule exists, stored last tick
// as of the statement's snapshot, which is older than $2 only when the
// tick was enqueued here or lost to a concurrent caller).
var sqlScheduleTick = `
WITH adv AS (
	UPDATE {schema}.schedules
	SET last_tick = $2, last_enqueued_at = now(), last_job_id = nextval('{schema}.jobs_id_seq')
	WHERE name = $1 AND (last_tick IS NULL OR last_tick < $2)
	RETURNING last_job_id
), ins AS (
	INSERT INTO {schema}.jobs AS j (id, queue, type, payload, priority, max_attempts, available_at, metadata, key, turn)
	SELECT a.last_job_id, $3, $4, $5::text::json, $6, $7,
	       coalesce($9::timestamptz, now() + $8::bigint * interval '1 microsecond'), $10::text::jsonb,
	       a.key, ` + keyTurnInline("a", "a.last_job_id") + `
	FROM (SELECT adv.last_job_id, $3::text AS queue, $11::text AS key FROM adv) a
	RETURNING j.id, j.available_at <= now() AS due
)
SELECT (SELECT id FROM ins), coalesce((SELECT due FROM ins), false),
       EXISTS (SELECT 1 FROM {schema}.schedules WHERE name = $1),
       (SELECT last_tick FROM {schema}.schedules WHERE name = $1)`

// sqlScheduleList: every schedule by name.
const sqlScheduleList = `SELECT ` + scheduleColumns + ` FROM {schema}.schedules ORDER BY name`

// scheduleSQL fills in the schema of one of the statements above. They
// run rarely (once per tick per process), so they are not kept prepared
// in the backend's queries.
func (b *Backend) scheduleSQL(stmt string) string {
	return strings.ReplaceAll(stmt, "{schema}", quoteIdent(b.opts.Schema))
}

// ScheduleUpsert implements backend.ScheduleStore: one transaction, rows
// locked in name order so processes registering together cannot deadlock.
func (b *Backend) ScheduleUpsert(ctx context.Context, defs []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	const op = "register schedules"
	for _, d := range defs {
		if err := backend.ValidateScheduleDef(d); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	out := make([]backend.ScheduleRow, len(defs))
	if len(defs) == 0 {
		return out, nil
	}
	order := make([]int, len(defs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(defs[i].Name, defs[j].Name) })
	stmt := b.scheduleSQL(sqlScheduleUpsert)
	err := b.do(ctx, op, func(ctx context.Context) error {
		return b.inTx(ctx, func(tx pgx.Tx) error {
			for _, i := range order {
				d := defs[i]
				rows, err := tx.Query(ctx, stmt, d.Name, d.Spec, d.Queue, d.Type)
				if err != nil {
					return err
				}
				r, err := pgx.CollectExactlyOneRow(rows, scanSchedule)
				if err != nil {
					return err
				}
				out[i] = r
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleTick implements backend.ScheduleStore with sqlScheduleTick.
func (b *Backend) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	op := fmt.Sprintf("enqueue tick of schedule %s", p.Name)
	if err := backend.ValidateScheduleTick(p); err != nil {
		return backend.ScheduleTickResult{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		id       pgtype.Int8
		due      bool
		exists   bool
		lastTick pgtype.Timestamptz
	)
	j := p.Job
	var metadata any // NULL
	if len(j.Metadata) > 0 {
		metadata = encodeMetadata(j.Metadata)
	}
	stmt := b.scheduleSQL(sqlScheduleTick)
	err := b.do(ctx, op, func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, stmt, p.Name, p.Tick, j.Queue, j.Type, string(j.Payload),
			int32(j.Priority), int32(j.MaxAttempts), micros(j.Delay),
			pgtype.Timestamptz{Time: j.RunAt, Valid: !j.RunAt.IsZero()}, metadata,
			pgtype.Text{String: j.Key, Valid: j.Key != ""},
		).Scan(&id, &due, &exists, &lastTick)
	})
	if err != nil {
		return backend.ScheduleTickResult{}, err
	}
	if !exists {
		return backend.ScheduleTickResult{}, fmt.Errorf("%s: %w (a scheduler registers it first)", op, backend.ErrNotFound)
	}
	if !id.Valid {
		res := backend.ScheduleTickResult{LastTick: p.Tick}
		// The snapshot may predate the concurrent advance that beat this
		// call; the stored tick is at least p.Tick then.
		if lastTick.Valid && lastTick.Time.After(p.Tick) {
			res.LastTick = lastTick.Time
		}
		return res, nil
	}
	if due {
		b.wake([]string{j.Queue})
	}
	return backend.ScheduleTickResult{Enqueued: true, JobID: id.Int64, LastTick: p.Tick}, nil
}

// ScheduleList implements backend.ScheduleStore.
func (b *Backend) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	var out []backend.ScheduleRow
	stmt := b.scheduleSQL(sqlScheduleList)
	err := b.do(ctx, "list schedules", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, stmt)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanSchedule)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(row pgx.CollectableRow) (backend.ScheduleRow, error) {
	var (
		s                backend.ScheduleRow
		lastTick, lastAt pgtype.Timestamptz
		lastID           pgtype.Int8
	)
	if err := row.Scan(&s.Name, &s.Spec, &s.Queue, &s.Type, &s.CreatedAt, &s.RegisteredAt, &lastTick, &lastAt, &lastID); err != nil {
		return s, err
	}
	if lastTick.Valid {
		s.LastTick = lastTick.Time
	}
	if lastAt.Valid {
		s.LastEnqueuedAt = lastAt.Time
	}
	s.LastJobID = lastID.Int64
	return s, nil
}
