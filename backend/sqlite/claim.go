package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/attemptlog"
)

// JobClaim implements backend.Backend with one UPDATE ... RETURNING
// statement in a write transaction: SQLite holds the write lock from BEGIN
// IMMEDIATE to COMMIT, so the select and the reservation are one atomic
// step even across processes sharing the file.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	const op = "claim jobs"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	queues := slices.Clone(params.Queues)
	slices.Sort(queues)
	queues = slices.Compact(queues)

	now := b.now()
	reservedAt, leaseUntil := micros(now), micros(now.Add(params.Lease))
	// What the claim writes, as JobGet would read it back.
	claimed := &backend.JobRow{ReservedAt: fromMicros(reservedAt), LeaseUntil: fromMicros(leaseUntil)}
	args := make([]any, 0, 3+len(queues))
	args = append(args, reservedAt, leaseUntil, int64(params.Max))
	for _, q := range queues {
		args = append(args, q)
	}
	// Prepared before the transaction: it holds the only write connection.
	st, err := b.statements(ctx)
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	stmt, owned, err := st.claimStmt(ctx, b.w, len(queues))
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	if owned {
		defer stmt.Close()
	}
	jobs := make([]*backend.JobRow, 0, min(params.Max, 1000))
	// An explicit transaction, committed only once every returned row was
	// read: a claim cut short (context cancelled, scan error) reserves
	// nothing instead of leaving jobs reserved until their lease expires.
	var limited []limitedClaim
	var expired []backend.SweptJob
	err = b.write(ctx, op, func(tx *sql.Tx, st *stmts) error {
		jobs, limited, expired = jobs[:0], limited[:0], nil
		// The settings table holds a row only for a paused or limited
		// queue or one with key rules: read under the write lock, so a
		// pause, a limit or a rule set by any process applies to the next
		// claim, and empty (the common case) it leaves the claim as it
		// was.
		settings, err := readSettings(ctx, tx.StmtContext(ctx, st.settings))
		if err != nil {
			return err
		}
		b.noteKeyQueues(settings)
		if len(settings) == 0 {
			jobs, err = claimRows(ctx, tx.StmtContext(ctx, stmt), args, claimed, jobs)
			if err != nil || len(jobs) == params.Max {
				return err
			}
			// A short claim may have passed over expired jobs at the
			// head of the queue: moved now, the claim takes the jobs
			// behind them instead of waiting for the next sweep.
			if expired, err = expireInClaim(ctx, tx, reservedAt); err != nil || len(expired) == 0 {
				return err
			}
			more := slices.Clone(args)
			more[2] = int64(params.Max - len(jobs))
			jobs, err = claimRows(ctx, tx.StmtContext(ctx, stmt), more, claimed, jobs)
			return err
		}
		jobs, limited, err = b.claimControlled(ctx, tx, st, settings, queues, params.Max, now, args[:2], claimed, jobs)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(expired) > 0 {
		b.expiredMu.Lock()
		b.expired = append(b.expired, expired...)
		b.expiredMu.Unlock()
	}
	for _, l := range limited {
		b.limits.Claimed(l.queue, l.rows)
		if !l.next.IsZero() {
			b.limits.WakeAt(l.queue, l.next)
		}
	}
	// RETURNING yields rows in no defined order: put them in claim order.
	backend.SortClaimOrder(jobs)
	return jobs, nil
}

// expireInClaim moves the pending jobs whose deadline passed by now (µs)
// to failed_jobs inside the claim's transaction and returns them, for
// this process's next LeaseSweep to report once the claim committed.
// The probe of jobs_deadline, a partial index of the pending jobs with a
// deadline, finds nothing at once where no job has one.
func expireInClaim(ctx context.Context, tx *sql.Tx, now int64) ([]backend.SweptJob, error) {
	var one int
	switch err := tx.QueryRowContext(ctx, qExpiredAny, now).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var res backend.SweepResult
	if err := expireTx(ctx, tx, now, backend.DefaultSweepLimit, &res); err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// claimRows runs a claim statement and appends the rows it reserved.
func claimRows(ctx context.Context, stmt *sql.Stmt, args []any, claimed *backend.JobRow, jobs []*backend.JobRow) ([]*backend.JobRow, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return jobs, err
	}
	defer rows.Close()
	rs := newRowScan(claimed != nil)
	for rows.Next() {
		j, err := rs.scan(rows, claimed)
		if err != nil {
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanJob reads one row of jobColumns.
func scanJob(s scanner) (*backend.JobRow, error) { return newRowScan(false).scan(s, nil) }

// rowScan reads rows of jobColumns or of claimColumns into its fields,
// reused row after row. Scan's destinations escape, so scanning each row
// into locals put every one of them on the heap, and the slice of their
// addresses too: a sizeable share of what a claimed job allocated
// (docs/performance.md, "Why the code is shaped this way").
type rowScan struct {
	j                                                backend.JobRow
	avail, created, attempts, maxAtt, prio, releases int64
	uniqueKey, metadata, errors, task, key           sql.NullString
	workflowID                                       sql.NullInt64
	status                                           string
	reservedAt, leaseUntil, deadline                 sql.NullInt64
	cancelling                                       bool
	progress, progressAt                             sql.NullInt64
	progressMsg                                      sql.NullString
	dest                                             []any
}

// newRowScan returns a rowScan of claimColumns (claim) or jobColumns.
func newRowScan(claim bool) *rowScan {
	r := &rowScan{}
	r.dest = []any{&r.j.ID, &r.j.Queue, &r.j.Type, &r.j.Payload, &r.attempts, &r.maxAtt, &r.prio,
		&r.avail, &r.created, &r.j.LastError, &r.uniqueKey, &r.releases, &r.metadata, &r.j.Token,
		&r.workflowID, &r.task, &r.key, &r.j.Turn}
	if !claim {
		r.dest = append(r.dest, &r.status, &r.reservedAt, &r.leaseUntil, &r.cancelling, &r.errors, &r.deadline,
			&r.progress, &r.progressMsg, &r.progressAt)
	}
	return r
}

// scan reads one row into a new JobRow. With claimed set (a rowScan of
// claimColumns) the row's status, reserved_at and lease_until are
// claimed's.
func (r *rowScan) scan(s scanner, claimed *backend.JobRow) (*backend.JobRow, error) {
	r.j = backend.JobRow{}
	if err := s.Scan(r.dest...); err != nil {
		return nil, err
	}
	md, err := decodeMetadata(r.metadata.String, r.metadata.Valid)
	if err != nil {
		return nil, err
	}
	j := new(backend.JobRow)
	*j = r.j
	j.Metadata = md
	j.Attempts, j.MaxAttempts, j.Priority, j.Releases = int(r.attempts), int(r.maxAtt), int(r.prio), int(r.releases)
	j.AvailableAt = fromMicros(r.avail)
	j.CreatedAt = fromMicros(r.created)
	j.UniqueKey = r.uniqueKey.String
	j.WorkflowID, j.Task = r.workflowID.Int64, r.task.String
	j.Key = r.key.String
	if claimed != nil {
		j.Status, j.ReservedAt, j.LeaseUntil = backend.StateReserved, claimed.ReservedAt, claimed.LeaseUntil
		return j, nil
	}
	if j.Errors, err = attemptlog.Decode([]byte(r.errors.String)); err != nil {
		return nil, err
	}
	j.Status = backend.JobState(r.status)
	if r.cancelling {
		j.Status = backend.StateCancelling
	}
	if r.reservedAt.Valid {
		j.ReservedAt = fromMicros(r.reservedAt.Int64)
	}
	if r.leaseUntil.Valid {
		j.LeaseUntil = fromMicros(r.leaseUntil.Int64)
	}
	if r.deadline.Valid {
		j.Deadline = fromMicros(r.deadline.Int64)
	}
	if r.progress.Valid {
		j.Progress = &backend.Progress{Percent: int(r.progress.Int64), Message: r.progressMsg.String, At: fromMicros(r.progressAt.Int64)}
	}
	return j, nil
}
