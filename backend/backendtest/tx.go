package backendtest

import (
	"errors"
	"testing"

	"github.com/jobq/jobq/backend"
)

// Tx is a transaction of the application's own, begun by Harness.BeginTx,
// that the suite hands to a backend's ...Tx methods and then ends.
type Tx struct {
	// Tx is the driver's transaction, as the backend's ...Tx methods take
	// it (for example a *sql.Tx or a pgx.Tx).
	Tx       any
	Commit   func() error
	Rollback func() error
}

// testTx: a backend that writes inside the caller's transaction
// (TxInserter, TxCompleter, WorkflowTxInserter) writes exactly when that
// transaction commits, fences JobCompleteTx by the claim's token like
// JobComplete, and refuses a transaction of any other type before
// writing. Backends without those capabilities skip it; one with them
// fails it unless its harness can begin a transaction.
func testTx(t *testing.T, h Harness) {
	// setup returns what b can do in a transaction and begins them.
	setup := func(t *testing.T, b backend.Backend) (backend.TxInserter, func() Tx) {
		t.Helper()
		ins, ok := b.(backend.TxInserter)
		if !ok {
			t.Skip("backend does not implement backend.TxInserter")
		}
		if h.BeginTx == nil {
			t.Fatal("backendtest: the backend implements backend.TxInserter but Harness.BeginTx is nil")
		}
		return ins, func() Tx {
			t.Helper()
			tx := h.BeginTx(t, b)
			t.Cleanup(func() { _ = tx.Rollback() }) // an ended tx refuses it
			return tx
		}
	}
	end := func(t *testing.T, tx Tx, commit bool) {
		t.Helper()
		f := tx.Rollback
		if commit {
			f = tx.Commit
		}
		if err := f(); err != nil {
			t.Fatalf("end the transaction (commit %v): %v", commit, err)
		}
	}

	parallel(t, h, "InsertExistsOnCommit", func(t *testing.T, b backend.Backend) {
		ins, begin := setup(t, b)
		for _, commit := range []bool{false, true} {
			tx := begin()
			p := job("tx", "t")
			p.Metadata = map[string]string{"trace": "x"}
			res, err := ins.JobInsertManyTx(t.Context(), tx.Tx, []backend.InsertParams{p, p})
			if err != nil || len(res) != 2 {
				t.Fatalf("JobInsertManyTx = %+v, %v; want 2 results", res, err)
			}
			// Not there before the commit.
			for _, r := range res {
				gone(t, b, r.ID)
			}
			end(t, tx, commit)
			for _, r := range res {
				if !commit {
					gone(t, b, r.ID)
					continue
				}
				if row := get(t, b, r.ID); row.Status != backend.StatePending || row.Metadata["trace"] != "x" {
					t.Fatalf("committed job = %+v, want pending with its metadata", row)
				}
			}
			if !commit {
				claimNone(t, b, "tx")
			} else if rows := claim(t, b, 10, longLease, "tx"); len(rows) != 2 {
				t.Fatalf("claimed %d jobs, want the 2 committed", len(rows))
			}
		}
	})

	parallel(t, h, "CompleteWithTheTx", func(t *testing.T, b backend.Backend) {
		_, begin := setup(t, b)
		c, ok := b.(backend.TxCompleter)
		if !ok {
			t.Skip("backend does not implement backend.TxCompleter")
		}
		insertOne(t, b, job("tx", "t"))
		r := claimOne(t, b, "tx")
		tx := begin()
		if err := c.JobCompleteTx(t.Context(), tx.Tx, r.Ref()); err != nil {
			t.Fatalf("JobCompleteTx: %v", err)
		}
		end(t, tx, false)
		wantStatus(t, b, r.ID, backend.StateReserved, 1)

		// The holder of a claim given back for free (the attempt
		// un-counted) cannot complete the next claim of the same attempt.
		if res, err := b.JobRelease(t.Context(), []backend.JobRef{r.Ref()}); err != nil || len(res.Stale)+len(res.Cancelled) != 0 {
			t.Fatalf("JobRelease = %+v, %v", res, err)
		}
		cur := claimOne(t, b, "tx")
		if cur.Attempts != r.Attempts || cur.Token == r.Token {
			t.Fatalf("claim after a free release = %+v, want attempt %d under another token", cur.Ref(), r.Attempts)
		}
		tx = begin()
		if err := c.JobCompleteTx(t.Context(), tx.Tx, r.Ref()); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("JobCompleteTx of the released claim: %v, want ErrNotFound", err)
		}
		if err := c.JobCompleteTx(t.Context(), tx.Tx, cur.Ref()); err != nil {
			t.Fatalf("JobCompleteTx of the current claim: %v", err)
		}
		if err := c.JobCompleteTx(t.Context(), tx.Tx, cur.Ref()); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("JobCompleteTx of a claim completed in the same tx: %v, want ErrNotFound", err)
		}
		end(t, tx, true)
		gone(t, b, cur.ID)
		claimNone(t, b, "tx")
	})

	parallel(t, h, "WorkflowExistsOnCommit", func(t *testing.T, b backend.Backend) {
		_, begin := setup(t, b)
		w := workflower(t, b)
		wi, ok := b.(backend.WorkflowTxInserter)
		if !ok {
			t.Fatal("backend implements backend.TxInserter and backend.Workflower but not backend.WorkflowTxInserter")
		}
		params := backend.WorkflowParams{Name: "wf", Tasks: []backend.TaskParams{task("a"), task("b", "a")}}
		tx := begin()
		res, err := wi.WorkflowInsertTx(t.Context(), tx.Tx, params)
		if err != nil {
			t.Fatalf("WorkflowInsertTx: %v", err)
		}
		end(t, tx, false)
		if wf, err := w.WorkflowGet(t.Context(), res.ID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("workflow of a rolled-back tx = %+v, %v; want ErrNotFound", wf, err)
		}
		gone(t, b, res.Jobs["a"])
		claimNone(t, b, "w")

		tx = begin()
		if res, err = wi.WorkflowInsertTx(t.Context(), tx.Tx, params); err != nil {
			t.Fatalf("WorkflowInsertTx: %v", err)
		}
		end(t, tx, true)
		wantTasks(t, w, res.ID, map[string]backend.TaskState{"a": backend.TaskActive, "b": backend.TaskWaiting})
		a := wantClaimed(t, b, "a")["a"]
		if a.ID != res.Jobs["a"] {
			t.Fatalf("task a ran as job %d, WorkflowInsertTx said %d", a.ID, res.Jobs["a"])
		}
		// A task's job completed in the caller's transaction ends its task
		// there, releasing its dependants on commit.
		if c, ok := b.(backend.TxCompleter); ok {
			tx = begin()
			if err := c.JobCompleteTx(t.Context(), tx.Tx, a.Ref()); err != nil {
				t.Fatalf("JobCompleteTx(a): %v", err)
			}
			end(t, tx, true)
		} else {
			completeFresh(t, b, done(a.Ref()))
		}
		wantTasks(t, w, res.ID, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive})
		runTasks(t, b, "b")
		wantWorkflow(t, w, res.ID, backend.WorkflowSucceeded)
		noDrift(t, w)
	})

	parallel(t, h, "RefusesOtherTypes", func(t *testing.T, b backend.Backend) {
		ins, _ := setup(t, b)
		for _, tx := range []any{"not a tx", nil, 42} {
			_, err := ins.JobInsertManyTx(t.Context(), tx, []backend.InsertParams{job("tx", "t")})
			if !errors.Is(err, backend.ErrInvalidInput) {
				t.Errorf("JobInsertManyTx(%T): %v, want ErrInvalidInput", tx, err)
			}
			if c, ok := b.(backend.TxCompleter); ok {
				if err := c.JobCompleteTx(t.Context(), tx, backend.JobRef{ID: 1, Attempt: 1, Token: 1}); !errors.Is(err, backend.ErrInvalidInput) {
					t.Errorf("JobCompleteTx(%T): %v, want ErrInvalidInput", tx, err)
				}
			}
			if wi, ok := b.(backend.WorkflowTxInserter); ok {
				params := backend.WorkflowParams{Tasks: []backend.TaskParams{task("a")}}
				if _, err := wi.WorkflowInsertTx(t.Context(), tx, params); !errors.Is(err, backend.ErrInvalidInput) {
					t.Errorf("WorkflowInsertTx(%T): %v, want ErrInvalidInput", tx, err)
				}
			}
		}
		wantNoStats(t, b)
	})
}
