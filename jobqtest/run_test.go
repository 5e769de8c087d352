package jobqtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/jobqtest"
)

// flaky registers typ with a handler failing its first failFirst attempts
// and counts its runs.
func flaky(reg *jobq.Registry, typ string, failFirst int, opts ...jobq.HandlerOptions) *atomic.Int32 {
	var runs atomic.Int32
	reg.HandleFunc(typ, func(ctx context.Context, j *jobq.Job) error {
		if int(runs.Add(1)) <= failFirst {
			return errors.New("upstream timeout")
		}
		return nil
	}, opts...)
	return &runs
}

func failedJobs(t *testing.T, b backend.Backend) []*backend.FailedJob {
	t.Helper()
	f, err := b.FailedList(t.Context(), backend.FailedListParams{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBounded: the attempt allowance bounds the runs; only a job that used
// it up is left failed. The default retry policy's backoff (10s, 20s) is
// treated as elapsed: the report keeps it, the test does not wait it.
func TestBounded(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		reg := jobq.NewRegistry()
		once := flaky(reg, "once", 1)
		five := flaky(reg, "five", 5)
		client := rec.NewClient(t, jobq.ClientConfig{})
		onceID, _ := client.Enqueue(ctx, "once", nil, jobq.MaxAttempts(3))
		fiveID, _ := client.Enqueue(ctx, "five", nil, jobq.MaxAttempts(3))

		start := time.Now()
		as := rec.RunQueue(t, reg, jobq.WorkerConfig{})
		// Waiting out five's two backoffs would take at least 24s (10s
		// and 20s, less 20% jitter): a bound under that shows they were
		// not waited, with room for a loaded machine (it was 8s).
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("RunQueue took %s: it waited out the backoff", took)
		}
		if once.Load() != 2 || five.Load() != 3 {
			t.Fatalf("runs: once %d (want 2), five %d (want 3)", once.Load(), five.Load())
		}
		wantStates := map[string][]jobqtest.State{
			"once": {jobqtest.StateRetried, jobqtest.StateDone},
			"five": {jobqtest.StateRetried, jobqtest.StateRetried, jobqtest.StateFailed},
		}
		for typ, want := range wantStates {
			got := as.OfType(typ)
			if len(got) != len(want) {
				t.Fatalf("%s: attempts\n%s", typ, got)
			}
			for i, a := range got {
				if a.State != want[i] || a.Attempt != i+1 || a.MaxAttempts != 3 {
					t.Fatalf("%s attempt %d: %s, want %s", typ, i+1, a, want[i])
				}
				if a.State == jobqtest.StateDone && a.Err != nil || a.State != jobqtest.StateDone && (a.Err == nil || !strings.Contains(a.Err.Error(), "upstream timeout")) {
					t.Fatalf("%s: error %v", a, a.Err)
				}
				if a.State == jobqtest.StateRetried {
					base := float64(10*time.Second) * float64(int(1)<<(a.Attempt-1))
					if d := float64(a.RetryDelay); d < 0.8*base || d > 1.2*base {
						t.Fatalf("%s: retry delay %s, want the default policy's 10s×2^(attempt-1) ±20%%", a, a.RetryDelay)
					}
				}
			}
		}
		if as.Count(jobqtest.StateFailed) != 1 {
			t.Fatalf("attempts:\n%s", as)
		}
		failed := failedJobs(t, b)
		if len(failed) != 1 || failed[0].JobID != fiveID || failed[0].Attempts != 3 || failed[0].Type != "five" {
			t.Fatalf("failed jobs %+v, want exactly job %d (five) after 3 attempts", failed, fiveID)
		}
		if _, err := b.JobGet(ctx, onceID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("the job that succeeded is still live: %v", err)
		}
		if as := rec.RunQueue(t, reg, jobq.WorkerConfig{}); len(as) != 0 {
			t.Fatalf("second run found %s", as)
		}
	})
}

// TestRetryPolicies: the worker's policy, the type's override, RetryAfter
// and Permanent decide the attempts as they would on a worker.
func TestRetryPolicies(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		reg := jobq.NewRegistry()
		flaky(reg, "worker-policy", 2)
		flaky(reg, "type-policy", 2, jobq.HandlerOptions{Retry: jobq.RetryPolicy{Base: time.Minute, Max: time.Hour, NoJitter: true}})
		reg.HandleFunc("retry-after", func(ctx context.Context, j *jobq.Job) error {
			if j.Attempt == 1 {
				return jobq.RetryAfter(time.Hour, errors.New("429"))
			}
			return nil
		})
		reg.HandleFunc("permanent", func(ctx context.Context, j *jobq.Job) error {
			return jobq.Permanent(errors.New("card declined"))
		})
		client := rec.NewClient(t, jobq.ClientConfig{MaxAttempts: 5})
		for _, typ := range []string{"worker-policy", "type-policy", "retry-after", "permanent", "unknown"} {
			if _, err := client.Enqueue(t.Context(), typ, nil); err != nil {
				t.Fatal(err)
			}
		}
		as := rec.RunQueue(t, reg, jobq.WorkerConfig{Retry: jobq.RetryPolicy{Base: time.Second, Max: time.Hour, NoJitter: true}})
		delays := func(typ string) []time.Duration {
			var out []time.Duration
			for _, a := range as.OfType(typ) {
				if a.State == jobqtest.StateRetried {
					out = append(out, a.RetryDelay)
				}
			}
			return out
		}
		check := func(typ string, want ...time.Duration) {
			t.Helper()
			got := delays(typ)
			if len(got) != len(want) {
				t.Fatalf("%s retry delays %v, want %v\n%s", typ, got, want, as)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s retry delays %v, want %v", typ, got, want)
				}
			}
		}
		check("worker-policy", time.Second, 2*time.Second)
		check("type-policy", time.Minute, 2*time.Minute)
		check("retry-after", time.Hour)
		check("permanent")
		if p := as.OfType("permanent"); len(p) != 1 || p[0].State != jobqtest.StateFailed {
			t.Fatalf("permanent: %s", p)
		}
		// A type without a handler is given back untouched, once (another
		// deployment may know it), and never failed.
		u := as.OfType("unknown")
		if len(u) != 1 || u[0].State != jobqtest.StateDeferred || !strings.Contains(u[0].Err.Error(), "no handler registered") {
			t.Fatalf("unknown type:\n%s", u)
		}
		if n := len(failedJobs(t, b)); n != 1 {
			t.Fatalf("%d failed jobs, want 1 (permanent)", n)
		}
	})
}

// TestDrainOrderAndChains: jobs run by priority then age, one at a time,
// and jobs a handler enqueues run in the same call.
func TestDrainOrderAndChains(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		var order []string
		reg := jobq.NewRegistry()
		reg.HandleFunc("step", func(ctx context.Context, j *jobq.Job) error {
			order = append(order, string(j.Payload))
			if string(j.Payload) == `"high"` {
				_, err := client.Enqueue(ctx, "notify", nil)
				return err
			}
			return nil
		})
		reg.HandleFunc("notify", func(ctx context.Context, j *jobq.Job) error {
			order = append(order, "notify")
			return nil
		})
		for _, s := range []struct {
			name string
			prio int
		}{{"low1", 0}, {"high", 10}, {"low2", 0}} {
			if _, err := client.Enqueue(t.Context(), "step", s.name, jobq.Priority(s.prio)); err != nil {
				t.Fatal(err)
			}
		}
		as := rec.RunQueue(t, reg, jobq.WorkerConfig{})
		if got := strings.Join(order, " "); got != `"high" "low1" "low2" notify` || len(as) != 4 {
			t.Fatalf("order %s, attempts\n%s", got, as)
		}
		rec.AssertClass(t, "notify", jobqtest.Ran)
	})
}

// TestDelayedJobsFollowTheClock: a job delayed at enqueue runs only once
// the backend's clock says it is due; the test moves the clock.
func TestDelayedJobsFollowTheClock(t *testing.T) {
	for _, s := range storing {
		if !s.clocked {
			continue // no settable clock
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			rec := jobqtest.NewRecorder(s.open(t, clock.Now))
			client := rec.NewClient(t, jobq.ClientConfig{})
			if _, err := client.Enqueue(t.Context(), "reminder", nil, jobq.Delay(24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if e := rec.AssertEnqueued(t, "reminder"); e.Delay != 24*time.Hour {
				t.Fatalf("recorded delay %s", e.Delay)
			}
			reg := noop("reminder")
			if as := rec.RunQueue(t, reg, jobq.WorkerConfig{}); len(as) != 0 {
				t.Fatalf("ran before due: %s", as)
			}
			rec.AssertClass(t, "reminder", jobqtest.Deferred)
			clock.Advance(24 * time.Hour)
			if as := rec.RunQueue(t, reg, jobq.WorkerConfig{}); len(as) != 1 || as[0].State != jobqtest.StateDone {
				t.Fatalf("after the clock moved: %s", as)
			}
			rec.AssertClass(t, "reminder", jobqtest.Ran)
		})
	}
}

// TestSQLiteTransactions: EnqueueTx and CompleteTx work through the
// recorder (TxInserter and TxCompleter pass through), and a job enqueued in
// a transaction is recorded as such.
func TestSQLiteTransactions(t *testing.T) {
	t.Parallel()
	b, db := sqliteAndDB(t)
	if _, err := db.Exec(`CREATE TABLE thumbs (image TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	rec := jobqtest.NewRecorder(b)
	client := rec.NewClient(t, jobq.ClientConfig{})
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	id, err := client.EnqueueTx(t.Context(), tx, "thumbnail", map[string]string{"image": "a.png"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if e := rec.AssertEnqueued(t, "thumbnail", jobqtest.EqualJSON(`{"image":"a.png"}`)); e.ID != id || !e.InTx {
		t.Fatalf("recorded %+v", e)
	}
	rec.AssertClass(t, "thumbnail", jobqtest.Deferred)

	reg := jobq.NewRegistry()
	jobq.Handle(reg, "thumbnail", func(ctx context.Context, p struct{ Image string }) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO thumbs VALUES (?)`, p.Image); err != nil {
			return err
		}
		if err := jobq.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
	as := rec.RunQueue(t, reg, jobq.WorkerConfig{})
	if len(as) != 1 || as[0].State != jobqtest.StateDone {
		t.Fatalf("attempts %s", as)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM thumbs WHERE image = 'a.png'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("thumbs rows %d, %v", n, err)
	}
	if _, err := b.JobGet(t.Context(), id); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job completed in the handler's transaction is still live: %v", err)
	}
	rec.AssertClass(t, "thumbnail", jobqtest.Ran)
}

// TestSQLiteRollback: a job inserted in a transaction that rolled back was
// never stored: the type is skipped, not deferred, and not enqueued, even
// though SQLite gives the next job (committed) the same ID.
func TestSQLiteRollback(t *testing.T) {
	t.Parallel()
	b, db := sqliteAndDB(t)
	rec := jobqtest.NewRecorder(b)
	client := rec.NewClient(t, jobq.ClientConfig{})
	for _, commit := range []bool{false, true} {
		typ := map[bool]string{false: "rolled-back", true: "committed"}[commit]
		inTx(t, db, commit, func(tx *sql.Tx) {
			if _, err := client.EnqueueTx(t.Context(), tx, typ, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	o := rec.Observe("rolled-back")
	if o.Class != jobqtest.Skipped || len(o.Skips) != 1 || !strings.Contains(o.Skips[0].Reason, "did not commit") || !o.Enqueues[0].NotCommitted {
		t.Fatalf("%s", o)
	}
	rec.AssertNotEnqueued(t, "rolled-back")
	rec.AssertClass(t, "committed", jobqtest.Deferred)
	rec.AssertEnqueued(t, "committed")
	as := rec.RunQueue(t, noop("committed", "rolled-back"), jobq.WorkerConfig{})
	if len(as) != 1 || as[0].Type != "committed" {
		t.Fatalf("attempts %s", as)
	}
	rec.AssertClass(t, "committed", jobqtest.Ran) // gone from the backend, but it ran
}

// TestRetryGoesBehindEarlierDue: the lesson's worker puts a failed job back
// at the end, and the order it measures is "flaky attempt 1, thumbnail
// attempt 1, flaky attempt 2": a retry is due when it comes back, after
// the thumbnail enqueued before it, and claims go by due time.
func TestRetryGoesBehindEarlierDue(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		var order []string
		reg := jobq.NewRegistry()
		reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
			order = append(order, fmt.Sprintf("flaky attempt %d", j.Attempt))
			if j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		})
		reg.HandleFunc("thumbnail", func(ctx context.Context, j *jobq.Job) error {
			order = append(order, fmt.Sprintf("thumbnail attempt %d", j.Attempt))
			return nil
		})
		for _, typ := range []string{"flaky", "thumbnail"} {
			if _, err := client.Enqueue(t.Context(), typ, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // distinct due times on every clock
		}
		rec.RunQueue(t, reg, jobq.WorkerConfig{})
		if got := strings.Join(order, ", "); got != "flaky attempt 1, thumbnail attempt 1, flaky attempt 2" {
			t.Fatalf("order %s", got)
		}
	})
}

// TestDrainFollowUpInNewQueue: a job a handler enqueues during the drain
// into a queue no stored job used before (a signup's welcome email on
// "emails") runs in the same call, in claim order, when the caller named
// no queues; with queues named, Drain keeps to exactly those.
func TestDrainFollowUpInNewQueue(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		reg := jobq.NewRegistry()
		reg.HandleFunc("signup", func(ctx context.Context, j *jobq.Job) error {
			// Priority 10: due after the audit job but claimed before it.
			_, err := client.Enqueue(ctx, "welcome", nil, jobq.Queue("emails"), jobq.Priority(10))
			return err
		})
		welcome := flaky(reg, "welcome", 0)
		audit := flaky(reg, "audit", 0)
		if _, err := client.Enqueue(ctx, "signup", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(ctx, "audit", nil); err != nil {
			t.Fatal(err)
		}

		as := rec.RunQueue(t, reg, jobq.WorkerConfig{})
		var got []string
		for _, a := range as {
			got = append(got, a.Queue+"/"+a.Type+"/"+string(a.State))
		}
		if want := "default/signup/done,emails/welcome/done,default/audit/done"; strings.Join(got, ",") != want {
			t.Fatalf("attempts %v, want %s:\n%s", got, want, as)
		}
		if welcome.Load() != 1 || audit.Load() != 1 {
			t.Fatalf("welcome ran %d times, audit %d; want once each", welcome.Load(), audit.Load())
		}
		rec.AssertClass(t, "welcome", jobqtest.Ran)

		// Queues named by the caller are kept: the follow-up waits.
		rec.Reset()
		if _, err := client.Enqueue(ctx, "signup", nil); err != nil {
			t.Fatal(err)
		}
		as = rec.RunQueue(t, reg, jobq.WorkerConfig{Queues: []string{"default"}})
		if len(as) != 1 || as[0].Type != "signup" || welcome.Load() != 1 {
			t.Fatalf("with Queues [default]: attempts\n%s\nwelcome ran %d times; want signup alone", as, welcome.Load())
		}
		rec.AssertClass(t, "welcome", jobqtest.Deferred)
		if as := rec.RunQueue(t, reg, jobq.WorkerConfig{}); len(as) != 1 || as[0].Type != "welcome" || welcome.Load() != 2 {
			t.Fatalf("then with no queues named: attempts\n%s\nwelcome ran %d times; want the waiting welcome", as, welcome.Load())
		}
	})
}
