package redis

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// Tests of writes whose reply was lost: the script ran on the server and
// its caller saw an error (a timeout, a dropped connection), then sent it
// again. The fault hook at the client seam (client.inject) lets each
// command through and replaces its reply with lostReply; the assertions
// read what Redis holds.

// lostReply is what a reply lost on its way back looks like to the
// client: a read that timed out.
type lostReply struct{}

func (lostReply) Error() string   { return "i/o timeout (injected: the reply was lost)" }
func (lostReply) Timeout() bool   { return true }
func (lostReply) Temporary() bool { return true }

// injectFault sets b's fault hook until the test ends.
func injectFault(t *testing.T, b *Backend, f faultFunc) {
	t.Helper()
	b.c.inject.Store(&f)
	t.Cleanup(func() { b.c.inject.Store(nil) })
}

// loseReplies lets the next n runs of the script named script (by
// EVALSHA or EVAL) reach the server and run, and fails each as if its
// reply was lost. It returns how many it has failed so far.
func loseReplies(t *testing.T, b *Backend, script string, n int) func() int {
	t.Helper()
	var mu sync.Mutex
	lost := 0
	injectFault(t, b, func(fc faultCmd, sent bool) error {
		if !sent || fc.script != script {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if lost == n {
			return nil
		}
		lost++
		return lostReply{}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return lost
	}
}

// wantLost checks that a call failed as a lost reply does: unavailable,
// and not known to be unsent.
func wantLost(t *testing.T, what string, err error, lost func() int) {
	t.Helper()
	if !errors.Is(err, backend.ErrUnavailable) || isNotSent(err) {
		t.Fatalf("%s with its reply lost: %v; want an ErrUnavailable of unknown outcome", what, err)
	}
	if n := lost(); n != 1 {
		t.Fatalf("%s: %d replies lost, want 1", what, n)
	}
}

// jobHash returns every field of job id's live hash in queue (none when
// the job is not live).
func jobHash(t *testing.T, b *Backend, queue string, id int64) map[string]string {
	t.Helper()
	h, err := b.c.hgetAll(t.Context(), b.keys.queue(queue).job(id))
	if err != nil {
		t.Fatalf("HGETALL job %d: %v", id, err)
	}
	return h
}

// zscore returns member's score in the sorted set key, and whether it is
// there.
func zscore(t *testing.T, b *Backend, key, member string) (float64, bool) {
	t.Helper()
	v, err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return 0, false
		}
		t.Fatalf("ZSCORE %s %s: %v", key, member, err)
	}
	return v, true
}

// zcard returns the size of the sorted set key.
func zcard(t *testing.T, b *Backend, key string) int64 {
	t.Helper()
	n, err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Zcard().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("ZCARD %s: %v", key, err)
	}
	return n
}

// uniqueHolder returns the ID that holds the unique key (0: free).
func uniqueHolder(t *testing.T, b *Backend, key string) int64 {
	t.Helper()
	v, err := b.c.rdb.Do(t.Context(), b.c.rdb.B().Hget().Key(b.keys.unique).Field(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("HGET unique %s: %v", key, err)
	}
	id, _, ok := heldBy(v)
	if !ok {
		t.Fatalf("unique key %q holds %q", key, v)
	}
	return id
}

// pendingIn returns QueueStats' pending count of each queue.
func pendingIn(t *testing.T, b *Backend) map[string]int64 {
	t.Helper()
	st, err := b.QueueStats(t.Context())
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	out := map[string]int64{}
	for _, s := range st {
		out[s.Queue] = s.Pending
	}
	return out
}

// claimN claims exactly n jobs from queues.
func claimN(t *testing.T, b *Backend, n int, lease time.Duration, queues ...string) []*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: queues, Max: n, Lease: lease})
	if err != nil || len(rows) != n {
		t.Fatalf("claim from %v: %d jobs, %v; want %d", queues, len(rows), err, n)
	}
	return rows
}

// keyed is a job of queue holding the unique key.
func keyed(queue, key string) backend.InsertParams {
	return backend.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, UniqueKey: key}
}

// TestLostReplyComplete: outcomes whose reply was lost were applied; the
// same outcomes sent again are stale, each exactly the ref given, and
// apply nothing a second time.
func TestLostReplyComplete(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	if _, err := b.JobInsertMany(ctx, benchJobs(3, "q")); err != nil {
		t.Fatal(err)
	}
	rows := claimN(t, b, 3, time.Minute, "q")
	outs := []backend.Outcome{
		{Ref: rows[0].Ref(), Kind: backend.OutcomeDone},
		{Ref: rows[1].Ref(), Kind: backend.OutcomeRetry, RetryDelay: time.Hour, Error: "again"},
		{Ref: rows[2].Ref(), Kind: backend.OutcomeFail, Error: "broken"},
	}
	lost := loseReplies(t, b, "complete", 1)
	_, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs})
	wantLost(t, "JobComplete", err, lost)

	check := func(when string) map[string]string {
		t.Helper()
		if h := jobHash(t, b, "q", rows[0].ID); len(h) != 0 {
			t.Fatalf("%s: the done job is still live: %v", when, h)
		}
		h := jobHash(t, b, "q", rows[1].ID)
		if h["lu"] != "" || h["e"] != "again" || h["a"] != "1" {
			t.Fatalf("%s: the retried job holds %v; want it pending, attempt 1, last error %q", when, h, "again")
		}
		if at, ok := zscore(t, b, q.delayed, tsHex(rows[1].ID)); !ok || strconv.FormatFloat(at, 'f', -1, 64) != h["av"] {
			t.Fatalf("%s: the retried job is delayed until %v (%t), its hash says %s", when, at, ok, h["av"])
		}
		if h := jobHash(t, b, "q", rows[2].ID); len(h) != 0 {
			t.Fatalf("%s: the failed job is still live: %v", when, h)
		}
		if n := zcard(t, b, q.failed); n != 1 {
			t.Fatalf("%s: %d failed jobs, want 1", when, n)
		}
		if n := zcard(t, b, q.reserved); n != 0 {
			t.Fatalf("%s: %d jobs reserved, want 0", when, n)
		}
		return h
	}
	before := check("after the lost reply")

	res, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs})
	want := []backend.JobRef{outs[0].Ref, outs[1].Ref, outs[2].Ref}
	if err != nil || !slices.Equal(res.Stale, want) || len(res.Cancelled) != 0 {
		t.Fatalf("the outcomes sent again = %+v, %v; want all three stale, as given", res, err)
	}
	if after := check("after the resend"); after["av"] != before["av"] {
		t.Fatalf("the resend moved the retried job's due time from %s to %s", before["av"], after["av"])
	}
}

// TestLostReplyRelease: a free release whose reply was lost was spent
// once. Sent again after another worker claimed the job (the same attempt:
// the free release un-counted it), it is stale and leaves that worker's
// claim alone.
func TestLostReplyRelease(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	id := insertJob(t, b, "q")
	first := claimN(t, b, 1, time.Minute, "q")[0]
	lost := loseReplies(t, b, "release", 1)
	_, err := b.JobRelease(ctx, []backend.JobRef{first.Ref()})
	wantLost(t, "JobRelease", err, lost)
	if h := jobHash(t, b, "q", id); h["lu"] != "" || h["a"] != "0" || h["r"] != "1" {
		t.Fatalf("after the lost release the job holds %v; want it pending, attempt 0, 1 release", h)
	}

	second := claimN(t, b, 1, time.Minute, "q")[0]
	if second.ID != id || second.Attempts != first.Attempts || second.Token <= first.Token {
		t.Fatalf("second claim: job %d attempt %d token %d; want job %d, attempt %d again, a token above %d",
			second.ID, second.Attempts, second.Token, id, first.Attempts, first.Token)
	}
	res, err := b.JobRelease(ctx, []backend.JobRef{first.Ref()})
	if err != nil || !slices.Equal(res.Stale, []backend.JobRef{first.Ref()}) || len(res.Cancelled) != 0 {
		t.Fatalf("the release sent again = %+v, %v; want it stale", res, err)
	}
	h := jobHash(t, b, "q", id)
	if h["lu"] != micro(second.LeaseUntil) || h["k"] != strconv.FormatInt(second.Token, 10) || h["r"] != "1" || h["a"] != "1" {
		t.Fatalf("after the stale release the job holds %v; want the second claim's (lease %s, token %d), 1 release",
			h, micro(second.LeaseUntil), second.Token)
	}
	// The second holder's own release is the job's second free one.
	if res, err := b.JobRelease(ctx, []backend.JobRef{second.Ref()}); err != nil || len(res.Stale)+len(res.Cancelled) != 0 {
		t.Fatalf("the second holder's release = %+v, %v", res, err)
	}
	if h := jobHash(t, b, "q", id); h["r"] != "2" || h["a"] != "0" {
		t.Fatalf("after the second release the job holds %v; want 2 releases, attempt 0", h)
	}
}

// TestLostReplyExtend: an extension whose reply was lost was applied;
// sent again it extends again, harmlessly; once the job ended it is lost.
func TestLostReplyExtend(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	id := insertJob(t, b, "q")
	row := claimN(t, b, 1, time.Minute, "q")[0]
	refs := []backend.JobRef{row.Ref()}
	leaseOf := func(when string) int64 {
		t.Helper()
		h := jobHash(t, b, "q", id)
		lu, err := strconv.ParseInt(h["lu"], 10, 64)
		if err != nil {
			t.Fatalf("%s: lease %q: %v", when, h["lu"], err)
		}
		if at, ok := zscore(t, b, q.reserved, tsHex(id)); !ok || int64(at) != lu {
			t.Fatalf("%s: reserved until %v (%t), its hash says %d", when, at, ok, lu)
		}
		return lu
	}
	lost := loseReplies(t, b, "extend", 1)
	_, err := b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: refs, Lease: time.Hour})
	wantLost(t, "JobExtendLease", err, lost)
	first := leaseOf("after the lost extension")
	if first < row.LeaseUntil.Add(50*time.Minute).UnixMicro() {
		t.Fatalf("the lost extension was not applied: lease %d, claimed until %s", first, row.LeaseUntil)
	}
	gone, err := b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: refs, Lease: time.Hour})
	if err != nil || len(gone) != 0 {
		t.Fatalf("the extension sent again = %v, %v; want the lease kept", gone, err)
	}
	if again := leaseOf("after the resend"); again < first {
		t.Fatalf("the resend moved the lease back from %d to %d", first, again)
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	gone, err = b.JobExtendLease(ctx, backend.ExtendLeaseParams{Refs: refs, Lease: time.Hour})
	if err != nil || !slices.Equal(gone, refs) {
		t.Fatalf("extension after the job ended = %v, %v; want %v lost", gone, err, refs)
	}
	if n := zcard(t, b, q.reserved); n != 0 {
		t.Fatalf("%d jobs reserved after the late extension, want 0", n)
	}
}

// TestLostReplyClaim: a claim whose reply was lost reserved its job for
// no one; the sweep rescues it once the lease runs out, naming the lost
// claim by its token.
func TestLostReplyClaim(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	id := insertJob(t, b, "q")
	lost := loseReplies(t, b, "claim", 1)
	_, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: 50 * time.Millisecond})
	wantLost(t, "JobClaim", err, lost)
	h := jobHash(t, b, "q", id)
	token, err := strconv.ParseInt(h["k"], 10, 64)
	if err != nil || h["lu"] == "" || h["a"] != "1" {
		t.Fatalf("after the lost claim the job holds %v; want it reserved, attempt 1, with a token", h)
	}
	time.Sleep(60 * time.Millisecond)
	res, err := b.LeaseSweep(ctx, backend.SweepParams{})
	want := backend.SweptJob{Ref: backend.JobRef{ID: id, Attempt: 1, Token: token}, Queue: "q", Type: "t"}
	if err != nil || res.Rescued != 1 || len(res.Jobs) != 1 || res.Jobs[0] != want {
		t.Fatalf("sweep = %+v, %v; want %+v rescued", res, err, want)
	}
	row := claimN(t, b, 1, time.Minute, "q")[0]
	if row.ID != id || row.Attempts != 2 || row.Token <= token {
		t.Fatalf("claim after the rescue: job %d attempt %d token %d; want job %d attempt 2 above token %d", row.ID, row.Attempts, row.Token, id, token)
	}
}

// TestLostReplyUniqueInsert: an insert with a unique key whose reply was
// lost wrote its job, which keeps its key: the insert sent again is a
// duplicate naming that job, and the key is freed only when the job ends.
// An insert that never reached the server frees its keys at once.
func TestLostReplyUniqueInsert(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()

	lost := loseReplies(t, b, "insert", 1)
	_, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "one")})
	wantLost(t, "JobInsertMany", err, lost)
	id := uniqueHolder(t, b, "one")
	if h := jobHash(t, b, "q", id); id == 0 || h["u"] != "one" {
		t.Fatalf("after the lost insert the key is held by %d, whose hash is %v; want the written job holding it", id, h)
	}
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "one")})
	if err != nil || len(res) != 1 || !res[0].Duplicate || res[0].ID != id {
		t.Fatalf("the insert sent again = %+v, %v; want a duplicate of %d", res, err, id)
	}
	if got := uniqueHolder(t, b, "one"); got != id {
		t.Fatalf("after the resend the key is held by %d, want %d", got, id)
	}
	if p := pendingIn(t, b); p["q"] != 1 {
		t.Fatalf("pending jobs %v, want 1 in q", p)
	}
	row := claimN(t, b, 1, time.Minute, "q")[0]
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	if got := uniqueHolder(t, b, "one"); got != 0 {
		t.Fatalf("the key is still held by %d after its job ended", got)
	}

	// Several queues: one transaction, whose EXEC reply is lost with the
	// rest of the pipeline.
	lost = loseReplies(t, b, "insert", 1)
	_, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("a", "two"), keyed("b", "three")})
	wantLost(t, "JobInsertMany over two queues", err, lost)
	var held []int64
	for _, k := range []struct{ queue, key string }{{"a", "two"}, {"b", "three"}} {
		id := uniqueHolder(t, b, k.key)
		if h := jobHash(t, b, k.queue, id); id == 0 || h["u"] != k.key {
			t.Fatalf("after the lost insert key %s is held by %d, whose hash is %v", k.key, id, h)
		}
		held = append(held, id)
	}
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("a", "two"), keyed("b", "three")})
	if err != nil || len(res) != 2 || !res[0].Duplicate || !res[1].Duplicate || res[0].ID != held[0] || res[1].ID != held[1] {
		t.Fatalf("the insert over two queues sent again = %+v, %v; want duplicates of %v", res, err, held)
	}

	// Failed short of the server: nothing was written, the key is free.
	injectFault(t, b, func(fc faultCmd, sent bool) error {
		if !sent && fc.script == "insert" {
			return errors.New("injected: connection refused")
		}
		return nil
	})
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "four")}); !isNotSent(err) {
		t.Fatalf("insert failing unsent: %v; want a not-sent error", err)
	}
	if got := uniqueHolder(t, b, "four"); got != 0 {
		t.Fatalf("the key of an insert that never reached the server is held by %d", got)
	}
	b.c.inject.Store(nil)
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "four")})
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert after the unsent one = %+v, %v; want a new job", res, err)
	}
}

// TestLostReplyReplay: a replay whose reply was lost made its job live
// once, holding its unique key; the replay sent again finds nothing to
// move and leaves the key with the job.
func TestLostReplyReplay(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "k")})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].ID
	old := claimN(t, b, 1, time.Minute, "q")[0]
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: old.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
		t.Fatal(err)
	}
	failed, err := b.FailedList(ctx, backend.FailedListParams{})
	if err != nil || len(failed) != 1 || failed[0].JobID != id {
		t.Fatalf("FailedList = %v, %v; want job %d", failed, err, id)
	}

	lost := loseReplies(t, b, "replay", 1)
	_, err = b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{id}})
	wantLost(t, "FailedReplay", err, lost)
	live := func(when string) {
		t.Helper()
		row, err := b.JobGet(ctx, id)
		if err != nil || row.Status != backend.StatePending || row.Token != old.Token {
			t.Fatalf("%s: JobGet = %+v, %v; want it pending, its token %d kept", when, row, err, old.Token)
		}
		if f, err := b.FailedList(ctx, backend.FailedListParams{}); err != nil || len(f) != 0 {
			t.Fatalf("%s: FailedList = %v, %v; want none: the job lives once", when, f, err)
		}
		if got := uniqueHolder(t, b, "k"); got != id {
			t.Fatalf("%s: the key is held by %d, want the live job %d", when, got, id)
		}
	}
	live("after the lost replay")

	if _, err := b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{id}}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the replay sent again: %v; want ErrNotFound (its failed job is gone)", err)
	}
	live("after the replay by ID sent again")
	if r, err := b.FailedReplay(ctx, backend.FailedReplayParams{}); err != nil || r.Replayed != 0 {
		t.Fatalf("replay by filter = %+v, %v; want nothing replayed", r, err)
	}
	live("after a replay by filter")
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "k")})
	if err != nil || !res[0].Duplicate || res[0].ID != id {
		t.Fatalf("insert with the key = %+v, %v; want a duplicate of %d", res, err, id)
	}
	cur := claimN(t, b, 1, time.Minute, "q")[0]
	if cur.ID != id || cur.Attempts != 1 || cur.Token <= old.Token {
		t.Fatalf("claim after the replay: job %d attempt %d token %d; want job %d, attempt 1, above token %d", cur.ID, cur.Attempts, cur.Token, id, old.Token)
	}
}

// TestInsertScriptFlush: a batch over several queues is one transaction
// on a single server; when the server has flushed its scripts, every
// EVALSHA in it is refused unrun, and the whole transaction is sent again
// with the source, so the batch stays all or nothing. A private server:
// SCRIPT FLUSH would reach every other test's scripts.
func TestInsertScriptFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	b := openURL(t, srv.URL, Options{Logger: quiet})
	ctx := t.Context()
	ctl, err := redistest.Client(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	flush := func() error { return ctl.Do(ctx, ctl.B().ScriptFlush().Build()).Error() }
	batch := append(benchJobs(2, "a"), benchJobs(2, "b")...)
	// Register the queues: the flush is for the insert itself.
	if _, err := b.JobInsertMany(ctx, append(benchJobs(1, "a"), benchJobs(1, "b")...)); err != nil {
		t.Fatal(err)
	}

	// The flush comes between the IDs' minting and the insert, and the
	// insert sent again with the source fails on its way: nothing is
	// written. Sending its calls again one by one would have written a's.
	var mu sync.Mutex
	var evals []string
	injectFault(t, b, func(fc faultCmd, sent bool) error {
		if sent || fc.script != "insert" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		evals = append(evals, fc.name)
		switch {
		case fc.name == "EVALSHA" && len(evals) == 1:
			return flush()
		case fc.name == "EVAL" && len(evals) == 4:
			return errors.New("injected: connection reset")
		}
		return nil
	})
	if _, err := b.JobInsertMany(ctx, batch); err == nil {
		t.Fatal("the batch whose resend failed succeeded")
	}
	if want := []string{"EVALSHA", "EVALSHA", "EVAL", "EVAL"}; !slices.Equal(evals, want) {
		t.Fatalf("insert commands sent %v, want %v (the transaction, then again with the source)", evals, want)
	}
	if p := pendingIn(t, b); p["a"] != 1 || p["b"] != 1 {
		t.Fatalf("pending after the failed batch: %v; want only the first jobs (1 each): all or nothing", p)
	}

	// Flushed, and nothing else goes wrong: written once.
	evals = nil
	injectFault(t, b, func(fc faultCmd, sent bool) error {
		if !sent && fc.script == "insert" && fc.name == "EVALSHA" {
			mu.Lock()
			defer mu.Unlock()
			evals = append(evals, fc.name)
			if len(evals) == 1 {
				return flush()
			}
		}
		return nil
	})
	res, err := b.JobInsertMany(ctx, batch)
	if err != nil || len(res) != len(batch) {
		t.Fatalf("batch after a flush = %v, %v", res, err)
	}
	if p := pendingIn(t, b); p["a"] != 3 || p["b"] != 3 {
		t.Fatalf("pending after the batch: %v; want 3 each: written once", p)
	}
	for _, r := range res {
		if _, err := b.JobGet(ctx, r.ID); err != nil {
			t.Fatalf("JobGet(%d) of the batch: %v", r.ID, err)
		}
	}

	// Unique keys: a flush before every script run (reservation, minting,
	// insert) changes nothing of the outcome.
	injectFault(t, b, func(fc faultCmd, sent bool) error {
		if !sent && fc.name == "EVALSHA" {
			return flush()
		}
		return nil
	})
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("a", "ka"), keyed("b", "kb"), benchJobs(1, "a")[0]})
	if err != nil || res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("unique batch with flushes = %+v, %v", res, err)
	}
	for i, k := range []string{"ka", "kb"} {
		if got := uniqueHolder(t, b, k); got != res[i].ID {
			t.Fatalf("key %s held by %d, want %d", k, got, res[i].ID)
		}
	}
	if p := pendingIn(t, b); p["a"] != 5 || p["b"] != 4 {
		t.Fatalf("pending after the unique batch: %v; want a 5, b 4", p)
	}
}

// TestClaimTokenFloor: a claim's token is above the job's last one and not
// below the Redis clock in µs, so it stays above the token of a claim that
// a restart lost (its k rolled back) and, after a replay, above every
// earlier claim's.
func TestClaimTokenFloor(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	id := insertJob(t, b, "q")
	if row, err := b.JobGet(ctx, id); err != nil || row.Token != 0 {
		t.Fatalf("JobGet of a job never claimed = %+v, %v; want token 0", row, err)
	}
	setK := func(k string) {
		t.Helper()
		key := b.keys.queue("q").job(id)
		if err := b.c.rdb.Do(ctx, b.c.rdb.B().Hset().Key(key).FieldValue().FieldValue("k", k).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	release := func(row *backend.JobRow) {
		t.Helper()
		if _, err := b.JobRelease(ctx, []backend.JobRef{row.Ref()}); err != nil {
			t.Fatal(err)
		}
	}
	first := claimN(t, b, 1, time.Minute, "q")[0]
	if us := first.ReservedAt.UnixMicro(); first.Token < us {
		t.Fatalf("first token %d is below the claim's time %d µs", first.Token, us)
	}
	release(first)
	setK("7") // the restart lost the claims since the job's k was 7
	second := claimN(t, b, 1, time.Minute, "q")[0]
	if second.Token <= first.Token {
		t.Fatalf("token %d after k rolled back is not above the lost claim's %d", second.Token, first.Token)
	}
	release(second)
	ahead := second.Token + 1_000_000_000 // k ahead of the clock: tokens still grow by one
	setK(strconv.FormatInt(ahead, 10))
	third := claimN(t, b, 1, time.Minute, "q")[0]
	if third.Token != ahead+1 {
		t.Fatalf("token %d, want %d: one above the job's last", third.Token, ahead+1)
	}
	if row, err := b.JobGet(ctx, id); err != nil || row.Token != third.Token {
		t.Fatalf("JobGet = %+v, %v; want token %d", row, err, third.Token)
	}
}

// TestConcurrentReplays: two replays of one failed job with a unique key,
// the second in flight while the first moves the job (as when a replay
// is sent again while the first, its reply late, still runs): whichever
// reserved the key last, the replay that finds the job gone leaves the
// key with the live job.
func TestConcurrentReplays(t *testing.T) {
	for _, before := range []string{"ureserve", "replay"} {
		t.Run("OtherBefore_"+before, func(t *testing.T) {
			b := openTest(t, Options{})
			other := openTest(t, Options{KeyPrefix: b.opts.KeyPrefix})
			ctx := t.Context()
			res, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "k")})
			if err != nil {
				t.Fatal(err)
			}
			id := res[0].ID
			row := claimN(t, b, 1, time.Minute, "q")[0]
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeFail, Error: "boom"}}}); err != nil {
				t.Fatal(err)
			}
			failed, err := b.FailedList(ctx, backend.FailedListParams{})
			if err != nil || len(failed) != 1 || failed[0].JobID != id {
				t.Fatalf("FailedList = %v, %v; want job %d", failed, err, id)
			}
			var once sync.Once
			var otherErr error
			injectFault(t, b, func(fc faultCmd, sent bool) error {
				if !sent && fc.script == before {
					once.Do(func() {
						_, otherErr = other.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{id}})
					})
				}
				return nil
			})
			_, err = b.FailedReplay(ctx, backend.FailedReplayParams{IDs: []int64{id}})
			if otherErr != nil {
				t.Fatalf("the other replay: %v", otherErr)
			}
			if !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("the replay that lost the race: %v; want ErrNotFound", err)
			}
			if row, err := b.JobGet(ctx, id); err != nil || row.Status != backend.StatePending {
				t.Fatalf("JobGet = %+v, %v; want the job pending", row, err)
			}
			if got := uniqueHolder(t, b, "k"); got != id {
				t.Fatalf("the key is held by %d, want the live job %d", got, id)
			}
		})
	}
}

// TestCheckedConnFirstWriteOnly: the dead-connection check of an idle
// connection looks at the socket before a request's first byte only.
// rueidis writes a pipeline larger than its buffer in several writes; by
// the second, the server may have run the first command and sent its
// reply, which the check would take for a dead connection, and do would
// send the pipeline again, running that command twice. The writes here are
// those of such a pipeline: an INCR and the start of a PING, then (once
// the INCR's reply is on the socket) the rest.
func TestCheckedConnFirstWriteOnly(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := t.Context()
	conn, err := dialChecked(ctx, fmt.Sprintf("127.0.0.1:%d", srv.Port), &net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cc := conn
	if cc.rc == nil {
		t.Skip("connections are not checked on this platform")
	}
	time.Sleep(checkIdle + 50*time.Millisecond) // idle: the next request is checked
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nPI")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); peekDead(cc.rc) == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reply to INCR within 5s")
		}
	}
	if _, err := conn.Write([]byte("NG\r\n")); err != nil {
		t.Fatalf("the second write of one request failed (%v): sent again, its INCR would run twice", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	want := ":1\r\n+PONG\r\n"
	got := make([]byte, 0, len(want))
	for len(got) < len(want) {
		buf := make([]byte, len(want)-len(got))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read the replies: %v (got %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != want {
		t.Fatalf("replies %q, want %q", got, want)
	}

	// The check itself still works: once the server closed the idle
	// connection, the next request fails unsent.
	if _, err := conn.Write([]byte("*1\r\n$4\r\nQUIT\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := io.ReadFull(conn, buf); err != nil || string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("QUIT: %q, %v", buf[:n], err)
	}
	time.Sleep(checkIdle + 50*time.Millisecond)
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); !isStaleConn(err) {
		t.Fatalf("write to a connection the server closed: %v; want it refused unsent", err)
	}
}

// TestUniqueDuplicateNamesLiveJob: a key reserved for a job that was never
// written (an insert whose reply was lost before its script ran, or one
// still in flight elsewhere) does not make another insert of the key a
// duplicate naming that job, which would hand its caller the ID of a job
// that never exists: the insert waits for the job to appear, fails as
// unavailable while it does not, and inserts once the reservation is old
// enough to be taken over.
func TestUniqueDuplicateNamesLiveJob(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	// An ID of queue q whose job is gone: the holder the reservation names.
	res, err := b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "gone")})
	if err != nil {
		t.Fatal(err)
	}
	ghost := res[0].ID
	row := claimN(t, b, 1, time.Minute, "q")[0]
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	// The reservation an insert made before its script was lost.
	if _, err := scriptUReserve.eval(ctx, b.c, scriptUReserve.prefixKeys(b.keys), []any{"k", idHex(ghost)}); err != nil {
		t.Fatal(err)
	}
	b.grace = 3 * time.Second

	start := time.Now()
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "k")})
	if err == nil {
		t.Fatalf("insert of a key reserved for job %d, which does not exist = %+v; want no duplicate naming it", ghost, res)
	}
	if !errors.Is(err, backend.ErrUnavailable) || time.Since(start) < inFlightWait {
		t.Fatalf("insert within the grace period: %v after %s; want ErrUnavailable after waiting %s", err, time.Since(start), inFlightWait)
	}
	if got := uniqueHolder(t, b, "k"); got != ghost {
		t.Fatalf("the key is held by %d after the refused insert, want still %d", got, ghost)
	}

	time.Sleep(b.grace)
	res, err = b.JobInsertMany(ctx, []backend.InsertParams{keyed("q", "k")})
	if err != nil || res[0].Duplicate || res[0].ID == ghost {
		t.Fatalf("insert once the reservation is abandoned = %+v, %v; want a new job", res, err)
	}
	if h := jobHash(t, b, "q", res[0].ID); h["u"] != "k" || uniqueHolder(t, b, "k") != res[0].ID {
		t.Fatalf("the new job %d holds %v, the key is held by %d", res[0].ID, h, uniqueHolder(t, b, "k"))
	}
}
