package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the *sql.Tx tests

	"github.com/jobq/jobq/backend"
)

func testJob(queue string) backend.InsertParams {
	return backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{"n":1}`), MaxAttempts: 3}
}

func insertN(t testing.TB, b *Backend, queue string, n int) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		batch := make([]backend.InsertParams, min(1000, n-len(ids)))
		for i := range batch {
			batch[i] = testJob(queue)
		}
		res, err := b.JobInsertMany(context.Background(), batch)
		if err != nil {
			t.Fatalf("JobInsertMany: %v", err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func claimOne(t testing.TB, b *Backend, queue string) *backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{queue}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("JobClaim = %d rows, %v; want 1", len(rows), err)
	}
	return rows[0]
}

// waitFor polls cond until it holds, failing the test after within. within
// is a failure deadline, not a bound on how soon cond holds: waits for what
// takes milliseconds on a quiet machine give it a minute, since -race, -cpu 1
// and a CPU hog stretch them to seconds (issue 27).
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantWake(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute): // a failure deadline: nothing else wakes ch
		t.Fatalf("no wake-up within a minute after %s", after)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestInsertTx: a job inserted in a caller's transaction exists if and only
// if that transaction commits, for pgx.Tx and *sql.Tx alike.
func TestInsertTx(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	db, err := sql.Open("pgx", testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	type txn struct {
		tx       any
		commit   func() error
		rollback func() error
	}
	kinds := map[string]func(t *testing.T) txn{
		"pgx": func(t *testing.T) txn {
			tx, err := b.Pool().Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			return txn{tx, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }}
		},
		"database/sql": func(t *testing.T) txn {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return txn{tx, tx.Commit, tx.Rollback}
		},
	}
	for name, begin := range kinds {
		t.Run(name, func(t *testing.T) {
			queue := "tx-" + strings.ReplaceAll(name, "/", "-")
			for _, commit := range []bool{false, true} {
				tx := begin(t)
				res, err := b.JobInsertManyTx(t.Context(), tx.tx, []backend.InsertParams{testJob(queue), testJob(queue)})
				if err != nil {
					_ = tx.rollback()
					t.Fatalf("JobInsertManyTx: %v", err)
				}
				end := tx.rollback
				if commit {
					end = tx.commit
				}
				if err := end(); err != nil {
					t.Fatalf("end tx (commit %v): %v", commit, err)
				}
				for _, r := range res {
					_, err := b.JobGet(t.Context(), r.ID)
					switch {
					case commit && err != nil:
						t.Fatalf("committed job %d: JobGet: %v", r.ID, err)
					case !commit && !errors.Is(err, backend.ErrNotFound):
						t.Fatalf("rolled-back job %d: JobGet err = %v, want ErrNotFound", r.ID, err)
					}
				}
			}
			rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: 10, Lease: time.Hour})
			if err != nil || len(rows) != 2 {
				t.Fatalf("JobClaim = %d rows, %v; want the 2 committed jobs", len(rows), err)
			}
		})
	}

	if _, err := b.JobInsertManyTx(t.Context(), "not a tx", []backend.InsertParams{testJob("q")}); !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("JobInsertManyTx(string) err = %v, want ErrInvalidInput", err)
	}
}

// TestCompleteTx: the handler's own write and the completion commit or roll
// back together; a stale claim is ErrNotFound, also one counting the same
// attempt as the current claim (the job was released and claimed again).
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{})
	ledger := quoteIdent(b.Schema()) + ".ledger"
	execTest(t, "CREATE TABLE "+ledger+" (job_id bigint PRIMARY KEY)")
	db, err := sql.Open("pgx", testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ledgerCount := func(id int64) int {
		var n int
		if err := b.Pool().QueryRow(t.Context(), "SELECT count(*) FROM "+ledger+" WHERE job_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// handle runs one "handler" in a pgx or database/sql transaction.
	handle := func(useSQL bool, ref backend.JobRef, commit bool) error {
		ctx := t.Context()
		if useSQL {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+ledger+" VALUES ($1)", ref.ID); err != nil {
				return err
			}
			if err := b.JobCompleteTx(ctx, tx, ref); err != nil {
				return err
			}
			if commit {
				return tx.Commit()
			}
			return nil
		}
		return pgx.BeginFunc(ctx, b.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES ($1)", ref.ID); err != nil {
				return err
			}
			if err := b.JobCompleteTx(ctx, tx, ref); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
	}

	for _, useSQL := range []bool{false, true} {
		insertN(t, b, "q", 1)
		job := claimOne(t, b, "q")

		// Rolled back: the job stays reserved, the ledger empty.
		if err := handle(useSQL, job.Ref(), false); err != nil && !errors.Is(err, errRollback) {
			t.Fatalf("sql %v: handler (rollback): %v", useSQL, err)
		}
		row, err := b.JobGet(t.Context(), job.ID)
		if err != nil || row.Status != backend.StateReserved || ledgerCount(job.ID) != 0 {
			t.Fatalf("sql %v: after rollback job = %+v, %v, ledger %d; want reserved, ledger 0", useSQL, row, err, ledgerCount(job.ID))
		}

		// Released and claimed again: the first claim is stale, though
		// the second counts the same attempt.
		if res, err := b.JobRelease(t.Context(), []backend.JobRef{job.Ref()}); err != nil || len(res.Stale) != 0 {
			t.Fatalf("sql %v: JobRelease = %+v, %v", useSQL, res, err)
		}
		stale := job.Ref()
		job = claimOne(t, b, "q")
		if job.ID != stale.ID || job.Attempts != stale.Attempt || job.Token <= stale.Token {
			t.Fatalf("sql %v: re-claim = %+v; want job %d attempt %d with a token above %d", useSQL, job.Ref(), stale.ID, stale.Attempt, stale.Token)
		}
		if err := handle(useSQL, stale, true); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("sql %v: stale claim err = %v, want ErrNotFound", useSQL, err)
		}
		if row, err := b.JobGet(t.Context(), job.ID); err != nil || row.Status != backend.StateReserved || row.Token != job.Token || ledgerCount(job.ID) != 0 {
			t.Fatalf("sql %v: after the stale claim's tx job = %+v, %v, ledger %d; want held by the new claim, ledger 0", useSQL, row, err, ledgerCount(job.ID))
		}

		// Committed: the job is gone and the ledger has it once.
		if err := handle(useSQL, job.Ref(), true); err != nil {
			t.Fatalf("sql %v: handler: %v", useSQL, err)
		}
		if _, err := b.JobGet(t.Context(), job.ID); !errors.Is(err, backend.ErrNotFound) || ledgerCount(job.ID) != 1 {
			t.Fatalf("sql %v: after commit JobGet err = %v, ledger %d; want ErrNotFound, 1", useSQL, err, ledgerCount(job.ID))
		}
		// The runtime's own completion of the same attempt is now stale.
		res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: job.Ref(), Kind: backend.OutcomeDone}}})
		if err != nil || len(res.Stale) != 1 {
			t.Fatalf("sql %v: JobComplete after tx = %+v, %v; want stale", useSQL, res, err)
		}
	}
}

var errRollback = errors.New("roll back")

// TestNotifyAcrossBackends: an insert by another Backend on the schema wakes
// a subscriber, also after the listener's connection was killed.
func TestNotifyAcrossBackends(t *testing.T) {
	t.Parallel()
	a := openTest(t, Options{})
	other := openSchema(t, testURL(t), Options{Schema: a.Schema()})

	ch, cancel := a.Subscribe([]string{"n"})
	defer cancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return a.listener.pid.Load() != 0 })
	drain(ch)
	insertN(t, other, "n", 1)
	wantWake(t, ch, "insert by another backend")

	// Kill the LISTEN connection: the listener reconnects and wakes
	// everyone, since it may have missed hints.
	pid := a.listener.pid.Load()
	drain(ch)
	execTest(t, "SELECT pg_terminate_backend($1)", int32(pid))
	waitFor(t, time.Minute, "the listener to reconnect", func() bool {
		p := a.listener.pid.Load()
		return p != 0 && p != pid
	})
	wantWake(t, ch, "the listener reconnected")
	drain(ch)
	insertN(t, other, "n", 1)
	wantWake(t, ch, "insert by another backend after the listener reconnected")

	// A subscriber of another queue hears of that queue.
	ch2, cancel2 := a.Subscribe([]string{"m"})
	defer cancel2()
	insertN(t, other, "m", 1)
	wantWake(t, ch2, "insert into m")
}

// TestNotifyInTxOnlyOnCommit: a transactional insert notifies at commit.
func TestNotifyInTxOnlyOnCommit(t *testing.T) {
	t.Parallel()
	a := openTest(t, Options{})
	other := openSchema(t, testURL(t), Options{Schema: a.Schema()})
	ch, cancel := a.Subscribe([]string{"n"})
	defer cancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return a.listener.pid.Load() != 0 })
	drain(ch)
	err := pgx.BeginFunc(t.Context(), other.Pool(), func(tx pgx.Tx) error {
		_, err := other.JobInsertManyTx(t.Context(), tx, []backend.InsertParams{testJob("n")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantWake(t, ch, "commit of a transactional insert")
}

// TestMigrate: concurrent opens of a fresh schema migrate it once; Migrate is
// idempotent; a newer schema is refused.
func TestMigrate(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := testSchema(t)
	var wg sync.WaitGroup
	backends := make([]*Backend, 4)
	errs := make([]error, 4)
	for i := range backends {
		wg.Go(func() { backends[i], errs[i] = Open(t.Context(), url, Options{Schema: schema}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = backends[i].Close() })
	}
	b := backends[0]
	v, err := b.Migrate(t.Context())
	if err != nil || v != LatestVersion() {
		t.Fatalf("Migrate = %d, %v; want %d", v, err, LatestVersion())
	}
	var rows int
	if err := b.Pool().QueryRow(t.Context(), "SELECT count(*) FROM "+quoteIdent(schema)+".jobq_schema_version").Scan(&rows); err != nil || rows != LatestVersion() {
		t.Fatalf("version rows = %d, %v; want %d", rows, err, LatestVersion())
	}

	execTest(t, fmt.Sprintf("INSERT INTO %s.jobq_schema_version (version) VALUES (%d)", quoteIdent(schema), LatestVersion()+1))
	if _, err := b.Migrate(t.Context()); !errors.Is(err, backend.ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
	for _, o := range []Options{{}, {NoMigrate: true}, {Existing: true}} {
		o.Schema = schema
		if nb, err := Open(t.Context(), url, o); !errors.Is(err, backend.ErrSchemaTooNew) {
			if nb != nil {
				_ = nb.Close()
			}
			t.Fatalf("Open (%+v) on a newer schema: err = %v, want ErrSchemaTooNew", o, err)
		}
	}
}

// TestOpen: URLs, options and unreachable servers.
func TestOpen(t *testing.T) {
	t.Parallel()
	url := testURL(t)

	t.Run("SchemaFromURL", func(t *testing.T) {
		t.Parallel()
		schema := testSchema(t)
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		b, err := backend.Open(t.Context(), url+sep+"jobq_schema="+schema+"&application_name=jobqtest")
		if err != nil {
			t.Fatalf("backend.Open: %v", err)
		}
		defer b.Close()
		if got := b.(*Backend).Schema(); got != schema {
			t.Fatalf("Schema = %q, want %q", got, schema)
		}
		if _, err := Open(t.Context(), url+sep+"jobq_schema="+schema, Options{Schema: "other"}); !errors.Is(err, backend.ErrInvalidInput) {
			t.Fatalf("conflicting schemas: err = %v, want ErrInvalidInput", err)
		}
	})

	t.Run("BadOptions", func(t *testing.T) {
		t.Parallel()
		for _, o := range []Options{{Schema: "Has-Dash"}, {Schema: strings.Repeat("s", 59)}, {QueryTimeout: -1}, {MaxConns: -1}} {
			if _, err := Open(t.Context(), url, o); !errors.Is(err, backend.ErrInvalidInput) {
				t.Errorf("Open(%+v): err = %v, want ErrInvalidInput", o, err)
			}
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		_, err := Open(t.Context(), "postgres://postgres@127.0.0.1:1/test?connect_timeout=2", Options{})
		if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("err = %v, want ErrUnavailable naming 127.0.0.1:1", err)
		}
	})

	t.Run("UnknownDatabase", func(t *testing.T) {
		t.Parallel()
		bad := strings.Replace(url, "/test", "/jobq_no_such_database", 1)
		if bad == url {
			t.Skip("test URL has no /test database to replace")
		}
		if _, err := Open(t.Context(), bad, Options{}); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
}

// TestQueryTimeout: a statement stuck behind a lock fails within
// QueryTimeout as ErrUnavailable, and the backend works again once the
// lock is gone.
//
// The timeout ends the stuck statement's connection, so the call after
// the lock needs a new one (TCP, TLS and login) within QueryTimeout. That
// took more than the 200 ms the test once allowed when the machine was
// busy, and the test failed for a slow connect rather than a stuck
// backend: QueryTimeout is now 1s and the recovery may take a few tries.
func TestQueryTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	b := openTest(t, Options{QueryTimeout: timeout, NoVacuum: true})
	other := openSchema(t, testURL(t), Options{Schema: b.Schema()})
	tx, err := other.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+quoteIdent(b.Schema())+".jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("JobClaim err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*timeout {
		t.Fatalf("JobClaim took %s with a %s QueryTimeout", d, timeout)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The pool recovers.
	waitFor(t, 30*time.Second, "JobClaim to work after the lock", func() bool {
		_, err = b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil && !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("JobClaim after the lock: %v", err)
		}
		return err == nil
	})
}

// TestUnknownStatusRefused: the schema no longer checks jobs.status (see
// migration 003), so the backend refuses to read a row another writer gave
// a status jobq never writes, rather than treat it as pending or reserved.
func TestUnknownStatusRefused(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	id := insertN(t, b, "q", 1)[0]
	execTest(t, "UPDATE "+quoteIdent(b.Schema())+".jobs SET status = 'done' WHERE id = $1", id)
	_, err := b.JobGet(t.Context(), id)
	if err == nil || !strings.Contains(err.Error(), `status "done"`) {
		t.Fatalf("JobGet of a job with status done: %v; want an error naming the status", err)
	}
}
