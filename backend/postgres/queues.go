package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// The statements of queue control (backend.QueueController) live here,
// beside the only code that runs them, filled in by newQueries like those
// of queries.go.

// sqlQueueLock locks a limited queue's settings row for the rest of the
// claim's implicit transaction (the pgx batch), so claimers of the queue
// take turns: the next one's sqlClaimLimited, a statement of its own with
// a snapshot taken after the lock was granted, sees the jobs this one
// reserved. Without a row (the limits were just cleared) it locks nothing
// and the claim is unlimited.
//
//	$1 queue text
//
// Returns the row's queue, or no row.
const sqlQueueLock = `SELECT queue FROM {schema}.queue_settings WHERE queue = $1 FOR UPDATE`

// sqlClaimAllow is the claim's allowance for a limited queue, a CTE
// over s (its settings row and rate window) that sqlClaimLimited and
// sqlClaimKeyed share: min($2, concurrency - reserved jobs, rate_limit -
// claims in the window), 0 when paused.
const sqlClaimAllow = `allow AS (
	SELECT s.win,
	       CASE WHEN s.rate_window = s.win THEN s.rate_count ELSE 0 END AS used,
	       CASE WHEN s.paused THEN 0 ELSE greatest(0, least($2::int,
	            CASE WHEN s.concurrency > 0
	                 THEN s.concurrency - (SELECT count(*) FROM {schema}.jobs r
	                                       WHERE r.lease_until IS NOT NULL AND r.status IN ('reserved', 'cancelling') AND r.queue = $1)
	                 ELSE $2::int END,
	            CASE WHEN s.rate_limit > 0
	                 THEN s.rate_limit - CASE WHEN s.rate_window = s.win THEN s.rate_count ELSE 0 END
	                 ELSE $2::int END)) END AS n
	FROM s
),
`

// sqlClaimLimited reserves up to what the queue's limits allow of $2 due
// pending jobs of queue $1, and counts them in the current rate window.
// It must follow sqlQueueLock in the same batch.
//
//	$1 queue text, $2 max int, $3 lease_us bigint
//
// The allowance is min($2, concurrency - reserved jobs of the queue,
// rate_limit - claims in the current window), 0 when the queue is paused,
// $2 when it has no settings row. Its time is clock_timestamp(), read
// after the lock was granted, not the transaction's start (now()): a
// claimer that waited for the lock across a window's end counts in the
// window it claims in, and the window never moves back (greatest) should
// it still see an earlier time. Reserved jobs are counted through
// jobs_lease_idx (every held job: bounded by the workers' slots). Returns
// the claimed rows (jobColumns) in no particular order, their claim_token
// raised as sqlClaim raises it.
const sqlClaimLimited = `
WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
s AS (
	SELECT paused, concurrency, rate_limit, rate_count,
	       greatest(rate_window, CASE WHEN rate_limit > 0
	            THEN floor(extract(epoch FROM t.now) * 1000000)::bigint / rate_period_us
	            ELSE 0 END) AS win,
	       rate_window
	FROM {schema}.queue_settings, t WHERE queue = $1
),
` + sqlClaimAllow + `picked AS MATERIALIZED (
	SELECT id FROM {schema}.jobs
	WHERE status = 'pending' AND queue = $1 AND available_at <= (SELECT now FROM t)
	  AND (deadline IS NULL OR deadline >= (SELECT now FROM t))
	ORDER BY priority DESC, turn, available_at, id
	LIMIT (SELECT coalesce(max(n), $2::int) FROM allow)
	FOR UPDATE SKIP LOCKED
),
claimed AS (
	UPDATE {schema}.jobs j
	SET status = 'reserved',
	    attempts = j.attempts + 1,
	    claim_token = j.claim_token + 1,
	    reserved_at = t.now,
	    lease_until = t.now + $3::bigint * interval '1 microsecond'
	FROM picked, t
	WHERE j.id = picked.id
	RETURNING ` + claimedColumns + `
),
counted AS (
	UPDATE {schema}.queue_settings q
	SET rate_window = a.win, rate_count = a.used + (SELECT count(*) FROM claimed)
	FROM allow a
	WHERE q.queue = $1 AND q.rate_limit > 0
	RETURNING 1
)
SELECT * FROM claimed`

// sqlQueueCounted reads, after sqlClaimLimited in the same batch, what
// the claim left of the queue's limits: whether it is concurrency-limited
// or has key rules (its claimed jobs wake it when they end: the next job
// of their key, or a slot, may then go) and, when its rate window is
// spent, when the next one starts.
//
//	$1 queue text
//
// Returns one row (concurrency int, next_window_us bigint: 0 unless the
// window is spent), or no row when the queue has no settings.
const sqlQueueCounted = `
SELECT CASE WHEN key_limit > 0 OR key_ordered THEN greatest(concurrency, 1) ELSE concurrency END,
       CASE WHEN rate_limit > 0 AND rate_count >= rate_limit
            THEN (rate_window + 1) * rate_period_us ELSE 0 END
FROM {schema}.queue_settings WHERE queue = $1`

// sqlQueuePause sets a queue's paused flag, keeping its limits.
//
//	$1 queue text, $2 paused bool
//
// Returns nothing.
const sqlQueuePause = `
INSERT INTO {schema}.queue_settings (queue, paused) VALUES ($1, $2)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = now()`

// sqlQueueLimits replaces a queue's limits, keeping its paused flag, and
// starts the rate count afresh.
//
//	$1 queue text, $2 concurrency int, $3 rate_limit int, $4 rate_period_us bigint
//
// Returns nothing.
const sqlQueueLimits = `
INSERT INTO {schema}.queue_settings (queue, concurrency, rate_limit, rate_period_us) VALUES ($1, $2, $3, $4)
ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency, rate_limit = excluded.rate_limit,
	rate_period_us = excluded.rate_period_us, rate_window = 0, rate_count = 0, updated_at = now()`

// sqlQueuePrune deletes a queue's row once it neither pauses, limits nor
// has key rules, so the claim of a store without controls finds the table
// empty.
//
//	$1 queue text
//
// Returns nothing.
const sqlQueuePrune = `
DELETE FROM {schema}.queue_settings
WHERE queue = $1 AND NOT paused AND concurrency = 0 AND rate_limit = 0
  AND key_limit = 0 AND NOT key_ordered AND key_policy = ''`

// sqlQueueSettings lists every row. No parameters; returns (queue text,
// paused bool, concurrency int, rate_limit int, rate_period_us bigint,
// key_limit int, key_ordered bool, key_policy text).
const sqlQueueSettings = `
SELECT queue, paused, concurrency, rate_limit, rate_period_us, key_limit, key_ordered, key_policy
FROM {schema}.queue_settings`

// claimLimitedQueues claims from the limited queues among queues, in name
// order, while the claim has room (want minus the jobs already claimed):
// one batch per queue, one round trip each (see sqlQueueLock).
func (b *Backend) claimLimitedQueues(ctx context.Context, limited, keyed, queues []string, want int, lease time.Duration, jobs []*backend.JobRow) ([]*backend.JobRow, error) {
	var mine []string
	for _, q := range limited {
		if slices.Contains(queues, q) {
			mine = append(mine, q)
		}
	}
	slices.Sort(mine)
	for _, q := range slices.Compact(mine) {
		room := want - len(jobs)
		if room <= 0 {
			break
		}
		rows, err := b.claimLimited(ctx, q, slices.Contains(keyed, q), room, lease)
		if err != nil {
			return jobs, err
		}
		jobs = append(jobs, rows...)
	}
	return jobs, nil
}

// claimLimited claims up to room jobs of one limited queue, through
// sqlClaimKeyed when the queue has key rules.
func (b *Backend) claimLimited(ctx context.Context, queue string, keyed bool, room int, lease time.Duration) ([]*backend.JobRow, error) {
	var (
		rows        []*backend.JobRow
		concurrency int32
		nextUS      int64
		settings    bool
	)
	err := b.do(ctx, "claim jobs of limited queue "+queue, func(ctx context.Context) error {
		rows, settings = nil, false
		batch := &pgx.Batch{}
		if keyed {
			batch.Queue(b.kq.claimPlan)
		} else {
			batch.Queue(b.q.claimPlan)
		}
		batch.Queue(b.q.queueLock, queue)
		if keyed {
			batch.Queue(b.kq.claimKeyed, queue, room, micros(lease), keyPageFirst(room), keyPageNext)
		} else {
			batch.Queue(b.q.claimLimited, queue, room, micros(lease))
		}
		batch.Queue(b.q.queueCounted, queue)
		br := b.pool.SendBatch(ctx, batch)
		var limited, keyedNow []string
		var set [3]string
		dst := []any{&set[0], &set[1]}
		if keyed {
			dst = append(dst, &set[2]) // sqlClaimKeyedPlan's plan_cache_mode
		}
		err := br.QueryRow().Scan(append(dst, &limited, &keyedNow)...)
		if err == nil {
			b.keyed.Store(&keyedNow)
			_, err = br.Exec()
		}
		if err == nil {
			var r pgx.Rows
			if r, err = br.Query(); err == nil {
				rows, err = pgx.CollectRows(r, scanJob)
			}
		}
		if err == nil {
			err = br.QueryRow().Scan(&concurrency, &nextUS)
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			} else if err == nil {
				settings = true
			}
		}
		// Close reads the commit's outcome: rows read before it failed
		// were never claimed.
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if settings && concurrency > 0 {
		b.limits.Claimed(queue, rows)
	}
	if nextUS > 0 {
		b.limits.WakeAt(queue, time.UnixMicro(nextUS))
	}
	return rows, nil
}

// QueuePause implements backend.QueueController. Resuming wakes idle
// workers everywhere at once (this process's subscribers and, through
// NOTIFY, every other process's).
func (b *Backend) QueuePause(ctx context.Context, queue string, paused bool) error {
	op := "pause queue " + queue
	if !paused {
		op = "resume queue " + queue
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := b.settingsWrite(ctx, op, queue, b.q.queuePause, queue, paused); err != nil {
		return err
	}
	if !paused {
		b.wake([]string{queue})
	}
	return nil
}

// QueueSetLimits implements backend.QueueController. New limits wake idle
// workers everywhere, since they may allow more than the old ones.
func (b *Backend) QueueSetLimits(ctx context.Context, queue string, limits backend.QueueLimits) error {
	op := "set limits of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateQueueLimits(limits); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := b.settingsWrite(ctx, op, queue, b.q.queueLimits, queue, int32(limits.Concurrency), int32(limits.Rate), micros(limits.RatePeriod))
	if err != nil {
		return err
	}
	b.wake([]string{queue})
	return nil
}

// settingsWrite runs one settings statement and the prune of the queue's
// row in one batch (one implicit transaction).
func (b *Backend) settingsWrite(ctx context.Context, op, queue, stmt string, args ...any) error {
	return b.do(ctx, op, func(ctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue(stmt, args...)
		batch.Queue(b.q.queuePrune, queue)
		return b.pool.SendBatch(ctx, batch).Close()
	})
}

// QueueSettingsList implements backend.QueueController.
func (b *Backend) QueueSettingsList(ctx context.Context) ([]backend.QueueSettings, error) {
	var out []backend.QueueSettings
	err := b.do(ctx, "list queue settings", func(ctx context.Context) error {
		out = nil
		rows, err := b.pool.Query(ctx, b.q.queueSettings)
		if err != nil {
			return err
		}
		var s backend.QueueSettings
		var conc, rate, keyLimit int32
		var periodUS int64
		var policy string
		_, err = pgx.ForEachRow(rows, []any{&s.Queue, &s.Paused, &conc, &rate, &periodUS, &keyLimit, &s.Keys.Ordered, &policy}, func() error {
			s.Concurrency, s.Rate = int(conc), int(rate)
			s.Keys.Limit, s.Keys.OnFailure = int(keyLimit), backend.KeyPolicy(policy)
			s.RatePeriod = time.Duration(periodUS) * time.Microsecond
			out = append(out, s)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// By byte order, as every backend lists: the database's collation may
	// order names otherwise.
	slices.SortFunc(out, func(x, y backend.QueueSettings) int { return strings.Compare(x.Queue, y.Queue) })
	return out, nil
}
