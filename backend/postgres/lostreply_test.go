package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// The tests of this file break connections with the fault injector
// (fault_test.go) so a write is applied although its caller sees an error,
// and check in the database that the write applied once, that the caller
// was told the store was unavailable (and do did not send it again), and
// that sending it again is refused or harmless.

// openFaulty opens a backend on a fresh schema whose connections go
// through a fault injector. No vacuumer: nothing on the pool but the test.
func openFaulty(t *testing.T) (*Backend, *faultInjector) {
	t.Helper()
	f := &faultInjector{}
	return openTest(t, Options{NoVacuum: true, wrapConn: f}), f
}

// wantLost checks the error of a call whose reply the injector dropped:
// backend.ErrUnavailable, after one execution of the statement (do must
// not resend a write that may have committed).
func wantLost(t *testing.T, f *faultInjector, fired <-chan struct{}, err error) {
	t.Helper()
	wantFired(t, fired)
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("err = %v, want one wrapping backend.ErrUnavailable", err)
	}
	if n := f.executions(); n != 1 {
		t.Fatalf("the statement was executed %d times, want once: a write that may have committed was sent again", n)
	}
}

// tables returns every row of the schema's tables of jobs, as text in id
// order: two calls compare what happened in between.
func tables(t *testing.T, b *Backend) string {
	t.Helper()
	s := quoteIdent(b.Schema())
	var out string
	err := b.Pool().QueryRow(t.Context(), fmt.Sprintf(`
SELECT concat_ws(E'\n--\n',
	(SELECT string_agg(j::text, E'\n' ORDER BY id) FROM %[1]s.jobs j),
	(SELECT string_agg(f::text, E'\n' ORDER BY id) FROM %[1]s.failed_jobs f),
	(SELECT string_agg(d::text, E'\n' ORDER BY id) FROM %[1]s.finished_jobs d))`, s)).Scan(&out)
	if err != nil {
		t.Fatalf("read tables: %v", err)
	}
	return out
}

// count runs a count(*) over the schema's tables; {schema} is replaced.
func count(t *testing.T, b *Backend, query string, args ...any) int {
	t.Helper()
	var n int
	q := strings.ReplaceAll(query, "{schema}", quoteIdent(b.Schema()))
	if err := b.Pool().QueryRow(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// claimN claims n jobs of queue for a long lease.
func claimN(t *testing.T, b *Backend, queue string, n int) []*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Hour})
	if err != nil || len(rows) != n {
		t.Fatalf("JobClaim = %d rows, %v; want %d", len(rows), err, n)
	}
	return rows
}

// TestLostReplyComplete: outcomes whose reply was lost applied once; the
// same outcomes sent again are all stale and change nothing.
func TestLostReplyComplete(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			t.Parallel()
			b, f := openFaulty(t)
			ids := insertN(t, b, "q", 3)
			rows := claimN(t, b, "q", 3)
			outs := []backend.Outcome{
				{Ref: rows[0].Ref(), Kind: backend.OutcomeDone, Keep: keep},
				{Ref: rows[1].Ref(), Kind: backend.OutcomeRetry, RetryDelay: time.Hour, Error: "again"},
				{Ref: rows[2].Ref(), Kind: backend.OutcomeFail, Error: "broken"},
			}
			stmt := b.q.complete
			if keep {
				stmt = b.rq.completeKeep
			}
			fired := f.arm(stmt, 0, loseReply)
			_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
			wantLost(t, f, fired, err)

			if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1", ids[0]); n != 0 {
				t.Fatalf("done job %d still live", ids[0])
			}
			if n := count(t, b, "SELECT count(*) FROM {schema}.finished_jobs WHERE id = $1 AND state = 'completed'", ids[0]); (n == 1) != keep {
				t.Fatalf("kept completed rows of job %d = %d, keep %v", ids[0], n, keep)
			}
			if n := count(t, b, `SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND status = 'pending'
				AND last_error = 'again' AND attempts = 1 AND claim_token = 1 AND available_at > now() + interval '50 minutes'`, ids[1]); n != 1 {
				t.Fatalf("retried job %d is not pending for an hour with its error", ids[1])
			}
			if n := count(t, b, "SELECT count(*) FROM {schema}.failed_jobs WHERE job_id = $1 AND error = 'broken' AND claim_token = 1", ids[2]); n != 1 {
				t.Fatalf("failed rows of job %d = %d, want 1 keeping its claim token", ids[2], n)
			}
			before := tables(t, b)

			res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
			want := []backend.JobRef{outs[0].Ref, outs[1].Ref, outs[2].Ref}
			if err != nil || !slices.Equal(res.Stale, want) || len(res.Cancelled) != 0 {
				t.Fatalf("the outcomes sent again = %+v, %v; want all stale", res, err)
			}
			if after := tables(t, b); after != before {
				t.Fatalf("the stale resend changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestLostReplyRelease: a release whose reply was lost spent the free
// release once; sent again it is stale and spends nothing.
func TestLostReplyRelease(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	id := insertN(t, b, "q", 1)[0]
	ref := claimOne(t, b, "q").Ref()
	fired := f.arm(b.q.release, 0, loseReply)
	_, err := b.JobRelease(t.Context(), []backend.JobRef{ref})
	wantLost(t, f, fired, err)
	q := `SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND status = 'pending' AND attempts = 0
		AND releases = 1 AND claim_token = 1 AND lease_until IS NULL`
	if n := count(t, b, q, id); n != 1 {
		t.Fatalf("job %d is not pending with one free release spent: %s", id, tables(t, b))
	}
	before := tables(t, b)

	res, err := b.JobRelease(t.Context(), []backend.JobRef{ref})
	if err != nil || !slices.Equal(res.Stale, []backend.JobRef{ref}) || len(res.Cancelled) != 0 {
		t.Fatalf("the release sent again = %+v, %v; want it stale", res, err)
	}
	if after := tables(t, b); after != before {
		t.Fatalf("the stale resend changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The next claim counts the same attempt under a new token; the first
	// holder's writes do not reach it.
	cur := claimOne(t, b, "q")
	if cur.ID != id || cur.Attempts != ref.Attempt || cur.Token <= ref.Token {
		t.Fatalf("re-claim = job %d attempt %d token %d; want job %d attempt %d, token above %d", cur.ID, cur.Attempts, cur.Token, id, ref.Attempt, ref.Token)
	}
	res, err = b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeDone}}})
	if err != nil || !slices.Equal(res.Stale, []backend.JobRef{ref}) {
		t.Fatalf("done by the first holder = %+v, %v; want stale", res, err)
	}
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND status = 'reserved' AND claim_token = $2", id, cur.Token); n != 1 {
		t.Fatalf("job %d is no longer held by its current claim: %s", id, tables(t, b))
	}
}

// TestLostReplyExtendLease: an extension sent again only moves the lease
// again.
func TestLostReplyExtendLease(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	id := insertN(t, b, "q", 1)[0]
	ref := claimOne(t, b, "q").Ref()
	params := backend.ExtendLeaseParams{Refs: []backend.JobRef{ref}, Lease: 3 * time.Hour}
	fired := f.arm(b.q.extendLease, 0, loseReply)
	_, err := b.JobExtendLease(t.Context(), params)
	wantLost(t, f, fired, err)
	held := `SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND status = 'reserved' AND claim_token = $2
		AND attempts = 1 AND lease_until > now() + interval '2 hours'`
	if n := count(t, b, held, id, ref.Token); n != 1 {
		t.Fatalf("job %d: lease not extended: %s", id, tables(t, b))
	}
	lost, err := b.JobExtendLease(t.Context(), params)
	if err != nil || len(lost) != 0 {
		t.Fatalf("the extension sent again = %v, %v; want the lease kept", lost, err)
	}
	if n := count(t, b, held, id, ref.Token); n != 1 {
		t.Fatalf("job %d after the extension was sent again: %s", id, tables(t, b))
	}
}

// TestLostReplyClaim: a claim whose reply was lost holds its jobs until
// the lease runs out (at-least-once: the attempt counts); the sweep then
// gives them back and the next claim fences out the lost one.
func TestLostReplyClaim(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	id := insertN(t, b, "q", 1)[0]
	fired := f.arm(b.q.claim, 0, loseReply)
	_, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: 100 * time.Millisecond})
	wantLost(t, f, fired, err)
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND status = 'reserved' AND claim_token = 1", id); n != 1 {
		t.Fatalf("job %d is not held by the lost claim: %s", id, tables(t, b))
	}
	lost := backend.JobRef{ID: id, Attempt: 1, Token: 1} // what the claim would have returned
	waitFor(t, time.Minute, "the sweep to rescue the job", func() bool {
		res, err := b.LeaseSweep(t.Context(), backend.SweepParams{})
		if err != nil {
			t.Fatalf("LeaseSweep: %v", err)
		}
		return res.Rescued == 1 && res.Jobs[0].Ref == lost
	})
	cur := claimOne(t, b, "q")
	if cur.ID != id || cur.Attempts != 2 || cur.Token != 2 {
		t.Fatalf("claim after the sweep = job %d attempt %d token %d; want job %d attempt 2 token 2", cur.ID, cur.Attempts, cur.Token, id)
	}
	res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: lost, Kind: backend.OutcomeFail, Error: "late"}}})
	if err != nil || !slices.Equal(res.Stale, []backend.JobRef{lost}) {
		t.Fatalf("an outcome of the lost claim = %+v, %v; want stale", res, err)
	}
}

// TestLostReplyUniqueInsert: an insert with a unique key whose reply was
// lost holds its key; sent again it is a duplicate of that job, and the
// key stays held, through retries and releases, until the job is done.
func TestLostReplyUniqueInsert(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	p := testJob("q")
	p.UniqueKey = "k"
	fired := f.arm(b.q.insert, 0, loseReply)
	_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	wantLost(t, f, fired, err)
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'k'"); n != 1 {
		t.Fatalf("jobs holding the key = %d, want 1", n)
	}
	var id int64
	if err := b.Pool().QueryRow(t.Context(), "SELECT id FROM "+quoteIdent(b.Schema())+".jobs WHERE unique_key = 'k'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	wantDuplicate := func(when string) {
		t.Helper()
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
		if err != nil || len(res) != 1 || res[0] != (backend.InsertResult{ID: id, Duplicate: true}) {
			t.Fatalf("insert %s = %+v, %v; want a duplicate of job %d", when, res, err, id)
		}
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs"); n != 1 {
			t.Fatalf("insert %s: %d jobs, want 1", when, n)
		}
	}
	wantDuplicate("sent again")
	r := claimOne(t, b, "q")
	wantDuplicate("while the job is held")
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeRetry, Error: "again"}}}); err != nil {
		t.Fatal(err)
	}
	wantDuplicate("after a retry")
	r = claimOne(t, b, "q")
	if _, err := b.JobRelease(t.Context(), []backend.JobRef{r.Ref()}); err != nil {
		t.Fatal(err)
	}
	wantDuplicate("after a release")
	r = claimOne(t, b, "q")
	if res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: r.Ref(), Kind: backend.OutcomeDone}}}); err != nil || len(res.Stale) != 0 {
		t.Fatalf("done = %+v, %v", res, err)
	}
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil || len(res) != 1 || res[0].Duplicate || res[0].ID == id {
		t.Fatalf("insert after the job was done = %+v, %v; want a new job", res, err)
	}
}

// TestLostReplyBatchInsert: a batch whose reply was lost is all there or
// none there, whichever way it is sent: one statement, COPY in a
// transaction, or a batch with unique keys in a transaction.
func TestLostReplyBatchInsert(t *testing.T) {
	t.Parallel()
	batch := func(n int, keyed bool) []backend.InsertParams {
		ps := make([]backend.InsertParams, n)
		for i := range ps {
			ps[i] = testJob("q")
			if keyed && i%2 == 0 {
				ps[i].UniqueKey = fmt.Sprintf("k%d", i)
			}
		}
		return ps
	}
	cases := []struct {
		name   string
		params []backend.InsertParams
		stmt   func(b *Backend) string // the statement whose reply is lost
		want   int                     // jobs there after the loss
	}{
		{"statement", batch(32, false), func(b *Backend) string { return b.q.insertPlain }, 32},
		{"copy/ids", batch(copyMinRows*2, false), func(b *Backend) string { return b.q.reserveIDs }, 0},
		{"copy/commit", batch(copyMinRows*2, false), func(*Backend) string { return "commit" }, copyMinRows * 2},
		{"keyed/statement", batch(10, true), func(b *Backend) string { return b.q.insert }, 0},
		{"keyed/commit", batch(10, true), func(*Backend) string { return "commit" }, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, f := openFaulty(t)
			fired := f.arm(tc.stmt(b), 0, loseReply)
			_, err := b.JobInsertMany(t.Context(), tc.params)
			wantLost(t, f, fired, err)
			if n := count(t, b, "SELECT count(*) FROM {schema}.jobs"); n != tc.want {
				t.Fatalf("%d of %d jobs there after the lost reply, want %d", n, len(tc.params), tc.want)
			}
		})
	}
}

// TestInsertRoundsAllOrNothing: a keyed item whose holder commits while
// the batch's statement runs comes back without the holder's ID (its
// snapshot predates the holder), and the batch sends it again in a
// second round. Outside a transaction the first round had committed the
// rest of the batch by then: a lost reply of the second round left half a
// batch, and a second round failing unsent (which do retries) inserted
// the rest again.
func TestInsertRoundsAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []faultMode{loseReply, failUnsent} {
		t.Run(map[faultMode]string{loseReply: "lost reply", failUnsent: "unsent"}[mode], func(t *testing.T) {
			t.Parallel()
			b, f := openFaulty(t)
			ctx := t.Context()
			keyed := testJob("holder")
			keyed.UniqueKey = "k"

			// The holder's transaction inserts the key and waits.
			tx, err := b.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
			held, err := b.JobInsertManyTx(ctx, tx, []backend.InsertParams{keyed})
			if err != nil {
				t.Fatal(err)
			}

			fired := f.arm(b.q.insert, 1, mode) // the second round
			type result struct {
				res []backend.InsertResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := b.JobInsertMany(ctx, []backend.InsertParams{testJob("plain"), keyed})
				done <- result{res, err}
			}()
			// The batch's first round waits for the holder's key.
			waitFor(t, time.Minute, "the insert to wait for the holder", func() bool {
				var n int
				err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE '%unnest%' AND query LIKE '%' || $1 || '%'`, b.Schema()).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			wantFired(t, fired)
			plain := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE queue = 'plain'")
			switch mode {
			case loseReply:
				if !errors.Is(r.err, backend.ErrUnavailable) || plain != 0 {
					t.Fatalf("second round's reply lost: err %v, %d jobs of the batch there; want ErrUnavailable and none", r.err, plain)
				}
			case failUnsent:
				if r.err != nil || len(r.res) != 2 {
					t.Fatalf("second round failed unsent: %+v, %v; want two results", r.res, r.err)
				}
				want := []backend.InsertResult{{ID: r.res[0].ID}, {ID: held[0].ID, Duplicate: true}}
				if !slices.Equal(r.res, want) || plain != 1 {
					t.Fatalf("second round failed unsent: %+v, %v, %d plain jobs; want %+v and 1", r.res, r.err, plain, want)
				}
			}
			if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'k'"); n != 1 {
				t.Fatalf("%d jobs hold the key, want the holder alone", n)
			}
		})
	}
}

// TestLostReplyReplay: a replay (by ID, or a chunk of one by filter)
// whose commit's acknowledgement was lost brought the job back once,
// holding its unique key and its claim token; sent again it finds
// nothing to replay and changes nothing. A replay whose statement's reply
// was lost before the commit replayed nothing and can simply be sent
// again.
func TestLostReplyReplay(t *testing.T) {
	t.Parallel()
	// failedJob inserts a job with a unique key and one attempt, claims it
	// and fails it: it returns the job's ID, which names its failed job
	// too, and the claim's ref.
	failedJob := func(t *testing.T, b *Backend) (int64, backend.JobRef) {
		t.Helper()
		p := testJob("q")
		p.UniqueKey, p.MaxAttempts = "k", 1
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		ref := claimOne(t, b, "q").Ref()
		if r, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: ref, Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil || len(r.Stale) != 0 {
			t.Fatalf("fail = %+v, %v", r, err)
		}
		fj, err := b.FailedList(t.Context(), backend.FailedListParams{})
		if err != nil || len(fj) != 1 {
			t.Fatalf("FailedList = %d, %v", len(fj), err)
		}
		if fj[0].JobID != res[0].ID {
			t.Fatalf("failed job %+v is not job %d", fj[0], res[0].ID)
		}
		return res[0].ID, ref
	}
	keyed := testJob("q")
	keyed.UniqueKey = "k"

	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		b, f := openFaulty(t)
		id, old := failedJob(t, b)
		params := backend.FailedReplayParams{IDs: []int64{id}}
		fired := f.arm("commit", 0, loseReply)
		_, err := b.FailedReplay(t.Context(), params)
		wantLost(t, f, fired, err)
		live := `SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND unique_key = 'k' AND status = 'pending'
			AND attempts = 0 AND releases = 0 AND claim_token = 1`
		if n := count(t, b, live, id); n != 1 || count(t, b, "SELECT count(*) FROM {schema}.jobs") != 1 ||
			count(t, b, "SELECT count(*) FROM {schema}.failed_jobs") != 0 {
			t.Fatalf("after the lost acknowledgement: %s; want job %d live once, nothing failed", tables(t, b), id)
		}
		before := tables(t, b)
		if _, err := b.FailedReplay(t.Context(), params); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("the replay sent again: err = %v, want ErrNotFound", err)
		}
		if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{}); err != nil || res.Replayed != 0 {
			t.Fatalf("a replay by filter afterwards = %+v, %v; want nothing replayed", res, err)
		}
		if after := tables(t, b); after != before {
			t.Fatalf("the replays sent again changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// The key is held by the replayed job.
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{keyed})
		if err != nil || res[0] != (backend.InsertResult{ID: id, Duplicate: true}) {
			t.Fatalf("insert of the key = %+v, %v; want a duplicate of job %d", res, err, id)
		}
		// Its next claim fences out the holder from before the failure.
		cur := claimOne(t, b, "q")
		if cur.ID != id || cur.Token <= old.Token {
			t.Fatalf("claim after replay = job %d token %d; want job %d, token above %d", cur.ID, cur.Token, id, old.Token)
		}
		if r, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: old, Kind: backend.OutcomeDone}}}); err != nil || !slices.Equal(r.Stale, []backend.JobRef{old}) {
			t.Fatalf("done by the holder from before the failure = %+v, %v; want stale", r, err)
		}
	})

	t.Run("statement", func(t *testing.T) {
		t.Parallel()
		b, f := openFaulty(t)
		id, _ := failedJob(t, b)
		params := backend.FailedReplayParams{IDs: []int64{id}}
		before := tables(t, b)
		fired := f.arm(b.q.failedReplayIDs, 0, loseReply)
		_, err := b.FailedReplay(t.Context(), params)
		wantLost(t, f, fired, err)
		if after := tables(t, b); after != before {
			t.Fatalf("a replay that never committed changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if res, err := b.FailedReplay(t.Context(), params); err != nil || res.Replayed != 1 {
			t.Fatalf("the replay sent again = %+v, %v; want it replayed", res, err)
		}
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND unique_key = 'k' AND claim_token = 1", id); n != 1 {
			t.Fatalf("job %d not live once: %s", id, tables(t, b))
		}
	})

	// A chunk of a replay by filter runs in a transaction of its own (it
	// looks at the keys it moved back before it commits: see
	// checkReplayKeys), so a lost reply of its statement is the one above.
	t.Run("filter", func(t *testing.T) {
		t.Parallel()
		b, f := openFaulty(t)
		id, _ := failedJob(t, b)
		params := backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}}
		before := tables(t, b)
		fired := f.arm(b.q.failedReplayChunk, 0, loseReply)
		_, err := b.FailedReplay(t.Context(), params)
		wantLost(t, f, fired, err)
		if after := tables(t, b); after != before {
			t.Fatalf("a chunk that never committed changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if res, err := b.FailedReplay(t.Context(), params); err != nil || res.Replayed != 1 {
			t.Fatalf("the replay sent again = %+v, %v; want it replayed", res, err)
		}
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND unique_key = 'k'", id); n != 1 {
			t.Fatalf("job %d not live once: %s", id, tables(t, b))
		}
	})

	t.Run("filter commit", func(t *testing.T) {
		t.Parallel()
		b, f := openFaulty(t)
		id, _ := failedJob(t, b)
		fired := f.arm("commit", 0, loseReply)
		_, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}})
		wantLost(t, f, fired, err)
		if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = $1 AND unique_key = 'k'", id); n != 1 ||
			count(t, b, "SELECT count(*) FROM {schema}.failed_jobs") != 0 {
			t.Fatalf("after the lost reply: %s; want job %d live, nothing failed", tables(t, b), id)
		}
		before := tables(t, b)
		if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "q"}}); err != nil || res.Replayed != 0 {
			t.Fatalf("the replay sent again = %+v, %v; want nothing replayed", res, err)
		}
		if after := tables(t, b); after != before {
			t.Fatalf("the replay sent again changed the tables:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestFaultInjectorCommitsBeforeCutting checks the injector itself: the
// statement whose reply it drops has committed by the time the caller
// sees the error, and one failed unsent never reached the server.
func TestFaultInjectorCommitsBeforeCutting(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	ctx := t.Context()
	table := quoteIdent(b.Schema()) + ".probe"
	execTest(t, "CREATE TABLE "+table+" (n int)")
	insert := "INSERT INTO " + table + " VALUES ($1)"

	fired := f.arm(insert, 0, loseReply)
	if _, err := b.Pool().Exec(ctx, insert, 1); err == nil {
		t.Fatal("Exec with its reply lost succeeded")
	}
	wantFired(t, fired)
	fired = f.arm(insert, 0, failUnsent)
	_, err := b.Pool().Exec(ctx, insert, 2)
	wantFired(t, fired)
	if err == nil || !retryable(err) {
		t.Fatalf("Exec failed unsent: err = %v, want one retryable says may be sent again", err)
	}
	var got []int32
	rows, err := b.Pool().Query(ctx, "SELECT n FROM "+table+" ORDER BY n")
	if err == nil {
		got, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil || !slices.Equal(got, []int32{1}) {
		t.Fatalf("rows = %v, %v; want [1]: the lost reply's insert alone", got, err)
	}
}

// TestLostReplyBegin: a BEGIN whose reply was lost (a pooled connection
// that died while idle looks the same) changed nothing, so do sends the
// whole transaction again and the call succeeds, applied once, although
// pgx reports the failure as it reports a lost COMMIT.
func TestLostReplyBegin(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	params := make([]backend.InsertParams, copyMinRows*2)
	for i := range params {
		params[i] = testJob("q")
	}
	fired := f.arm("begin", 0, loseReply)
	res, err := b.JobInsertMany(t.Context(), params)
	wantFired(t, fired)
	if err != nil || len(res) != len(params) {
		t.Fatalf("JobInsertMany = %d results, %v; want %d", len(res), err, len(params))
	}
	if n := f.executions(); n != 2 {
		t.Fatalf("BEGIN sent %d times, want twice", n)
	}
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs"); n != len(params) {
		t.Fatalf("%d jobs, want %d", n, len(params))
	}
}

// TestReplayChunkCountsCommittedJobs: a replay by filter whose chunk
// replayed a plain job (committed) and then failed in its tasks'
// transaction, unsent, is sent again: that chunk no longer matches the
// plain job, so the result counts it from the first try, and the task's
// job from the second. Each is replayed and counted once.
func TestReplayChunkCountsCommittedJobs(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	ctx := t.Context()
	plain := insertN(t, b, "w", 1)[0]
	wf := wfInsert(t, b, wfTask("a"))
	rows := claimTasks(t, b, time.Hour)
	completeAll(t, b, failOf(rows["t"], "plain broke"), failOf(rows["a"], "a broke"))
	wfWant(t, b, wf, backend.WorkflowFailed, map[string]string{"a": "failed"})

	fired := f.arm(b.wq().replay, 0, failUnsent)
	res, err := b.FailedReplay(ctx, backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "w"}})
	wantFired(t, fired)
	slices.SortFunc(res.ByType, func(x, y backend.TypeCount) int { return strings.Compare(x.Type, y.Type) })
	want := []backend.TypeCount{{Queue: "w", Type: "a", Count: 1}, {Queue: "w", Type: "t", Count: 1}}
	if err != nil || res.Replayed != 2 || res.Skipped != 0 || !slices.Equal(res.ByType, want) {
		t.Fatalf("replay = %+v, %v; want 2 replayed, by type %v", res, err, want)
	}
	if n := count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE id = ANY($1) AND status = 'pending'", []int64{plain, rows["a"].ID}); n != 2 ||
		count(t, b, "SELECT count(*) FROM {schema}.failed_jobs") != 0 {
		t.Fatalf("after the replay: %s; want both jobs pending, nothing failed", tables(t, b))
	}
	wfWant(t, b, wf, backend.WorkflowRunning, map[string]string{"a": "active"})
}

// TestSweepReportsCommittedPart: a lease sweep whose plain part committed
// and whose tasks' transaction then lost its reply returns the error with
// the plain jobs it swept, so its caller counts and logs them; the next
// sweep ends the task.
func TestSweepReportsCommittedPart(t *testing.T) {
	t.Parallel()
	b, f := openFaulty(t)
	ctx := t.Context()
	plain := insertN(t, b, "w", 1)[0]
	last := wfTask("a")
	last.Job.MaxAttempts = 1 // its expired claim is the tasks' part of the sweep
	wf := wfInsert(t, b, last)
	if rows := claimTasks(t, b, 50*time.Millisecond); len(rows) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(rows))
	}
	deadline := time.Now().Add(time.Minute)
	for count(t, b, "SELECT count(*) FROM {schema}.jobs WHERE lease_until < now()") != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the leases never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}

	fired := f.arm(b.wq().expired, 0, loseReply)
	res, err := b.LeaseSweep(ctx, backend.SweepParams{})
	wantLost(t, f, fired, err)
	if res.Rescued != 1 || len(res.Jobs) != 1 || res.Jobs[0].Ref.ID != plain || res.Jobs[0].Failed {
		t.Fatalf("sweep = %+v; want the plain job %d rescued, reported with the error", res, plain)
	}
	// The first sweep's tasks' transaction keeps its row locks until the
	// server notices the connection is gone, and a sweep skips locked rows
	// (SKIP LOCKED): on a busy machine the next sweeps may find nothing at
	// first.
	var later backend.SweepResult
	waitFor(t, time.Minute, "a sweep to fail task a's job", func() bool {
		res, err := b.LeaseSweep(ctx, backend.SweepParams{})
		if err != nil {
			t.Fatalf("sweep after the lost reply: %v", err)
		}
		later.Failed += res.Failed
		later.Rescued += res.Rescued
		return later.Failed > 0
	})
	if later.Failed != 1 || later.Rescued != 0 {
		t.Fatalf("later sweeps = %+v; want task a's job failed, nothing rescued", later)
	}
	wfWant(t, b, wf, backend.WorkflowFailed, map[string]string{"a": "failed: lease expired"})
}
