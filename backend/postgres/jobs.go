package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// JobClaim implements backend.Backend with one statement that commits at
// once (see sqlClaim): the claimed rows carry their lease and no
// transaction stays open while handlers run. Rows come back in claim order.
// sqlClaimPlan goes with it in the same batch, one round trip.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	var jobs []*backend.JobRow
	var limited []string // limited queues: sqlClaim skips them
	err := b.do(ctx, "claim jobs", func(ctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue(b.q.claimPlan)
		batch.Queue(b.q.claim, params.Queues, params.Max, micros(params.Lease))
		br := b.pool.SendBatch(ctx, batch)
		var planA, planB string
		err := br.QueryRow().Scan(&planA, &planB, &limited)
		if err == nil {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				jobs, err = pgx.CollectRows(rows, scanJob)
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
	if len(limited) > 0 && len(jobs) < params.Max {
		// Jobs the first statement claimed are reserved and must run: if
		// the limited queues' claim fails, they are returned without its
		// error, and the next claim tries those queues again.
		more, err := b.claimLimitedQueues(ctx, limited, params.Queues, params.Max, params.Lease, jobs)
		if err != nil && len(more) == 0 {
			return nil, err
		}
		jobs = more
	}
	sort.Slice(jobs, func(i, j int) bool {
		if jobs[i].Priority != jobs[j].Priority {
			return jobs[i].Priority > jobs[j].Priority
		}
		return jobs[i].ID < jobs[j].ID
	})
	return jobs, nil
}

// Outcome kinds as sqlComplete spells them.
const (
	kindDone  = 1
	kindRetry = 2
	kindFail  = 3
)

// kindCode maps an outcome kind to sqlComplete's code, 0 when unknown.
func kindCode(k backend.OutcomeKind) int32 {
	switch k {
	case backend.OutcomeDone:
		return kindDone
	case backend.OutcomeRetry:
		return kindRetry
	case backend.OutcomeFail:
		return kindFail
	}
	return 0
}

// JobComplete implements backend.Backend: the whole batch is one statement
// (see sqlComplete), one round trip and one commit however many outcomes it
// carries. A ref repeated within the batch applies once; its repeats are
// reported stale. Error texts are stored as backend.PrepareOutcomes
// normalises them, so no text the server would refuse (invalid UTF-8, a
// NUL byte) reaches it; should the server refuse a batch's data anyway,
// the error wraps backend.ErrInvalidInput (see mapError) and the runtime
// isolates the outcome by splitting the batch.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	n := len(params.Outcomes)
	if n == 0 {
		return backend.CompleteResult{}, nil
	}
	outcomes, err := backend.PrepareOutcomes(params.Outcomes)
	if err != nil {
		return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w", err)
	}
	ids := make([]int64, 0, n)
	attempts := make([]int32, 0, n)
	kinds := make([]int32, 0, n)
	delays := make([]int64, 0, n)
	errs := make([]string, 0, n)
	seen := make(map[backend.JobRef]bool, n)
	var repeats []backend.JobRef
	stmt := b.q.complete
	for _, o := range outcomes {
		code := kindCode(o.Kind)
		if o.Kind == backend.OutcomeDone && o.Keep {
			code, stmt = kindDoneKeep, b.rq.completeKeep
		}
		if seen[o.Ref] {
			repeats = append(repeats, o.Ref)
			continue
		}
		seen[o.Ref] = true
		ids = append(ids, o.Ref.ID)
		attempts = append(attempts, int32(o.Ref.Attempt))
		kinds = append(kinds, code)
		delays = append(delays, micros(o.RetryDelay))
		errs = append(errs, o.Error)
	}
	var appliedIDs []int64
	var appliedAttempts []int32
	var due []string
	err = b.do(ctx, "complete jobs", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, stmt, ids, attempts, kinds, delays, errs).
			Scan(&appliedIDs, &appliedAttempts, &due)
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	b.wake(due)
	b.limits.EndedOutcomes(outcomes)
	applied := make(map[backend.JobRef]bool, len(appliedIDs))
	for i, id := range appliedIDs {
		applied[backend.JobRef{ID: id, Attempt: int(appliedAttempts[i])}] = true
	}
	var res backend.CompleteResult
	for _, o := range outcomes {
		if !seen[o.Ref] {
			continue
		}
		delete(seen, o.Ref) // later repeats are in repeats already
		if !applied[o.Ref] {
			res.Stale = append(res.Stale, o.Ref)
		}
	}
	if len(res.Stale) > 0 {
		// Refused outcomes of cancelling attempts end them cancelled.
		cancelled, err := b.finishCancelled(ctx, res.Stale)
		if err != nil {
			return backend.CompleteResult{}, err
		}
		if len(cancelled) > 0 {
			stale := res.Stale[:0]
			for _, r := range res.Stale {
				if cancelled[r] {
					res.Cancelled = append(res.Cancelled, r)
				} else {
					stale = append(stale, r)
				}
			}
			res.Stale = stale
		}
	}
	res.Stale = append(res.Stale, repeats...)
	return res, nil
}

// JobExtendLease implements backend.Backend in one statement.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	if params.Lease <= 0 {
		return nil, fmt.Errorf("extend leases: %w", &backend.InputError{Field: "lease", Reason: fmt.Sprintf("%s: must be positive", params.Lease)})
	}
	if len(params.Refs) == 0 {
		return nil, nil
	}
	ids, attempts := refArrays(params.Refs)
	kept := make(map[backend.JobRef]bool, len(params.Refs))
	err := b.do(ctx, "extend leases", func(ctx context.Context) error {
		clear(kept)
		rows, err := b.pool.Query(ctx, b.q.extendLease, ids, attempts, micros(params.Lease))
		if err != nil {
			return err
		}
		var ref backend.JobRef
		_, err = pgx.ForEachRow(rows, []any{&ref.ID, &ref.Attempt}, func() error {
			kept[ref] = true
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	var lost []backend.JobRef
	for _, r := range params.Refs {
		if !kept[r] {
			lost = append(lost, r)
		}
	}
	return lost, nil
}

// JobRelease implements backend.Backend in one statement (see sqlRelease):
// free releases, counted ones and moves to failed_jobs alike. Jobs back in
// pending wake subscribers of their queues.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	if len(refs) == 0 {
		return backend.CompleteResult{}, nil
	}
	ids, attempts := refArrays(refs)
	var matchedIDs []int64
	var matchedAttempts []int32
	var due []string
	err := b.do(ctx, "release jobs", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.q.release, ids, attempts, int32(backend.MaxFreeReleases), backend.ReleasedError).
			Scan(&matchedIDs, &matchedAttempts, &due)
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	b.wake(due)
	b.limits.Ended(refs)
	var res backend.CompleteResult
	if len(matchedIDs) == len(refs) {
		return res, nil
	}
	// The others are stale, or attempts whose cancel was requested: those
	// end cancelled. Matched by (ID, attempt): a stale attempt of a job
	// whose current attempt was released in the same call stays stale.
	released := make(map[backend.JobRef]bool, len(matchedIDs))
	for i, id := range matchedIDs {
		released[backend.JobRef{ID: id, Attempt: int(matchedAttempts[i])}] = true
	}
	var rest []backend.JobRef
	for _, r := range refs {
		if !released[r] {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		return res, nil
	}
	cancelled, err := b.finishCancelled(ctx, rest)
	if err != nil {
		return backend.CompleteResult{}, err
	}
	for _, r := range rest {
		if cancelled[r] {
			res.Cancelled = append(res.Cancelled, r)
		} else {
			res.Stale = append(res.Stale, r)
		}
	}
	return res, nil
}

// LeaseSweep implements backend.Backend in one statement (see sqlSweep);
// concurrent sweepers skip each other's rows.
func (b *Backend) LeaseSweep(ctx context.Context, params backend.SweepParams) (backend.SweepResult, error) {
	limit, err := backend.PageLimit(params.Limit, backend.DefaultSweepLimit)
	if err != nil {
		return backend.SweepResult{}, fmt.Errorf("sweep leases: %w", err)
	}
	var res backend.SweepResult
	// The expired leases and the cancelled jobs' ends go in one round
	// trip: the sweep runs every few seconds in every worker.
	err = b.do(ctx, "sweep leases", func(ctx context.Context) error {
		res = backend.SweepResult{}
		batch := &pgx.Batch{}
		batch.Queue(b.q.sweep, limit)
		batch.Queue(b.rq.sweepCancelled, limit)
		br := b.pool.SendBatch(ctx, batch)
		rows, err := br.Query()
		if err == nil {
			var j backend.SweptJob
			_, err = pgx.ForEachRow(rows, []any{&j.Ref.ID, &j.Ref.Attempt, &j.Queue, &j.Type, &j.Failed}, func() error {
				res.Jobs = append(res.Jobs, j)
				return nil
			})
		}
		if err == nil {
			err = br.QueryRow().Scan(&res.Cancelled)
		}
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return backend.SweepResult{}, err
	}
	var due []string
	seen := map[string]bool{}
	for _, j := range res.Jobs {
		if j.Failed {
			res.Failed++
			continue
		}
		res.Rescued++
		if !seen[j.Queue] {
			seen[j.Queue] = true
			due = append(due, j.Queue)
		}
	}
	b.wake(due)
	return res, nil
}

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	return getOne(ctx, b, fmt.Sprintf("get job %d", id), b.q.jobGet, id, scanJob)
}

// getOne runs a by-id query that returns at most one row, scanning it with
// scan; no row is backend.ErrNotFound.
func getOne[T any](ctx context.Context, b *Backend, op, sql string, id int64, scan pgx.RowToFunc[T]) (T, error) {
	var row T
	err := b.do(ctx, op, func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, sql, id)
		if err != nil {
			return err
		}
		row, err = pgx.CollectExactlyOneRow(rows, scan)
		if errors.Is(err, pgx.ErrNoRows) {
			return backend.ErrNotFound
		}
		return err
	})
	return row, err
}

// QueueStats implements backend.Backend. It counts every row, so it costs a
// scan of both tables: an operator's call, not a hot path.
func (b *Backend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	var stats []backend.QueueStats
	err := b.do(ctx, "queue stats", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, b.q.queueStats)
		if err != nil {
			return err
		}
		stats, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (backend.QueueStats, error) {
			var s backend.QueueStats
			var oldest pgtype.Timestamptz
			err := row.Scan(&s.Queue, &s.Pending, &s.Scheduled, &s.Reserved, &s.Failed, &oldest)
			if oldest.Valid {
				s.OldestDue = oldest.Time
			}
			return s, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return stats, nil
}

// scanJob reads one row of jobColumns.
func scanJob(row pgx.CollectableRow) (*backend.JobRow, error) {
	var (
		j                      backend.JobRow
		status                 string
		reservedAt, leaseUntil pgtype.Timestamptz
		lastError, uniqueKey   pgtype.Text
		metadata               []byte
	)
	err := row.Scan(&j.ID, &j.Queue, &j.Type, &j.Payload, &j.Attempts, &j.MaxAttempts, &j.Priority,
		&status, &j.AvailableAt, &reservedAt, &leaseUntil, &j.CreatedAt, &lastError, &uniqueKey,
		&j.Releases, &metadata)
	if err != nil {
		return nil, err
	}
	if j.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	j.Status = backend.Status(status)
	if j.Status != backend.StatusPending && j.Status != backend.StatusReserved && j.Status != backend.StatusCancelling {
		// Nothing in the schema stops another writer (see migration 003).
		return nil, fmt.Errorf("job %d has status %q: jobq writes only %q or %q", j.ID, status, backend.StatusPending, backend.StatusReserved)
	}
	j.ReservedAt = reservedAt.Time
	j.LeaseUntil = leaseUntil.Time
	j.LastError = lastError.String
	j.UniqueKey = uniqueKey.String
	return &j, nil
}

// refArrays splits refs into the parallel arrays the statements take.
func refArrays(refs []backend.JobRef) ([]int64, []int32) {
	ids := make([]int64, len(refs))
	attempts := make([]int32, len(refs))
	for i, r := range refs {
		ids[i], attempts[i] = r.ID, int32(r.Attempt)
	}
	return ids, attempts
}

// micros converts a duration to the whole microseconds the statements take,
// rounding up so a positive lease or delay never becomes zero.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
