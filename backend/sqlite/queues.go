package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// The statements of queue control (backend.QueueController) live here
// rather than in queries.go, beside the only code that runs them; the
// headers follow queries.go's convention.

// qQueueSettings: no parameters. Returns queue, paused, concurrency,
// rate_limit, rate_period (µs), rate_window, rate_count, key_limit,
// key_ordered and key_policy of every paused or limited queue or one with
// key rules. Read inside every claim: the table holds a row per
// such queue only, so on a store that uses none it reads nothing.
const qQueueSettings = `SELECT queue, paused, concurrency, rate_limit, rate_period, rate_window, rate_count,
	key_limit, key_ordered, key_policy FROM queue_settings`

// qQueueReserved: ?1 queue. Returns how many of the queue's jobs are
// reserved. It walks jobs_lease (every reserved job, bounded by the
// workers' slots); only claims of a concurrency-limited queue run it.
const qQueueReserved = `SELECT count(*) FROM jobs WHERE status = 'reserved' AND queue = ?1`

// qQueueRateUpdate: ?1 queue, ?2 rate_window, ?3 rate_count. Records the
// claims counted in the current rate window.
const qQueueRateUpdate = `UPDATE queue_settings SET rate_window = ?2, rate_count = ?3 WHERE queue = ?1`

// qQueuePause: ?1 queue, ?2 paused (0 or 1), ?3 updated_at. Sets the
// paused flag, creating the queue's row if needed, keeping its limits.
const qQueuePause = `INSERT INTO queue_settings (queue, paused, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`

// qQueueLimits: ?1 queue, ?2 concurrency, ?3 rate_limit, ?4 rate_period
// (µs), ?5 updated_at. Replaces the limits, keeping the paused flag, and
// starts the rate count afresh.
const qQueueLimits = `INSERT INTO queue_settings (queue, concurrency, rate_limit, rate_period, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency, rate_limit = excluded.rate_limit,
	rate_period = excluded.rate_period, rate_window = 0, rate_count = 0, updated_at = excluded.updated_at`

// qQueuePrune: ?1 queue. Deletes the queue's row when it neither pauses
// nor limits anything and has no key rules, so claims of a store without
// controls stay on the unlimited path.
const qQueuePrune = `DELETE FROM queue_settings WHERE queue = ?1 AND paused = 0 AND concurrency = 0 AND rate_limit = 0
	AND key_limit = 0 AND key_ordered = 0 AND key_policy = ''`

// qQueueSettingsList: no parameters. Returns queue, paused, concurrency,
// rate_limit, rate_period (µs), key_limit, key_ordered and key_policy of
// every row, by queue name.
const qQueueSettingsList = `SELECT queue, paused, concurrency, rate_limit, rate_period, key_limit, key_ordered, key_policy
FROM queue_settings ORDER BY queue`

// settingsRow is one queue's row as a claim reads it.
type settingsRow struct {
	backend.QueueSettings
	window, count int64 // the rate window and the claims counted in it
}

// readSettings reads every row of queue_settings through stmt.
func readSettings(ctx context.Context, stmt *sql.Stmt) (map[string]settingsRow, error) {
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out map[string]settingsRow
	for rows.Next() {
		var s settingsRow
		var period int64
		var policy string
		if err := rows.Scan(&s.Queue, &s.Paused, &s.Concurrency, &s.Rate, &period, &s.window, &s.count,
			&s.Keys.Limit, &s.Keys.Ordered, &policy); err != nil {
			return nil, err
		}
		s.Keys.OnFailure = backend.KeyPolicy(policy)
		s.RatePeriod = time.Duration(period) * time.Microsecond
		if out == nil {
			out = map[string]settingsRow{}
		}
		out[s.Queue] = s
	}
	return out, rows.Err()
}

// limitedClaim is what a claim took from one limited queue: the rows to
// track (concurrency-limited queues only) and, when its rate window ran
// out, when the next window starts.
type limitedClaim struct {
	queue string
	rows  []*backend.JobRow
	next  time.Time
}

// claimControlled is the claim when some queue is paused or limited or
// has key rules, run inside the claim's write transaction (whose lock
// serializes every claimer of the file, so no two can both see a free
// slot): paused queues are skipped, the unlimited ones claimed by one
// statement, then each limited queue up to what its limits and its key
// rules allow now (see claimKeyed). base holds the claim's reserved_at and
// lease_until arguments.
func (b *Backend) claimControlled(ctx context.Context, tx *sql.Tx, st *stmts, settings map[string]settingsRow,
	queues []string, want int, now time.Time, base []any, claimed *backend.JobRow, jobs []*backend.JobRow,
) ([]*backend.JobRow, []limitedClaim, error) {
	var free, limited []string
	for _, q := range queues {
		s, ok := settings[q]
		switch {
		case !ok || !s.Paused && s.QueueLimits.IsZero() && s.Keys.IsZero():
			free = append(free, q)
		case !s.Paused:
			limited = append(limited, q)
		}
	}
	if len(free) > 0 {
		stmt, err := st.claimStmtTx(ctx, tx, len(free))
		if err != nil {
			return jobs, nil, err
		}
		defer stmt.Close()
		args := append(append(make([]any, 0, 3+len(free)), base...), int64(want))
		for _, q := range free {
			args = append(args, q)
		}
		if jobs, err = claimRows(ctx, stmt, args, claimed, jobs); err != nil {
			return jobs, nil, err
		}
	}
	// The clock is read again now that the write lock is held: a claim
	// that waited for the lock across a window's end must count in the
	// window it claims in, not in the one it started in. The limited
	// queues' jobs carry that time as their reservation.
	if len(limited) > 0 {
		now = b.now()
		lease := fromMicros(base[1].(int64)).Sub(fromMicros(base[0].(int64)))
		base = []any{micros(now), micros(now.Add(lease))}
		claimed = &backend.JobRow{ReservedAt: fromMicros(base[0].(int64)), LeaseUntil: fromMicros(base[1].(int64))}
	}
	var out []limitedClaim
	for _, q := range limited {
		room := want - len(jobs)
		if room <= 0 {
			break
		}
		s := settings[q]
		var reserved, used int64
		if s.Concurrency > 0 {
			if err := tx.StmtContext(ctx, st.reservedCount).QueryRowContext(ctx, q).Scan(&reserved); err != nil {
				return jobs, nil, err
			}
		}
		var window int64
		var next time.Time
		if s.Rate > 0 {
			window, next = backend.RateWindow(now, s.RatePeriod)
			switch {
			case s.window == window:
				used = s.count
			case s.window > window:
				// Another process's clock is ahead: count in its window
				// rather than move the count back to an earlier one.
				window, used = s.window, s.count
			}
		}
		allow := s.Allowance(room, reserved, used)
		var got []*backend.JobRow
		if allow > 0 && !s.Keys.IsZero() {
			// Key rules: the claim takes only what they allow.
			n := len(jobs)
			var err error
			if jobs, err = claimKeyed(ctx, tx, st, q, s.Keys, allow, base, claimed, jobs); err != nil {
				return jobs, nil, err
			}
			got = jobs[n:len(jobs):len(jobs)]
		} else if allow > 0 {
			stmt, err := st.claimStmtTx(ctx, tx, 1)
			if err != nil {
				return jobs, nil, err
			}
			n := len(jobs)
			jobs, err = claimRows(ctx, stmt, append(append([]any{}, base...), int64(allow), q), claimed, jobs)
			stmt.Close()
			if err != nil {
				return jobs, nil, err
			}
			got = jobs[n:len(jobs):len(jobs)]
		}
		l := limitedClaim{queue: q}
		if s.Concurrency > 0 {
			l.rows = got
		}
		if s.Rate > 0 {
			if len(got) > 0 || used != s.count {
				if _, err := tx.StmtContext(ctx, st.rateUpdate).ExecContext(ctx, q, window, used+int64(len(got))); err != nil {
					return jobs, nil, err
				}
			}
			if used+int64(len(got)) >= int64(s.Rate) {
				l.next = next
			}
		}
		out = append(out, l)
	}
	return jobs, out, nil
}

// QueuePause implements backend.QueueController. Resuming wakes this
// process's idle workers at once; workers of other processes sharing the
// file are woken by their watcher, which sees the commit (notify.go).
func (b *Backend) QueuePause(ctx context.Context, queue string, paused bool) error {
	op := "pause queue " + queue
	if !paused {
		op = "resume queue " + queue
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		if _, err := tx.ExecContext(ctx, qQueuePause, queue, paused, micros(b.now())); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, qQueuePrune, queue)
		return err
	})
	if err != nil {
		return err
	}
	if !paused {
		b.hub.notify(map[string]struct{}{queue: {}})
	}
	return nil
}

// QueueSetLimits implements backend.QueueController. New limits wake this
// process's idle workers, since they may allow more than the old ones.
func (b *Backend) QueueSetLimits(ctx context.Context, queue string, limits backend.QueueLimits) error {
	op := "set limits of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateQueueLimits(limits); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		if _, err := tx.ExecContext(ctx, qQueueLimits, queue, limits.Concurrency, limits.Rate,
			limits.RatePeriod.Microseconds(), micros(b.now())); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, qQueuePrune, queue)
		return err
	})
	if err != nil {
		return err
	}
	b.hub.notify(map[string]struct{}{queue: {}})
	return nil
}

// QueueSettingsList implements backend.QueueController.
func (b *Backend) QueueSettingsList(ctx context.Context) ([]backend.QueueSettings, error) {
	const op = "list queue settings"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	rows, err := b.r.QueryContext(ctx, qQueueSettingsList)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	defer rows.Close()
	var out []backend.QueueSettings
	for rows.Next() {
		var s backend.QueueSettings
		var period int64
		var policy string
		if err := rows.Scan(&s.Queue, &s.Paused, &s.Concurrency, &s.Rate, &period, &s.Keys.Limit, &s.Keys.Ordered, &policy); err != nil {
			return nil, b.mapErr(ctx, op, err)
		}
		s.Keys.OnFailure = backend.KeyPolicy(policy)
		s.RatePeriod = time.Duration(period) * time.Microsecond
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	return out, nil
}
