package jobq_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// ledgerStore opens a SQLite backend and, on the same file, the handler's
// own database with a ledger table the handlers write their job to.
func ledgerStore(t *testing.T) (backend.Backend, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.db")
	b := openSQLite(t, path)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE ledger (job_id INTEGER PRIMARY KEY, attempt INTEGER)`); err != nil {
		t.Fatal(err)
	}
	return b, db
}

// TestCompleteTx: a handler's own write and its job's completion commit
// together; the worker then writes nothing more (no outcome refused by the
// fence), and a rolled-back completion leaves the job to be retried. Runs on
// SQLite, whose backend implements backend.TxCompleter.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	b, db := ledgerStore(t)
	reg := jobq.NewRegistry()
	var runs atomic.Int32
	reg.HandleFunc("post", func(ctx context.Context, j *jobq.Job) error {
		runs.Add(1)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES (?, ?)`, j.ID, j.Attempt); err != nil {
			return err
		}
		if err := jobq.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if j.Attempt == 1 {
			return errors.New("rolled back on purpose")
		}
		return tx.Commit()
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "post", nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobq.NewWorker(b, reg, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, settle, "the job to be completed", func() bool { return jobGone(b, id) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var attempt int
	if err := db.QueryRow(`SELECT attempt FROM ledger WHERE job_id = ?`, id).Scan(&attempt); err != nil || attempt != 2 {
		t.Fatalf("ledger row for job %d: attempt %d, %v; want exactly the committed attempt 2", id, attempt, err)
	}
	if runs.Load() != 2 || w.StaleOutcomes() != 0 || len(failedJobs(t, b)) != 0 {
		t.Fatalf("runs %d, stale outcomes %d, failed %d; want 2 runs, no stale write, nothing failed",
			runs.Load(), w.StaleOutcomes(), len(failedJobs(t, b)))
	}
}

// TestCompleteTxRollbackKeepsLease: a handler whose completing transaction
// rolled back still holds its job, so it may retry its own transaction
// for longer than the lease: the heartbeat goes on, the job is never
// rescued and run again meanwhile, the handler's context is not cancelled,
// and its second transaction completes the job.
func TestCompleteTxRollbackKeepsLease(t *testing.T) {
	t.Parallel()
	b, db := ledgerStore(t)
	// The lease was 400ms: a heartbeat (every third of it) late by more
	// than 267ms, which a loaded machine can make, let the job be rescued
	// while the handler still ran, and the test failed for the machine.
	// 3s tolerates a heartbeat 2s late; the handler waits for the event
	// that matters (its first lease over, the job still its own) rather
	// than for a multiple of the lease.
	const lease = 3 * time.Second
	write := func(ctx context.Context, j *jobq.Job, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES (?, ?)`, j.ID, j.Attempt); err != nil {
			return err
		}
		if err := jobq.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if !commit {
			return nil // rolled back by the deferred call
		}
		return tx.Commit()
	}
	reg := jobq.NewRegistry()
	var runs atomic.Int32
	result := make(chan error, 2)
	reg.HandleFunc("post", func(ctx context.Context, j *jobq.Job) error {
		runs.Add(1)
		first, err := b.JobGet(ctx, j.ID)
		if err != nil {
			result <- err
			return err
		}
		err = write(ctx, j, false)
		if err == nil {
			// Retry the transaction after more than a lease, as a
			// handler backing off from a conflict would: once the lease
			// the job had when the handler started has run out and the
			// job is still reserved on attempt 1, under a lease the
			// heartbeat extended past it. With no heartbeat that moment
			// never comes (the sweep takes the job back), and the
			// handler gives up after settle.
			err = errors.New("the job was not held past its first lease")
			deadline := time.After(settle)
		wait:
			for {
				row, gerr := b.JobGet(ctx, j.ID)
				if gerr == nil && row.Status == backend.StateReserved && row.Attempts == 1 &&
					row.LeaseUntil.After(first.LeaseUntil) && time.Now().After(first.LeaseUntil) {
					err = write(ctx, j, true)
					break
				}
				select {
				case <-ctx.Done():
					err = context.Cause(ctx)
					break wait
				case <-deadline:
					break wait
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		result <- err
		return err
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "post", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Lease = lease
	cfg.SweepInterval = 20 * time.Millisecond
	stop := startWorker(t, b, reg, cfg)
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("the handler's second transaction: %v; want it to complete the job it still holds", err)
		}
	case <-time.After(2 * settle): // the handler's own wait is bounded by settle
		t.Fatal("the handler did not finish")
	}
	eventually(t, settle, "the job to be completed", func() bool { return jobGone(b, id) })
	stop()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM ledger WHERE job_id = ?`, id).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("ledger rows for job %d: %d, %v; want the one committed", id, rows, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once: the job was rescued while its holder still ran", n)
	}
}
