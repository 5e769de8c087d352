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
)

// TestCompleteTx: a handler's own write and its job's completion commit
// together; the worker then writes nothing more (no outcome refused by the
// fence), and a rolled-back completion leaves the job to be retried. Runs on
// SQLite, whose backend implements backend.TxCompleter.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	b := openSQLite(t, path)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE ledger (job_id INTEGER PRIMARY KEY, attempt INTEGER)`); err != nil {
		t.Fatal(err)
	}
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
	eventually(t, 10*time.Second, "the job to be completed", func() bool { return jobGone(b, id) })
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
