package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/attemptlog"
)

// JobClaim implements backend.Backend with one statement that commits at
// once (see sqlClaim): the claimed rows carry their lease and no
// transaction stays open while handlers run. Rows come back in claim order.
// sqlClaimPlan goes with it in the same batch, one round trip.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if b.allKeyed(params.Queues) {
		return b.claimKeyedOnly(ctx, params)
	}
	var jobs []*backend.JobRow
	var limited []string // limited queues: sqlClaim skips them
	var keyed []string   // those of them with key rules
	err := b.do(ctx, "claim jobs", func(ctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue(b.q.claimPlan)
		batch.Queue(b.q.claim, params.Queues, params.Max, micros(params.Lease))
		br := b.pool.SendBatch(ctx, batch)
		var planA, planB string
		err := br.QueryRow().Scan(&planA, &planB, &limited, &keyed)
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
	b.keyed.Store(&keyed)
	if len(limited) > 0 && len(jobs) < params.Max {
		// Jobs the first statement claimed are reserved and must run: if
		// the limited queues' claim fails, they are returned without its
		// error, and the next claim tries those queues again.
		more, err := b.claimLimitedQueues(ctx, limited, keyed, params.Queues, params.Max, params.Lease, jobs)
		if err != nil && len(more) == 0 {
			return nil, err
		}
		jobs = more
	}
	// RETURNING yields rows in no defined order: put them in claim order.
	backend.SortClaimOrder(jobs)
	return jobs, nil
}

// allKeyed tells whether every one of queues had key rules at the last
// claim (see Backend.keyed).
func (b *Backend) allKeyed(queues []string) bool {
	keyed := b.keyed.Load()
	if keyed == nil {
		return false
	}
	for _, q := range queues {
		if !slices.Contains(*keyed, q) {
			return false
		}
	}
	return true
}

// claimKeyedOnly is JobClaim for queues that all had key rules at the
// last claim: sqlClaim would skip every one of them, so only their own
// batches run (claimLimitedQueues), one round trip fewer per claim. Each
// batch claims through sqlClaimKeyed, which applies whatever rules the
// queue's settings row holds under its lock (none, when the rules were
// cleared since: the claim is then unlimited), so a list out of date
// costs speed, never a rule; the batch reads the lists afresh for the
// next claim.
func (b *Backend) claimKeyedOnly(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	jobs, err := b.claimLimitedQueues(ctx, params.Queues, params.Queues, params.Queues, params.Max, params.Lease, nil)
	if err != nil && len(jobs) == 0 {
		return nil, err
	}
	backend.SortClaimOrder(jobs)
	return jobs, nil
}

// Outcome kinds as sqlComplete spells them.
const (
	kindDone  = 1
	kindRetry = 2
	kindFail  = 3
	kindDefer = 7 // 4 to 6 are kindDoneKeep and sqlTaskSettle's
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
	case backend.OutcomeDefer:
		return kindDefer
	}
	return 0
}

// JobComplete implements backend.Backend: the whole batch is one statement
// (see sqlComplete), one round trip and one commit however many outcomes it
// carries; outcomes that end workflow tasks add the settle transaction,
// two more (workflow_end.go). A claim named twice within the batch (the same ID and token)
// applies once; its repeats are reported stale. Sent again after a lost
// reply, the batch is stale: the first one ended its claims. Error texts
// are stored as backend.PrepareOutcomes normalises them, so no text the
// server would refuse (invalid UTF-8, a NUL byte) reaches it; should the
// server refuse a batch's data anyway, the error wraps
// backend.ErrInvalidInput (see mapError) and the runtime isolates the
// outcome by splitting the batch.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	if err := b.checkOpen("complete jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	n := len(params.Outcomes)
	if n == 0 {
		return backend.CompleteResult{}, nil
	}
	outcomes, err := backend.PrepareOutcomes(params.Outcomes)
	if err != nil {
		return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w", err)
	}
	ids := make([]int64, 0, n)
	tokens := make([]int64, 0, n)
	kinds := make([]int32, 0, n)
	delays := make([]int64, 0, n)
	errs := make([]string, 0, n)
	tooks := make([]int64, 0, n)
	workers := make([]string, 0, n)
	results := make([]pgtype.Text, 0, n) // sqlCompleteKeep's $8 only
	// Keyed by claim, not by the whole ref: two outcomes of one claim in one
	// statement would write the same row twice, whatever their Attempt says.
	sent := make(map[claimKey]int, n) // the index in outcomes of the one sent
	var repeats []backend.JobRef
	stmt := b.q.complete
	for i, o := range outcomes {
		code := kindCode(o.Kind)
		if o.Kind == backend.OutcomeDone && o.Keep {
			code, stmt = kindDoneKeep, b.rq.completeKeep
		}
		k := keyOf(o.Ref)
		if _, dup := sent[k]; dup {
			repeats = append(repeats, o.Ref)
			continue
		}
		sent[k] = i
		ids = append(ids, o.Ref.ID)
		tokens = append(tokens, o.Ref.Token)
		kinds = append(kinds, code)
		delays = append(delays, micros(o.RetryDelay))
		errs = append(errs, o.Error)
		var result pgtype.Text // NULL: no result, or a job not kept
		if o.Keep && o.Result != nil {
			result = pgtype.Text{String: string(o.Result), Valid: true}
		}
		results = append(results, result)
		// Only a retry and a fail record their attempt: the done outcomes
		// of a drain carry no worker name to the server.
		if o.Kind == backend.OutcomeRetry || o.Kind == backend.OutcomeFail {
			tooks = append(tooks, micros(o.Duration))
			workers = append(workers, o.Worker)
		} else {
			tooks = append(tooks, 0)
			workers = append(workers, "")
		}
	}
	var appliedIDs, appliedTokens, taskIDs, taskTokens []int64
	var due []string
	args := []any{ids, tokens, kinds, delays, errs, tooks, workers}
	if stmt != b.q.complete {
		args = append(args, results)
	}
	err = b.do(ctx, "complete jobs", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, stmt, args...).Scan(&appliedIDs, &appliedTokens, &due, &taskIDs, &taskTokens)
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	if len(appliedIDs) > 0 && backend.Finishes(outcomes) {
		due = append(due, backend.FinishedTopic)
	}
	b.wake(due)
	b.limits.EndedOutcomes(outcomes)
	var res backend.CompleteResult
	if len(appliedIDs) == len(ids) {
		res.Stale = repeats
		return res, nil
	}
	applied := claimSet(appliedIDs, appliedTokens)
	for i, o := range outcomes {
		if sent[keyOf(o.Ref)] == i && !applied[keyOf(o.Ref)] {
			res.Stale = append(res.Stale, o.Ref)
		}
	}
	if len(res.Stale) > 0 {
		// The statement left tasks' jobs alone, naming the held ones: they
		// end with their tasks in a transaction of their own
		// (workflow_end.go). Refused outcomes of other cancelling claims
		// end them cancelled.
		tasks := make([]claimKey, len(taskIDs))
		named := make(map[claimKey]bool, len(taskIDs))
		for i, id := range taskIDs {
			tasks[i] = claimKey{id: id, token: taskTokens[i]}
			named[tasks[i]] = true
		}
		var rest []backend.JobRef
		for _, r := range res.Stale {
			if !named[keyOf(r)] {
				rest = append(rest, r)
			}
		}
		var cancelled map[claimKey]bool
		if len(rest) > 0 {
			var more []claimKey
			cancelled, more, err = b.finishCancelled(ctx, rest)
			if err != nil {
				return backend.CompleteResult{}, err
			}
			tasks = append(tasks, more...)
		}
		taskCancelled, applied, err := b.settleStale(ctx, "complete jobs", tasks, func(k claimKey) taskClaim {
			o := outcomes[sent[k]]
			kind := kindCode(o.Kind)
			if o.Kind == backend.OutcomeDone && o.Keep {
				kind = kindDoneKeep
			}
			return taskClaim{ref: o.Ref, kind: kind, err: o.Error, result: o.Result, took: o.Duration, worker: o.Worker}
		})
		if err != nil {
			return backend.CompleteResult{}, err
		}
		if len(cancelled)+len(taskCancelled)+len(applied) > 0 {
			stale := res.Stale[:0]
			for _, r := range res.Stale {
				switch k := keyOf(r); {
				case cancelled[k] || taskCancelled[k]:
					res.Cancelled = append(res.Cancelled, r)
				case !applied[k]:
					stale = append(stale, r)
				}
			}
			res.Stale = stale
		}
	}
	res.Stale = append(res.Stale, repeats...)
	if len(res.Cancelled) > 0 {
		b.wake([]string{backend.FinishedTopic})
	}
	return res, nil
}

// JobExtendLease implements backend.Backend in one statement. Sent again
// after a lost reply it only moves the leases again.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	if err := backend.ValidateExtendLease(params); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	if err := b.checkOpen("extend leases"); err != nil {
		return nil, err
	}
	if len(params.Refs) == 0 {
		return nil, nil
	}
	ids, tokens := refArrays(params.Refs)
	kept := make(map[claimKey]bool, len(params.Refs))
	err := b.do(ctx, "extend leases", func(ctx context.Context) error {
		clear(kept)
		rows, err := b.pool.Query(ctx, b.q.extendLease, ids, tokens, micros(params.Lease))
		if err != nil {
			return err
		}
		var k claimKey
		_, err = pgx.ForEachRow(rows, []any{&k.id, &k.token}, func() error {
			kept[k] = true
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	var lost []backend.JobRef
	for _, r := range params.Refs {
		if !kept[keyOf(r)] {
			lost = append(lost, r)
		}
	}
	return lost, nil
}

// JobRelease implements backend.Backend in one statement (see sqlRelease):
// free releases, counted ones and moves to failed_jobs alike. Jobs back in
// pending wake subscribers of their queues.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	if err := b.checkOpen("release jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	if len(refs) == 0 {
		return backend.CompleteResult{}, nil
	}
	ids, tokens := refArrays(refs)
	var matchedIDs, matchedTokens []int64
	var due []string
	err := b.do(ctx, "release jobs", func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, b.q.release, ids, tokens, int32(backend.MaxFreeReleases), backend.ReleasedError).
			Scan(&matchedIDs, &matchedTokens, &due)
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
	// The others are stale, or claims whose cancel was requested: those
	// end cancelled. Matched by (ID, token): a stale claim of a job whose
	// current claim was released in the same call stays stale, even when
	// both count the same attempt.
	released := claimSet(matchedIDs, matchedTokens)
	var rest []backend.JobRef
	for _, r := range refs {
		if !released[keyOf(r)] {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		return res, nil
	}
	cancelled, tasks, err := b.finishCancelled(ctx, rest)
	if err != nil {
		return backend.CompleteResult{}, err
	}
	// sqlRelease left tasks' jobs that spend their last attempt: they end
	// with their tasks in a transaction of their own (workflow_end.go).
	taskCancelled, applied, err := b.settleStale(ctx, "release jobs", tasks, func(k claimKey) taskClaim {
		return taskClaim{ref: backend.JobRef{ID: k.id, Token: k.token}, kind: kindRelease, err: backend.ReleasedError}
	})
	if err != nil {
		return backend.CompleteResult{}, err
	}
	for _, r := range rest {
		switch k := keyOf(r); {
		case cancelled[k] || taskCancelled[k]:
			res.Cancelled = append(res.Cancelled, r)
		case !applied[k]:
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
	var tasksWait bool // expired claims of tasks' jobs, left to sweepTasks
	// The expired leases and the cancelled jobs' ends go in one round
	// trip: the sweep runs every few seconds in every worker.
	err = b.do(ctx, "sweep leases", func(ctx context.Context) error {
		res = backend.SweepResult{}
		batch := &pgx.Batch{}
		batch.Queue(b.q.sweep, limit)
		batch.Queue(b.rq.sweepCancelled, limit)
		batch.Queue(b.q.expire, limit)
		br := b.pool.SendBatch(ctx, batch)
		rows, err := br.Query()
		if err == nil {
			var j backend.SweptJob
			_, err = pgx.ForEachRow(rows, []any{&j.Ref.ID, &j.Ref.Attempt, &j.Ref.Token, &j.Queue, &j.Type, &j.Failed}, func() error {
				res.Jobs = append(res.Jobs, j)
				return nil
			})
		}
		if err == nil {
			err = br.QueryRow().Scan(&res.Cancelled, &tasksWait)
		}
		if err == nil {
			rows, err = br.Query()
		}
		if err == nil {
			j := backend.SweptJob{Failed: true, Expired: true}
			_, err = pgx.ForEachRow(rows, []any{&j.Ref.ID, &j.Ref.Attempt, &j.Ref.Token, &j.Queue, &j.Type}, func() error {
				res.Jobs = append(res.Jobs, j)
				res.Expired++
				return nil
			})
		}
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return backend.SweepResult{}, err
	}
	var taskErr error
	if tasksWait {
		// Each ends with its task in a transaction (workflow_end.go).
		// Should that fail, the plain jobs above are swept (committed)
		// all the same: they are reported and woken, with the error.
		swept, cancelled, err := b.sweepTasks(ctx, limit)
		taskErr = err
		res.Jobs = append(res.Jobs, swept...)
		res.Cancelled += cancelled
	}
	var due []string
	seen := map[string]bool{}
	for _, j := range res.Jobs {
		if j.Expired {
			continue // counted above
		}
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
	if res.Failed+res.Cancelled+res.Expired > 0 {
		due = append(due, backend.FinishedTopic)
	}
	b.wake(due)
	return res, taskErr
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

// jobScan holds what scanJob reads one row into. Scan takes pointers as
// interfaces, so every variable it is given escapes: apart, they cost an
// allocation each per row (a claim of 100 jobs made about 1,500); as the
// fields of one struct they cost one, which the returned JobRow lives in.
type jobScan struct {
	j                      backend.JobRow
	status                 string
	reservedAt, leaseUntil pgtype.Timestamptz
	deadline               pgtype.Timestamptz
	lastError, uniqueKey   pgtype.Text
	metadata, errs         []byte
	workflowID             pgtype.Int8
	task, key              pgtype.Text
	progress               pgtype.Int2
	progressMsg            pgtype.Text
	progressAt             pgtype.Timestamptz
}

// scanJob reads one row of jobColumns.
func scanJob(row pgx.CollectableRow) (*backend.JobRow, error) {
	s := new(jobScan)
	j := &s.j
	err := row.Scan(&j.ID, &j.Queue, &j.Type, &j.Payload, &j.Attempts, &j.MaxAttempts, &j.Priority,
		&s.status, &j.AvailableAt, &s.reservedAt, &s.leaseUntil, &j.CreatedAt, &s.lastError, &s.uniqueKey,
		&j.Releases, &s.metadata, &j.Token, &s.errs, &s.key, &j.Turn, &s.deadline, &s.workflowID, &s.task,
		&s.progress, &s.progressMsg, &s.progressAt)
	if err != nil {
		return nil, err
	}
	j.Deadline = s.deadline.Time
	if j.Metadata, err = decodeMetadata(s.metadata); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	if j.Errors, err = attemptlog.Decode(s.errs); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	j.Status = backend.JobState(s.status)
	if j.Status != backend.StatePending && j.Status != backend.StateReserved && j.Status != backend.StateCancelling {
		// Nothing in the schema stops another writer (see migration 003).
		return nil, fmt.Errorf("job %d has status %q: jobq writes only %q or %q", j.ID, s.status, backend.StatePending, backend.StateReserved)
	}
	j.ReservedAt = s.reservedAt.Time
	j.LeaseUntil = s.leaseUntil.Time
	j.LastError = s.lastError.String
	j.UniqueKey, j.Key = s.uniqueKey.String, s.key.String
	j.WorkflowID, j.Task = s.workflowID.Int64, s.task.String
	if s.progress.Valid {
		j.Progress = &backend.Progress{Percent: int(s.progress.Int16), Message: s.progressMsg.String, At: s.progressAt.Time}
	}
	return j, nil
}

// refArrays splits refs into the parallel arrays of IDs and tokens the
// fenced statements take.
func refArrays(refs []backend.JobRef) ([]int64, []int64) {
	ids := make([]int64, len(refs))
	tokens := make([]int64, len(refs))
	for i, r := range refs {
		ids[i], tokens[i] = r.ID, r.Token
	}
	return ids, tokens
}

// claimKey is what the fence decides by: a claim of a job. The statements
// answer in claims, and the backend maps them back to the caller's refs,
// which it returns as given (Attempt included).
type claimKey struct{ id, token int64 }

func keyOf(r backend.JobRef) claimKey { return claimKey{r.ID, r.Token} }

// claimSet collects the claims a statement answered with, IDs and tokens
// pairwise.
func claimSet(ids, tokens []int64) map[claimKey]bool {
	set := make(map[claimKey]bool, len(ids))
	for i, id := range ids {
		set[claimKey{id, tokens[i]}] = true
	}
	return set
}

// micros converts a duration to the whole microseconds the statements take,
// rounding up so a positive lease or delay never becomes zero.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
