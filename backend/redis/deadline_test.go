package redis

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestDeadlineText: the error text the scripts give an expired job is
// backend.DeadlineError of its deadline, to the byte, for deadlines of
// any year a job may have (leap days, centuries, the last µs of a second
// and of 9999), and its prefix is the Go constant.
func TestDeadlineText(t *testing.T) {
	want := "local DEADLINE_PREFIX = '" + backend.DeadlineErrorPrefix + "'"
	if !strings.Contains(scriptsSource, want) {
		t.Fatalf("scripts.lua does not define %q", want)
	}
	b := openTest(t, Options{})
	s := newScript("deadlinetext", withHelpers(`
local out = {}
for i = 1, #ARGV do out[i] = deadline_text(ARGV[i]) end
return out`))
	times := []time.Time{
		time.Unix(0, 0),
		time.Unix(1, 999999000),
		time.Date(2000, 2, 29, 23, 59, 59, 999999000, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 12, 31, 12, 0, 0, 500000, time.UTC),
		time.Date(2255, 6, 1, 1, 2, 3, 4000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		times = append(times, time.UnixMicro(rng.Int64N(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro())))
	}
	args := make([]any, len(times))
	for i, tm := range times {
		args[i] = micro(tm)
	}
	res, err := b.c.eval(t.Context(), s, []string{b.keys.queue("q").lastTS}, args)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := res.([]any)
	for i, tm := range times {
		if want := backend.DeadlineError(tm); i >= len(got) || got[i] != want {
			t.Errorf("deadline_text(%s) in Lua = %v, want %q", args[i], got[i], want)
		}
	}
}

// deadlined is a job of queue q with deadline d.
func deadlined(q string, d time.Time) backend.InsertParams {
	return backend.InsertParams{Queue: q, Type: "t", Payload: []byte(`{}`), MaxAttempts: 3, Deadline: d}
}

// insertIDs inserts params and returns the IDs.
func insertIDs(t *testing.T, b backend.Backend, params ...backend.InsertParams) []int64 {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), params)
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// waitPast waits until d has passed by the clock of the server holding
// queue q of b (the one the scripts go by), polling it.
func waitPast(t *testing.T, b *Backend, q string, d time.Time) {
	t.Helper()
	k := b.keys.queue(q)
	for limit := time.Now().Add(time.Until(d) + 10*time.Second); ; {
		res, err := b.c.eval(t.Context(), scriptNow.script, scriptNow.keysOf(k), nil)
		us, err2 := asInt(res)
		if err != nil || err2 != nil {
			t.Fatalf("read the server's clock: %v, %v", err, err2)
		}
		if backend.Expired(d, time.UnixMicro(us)) {
			return
		}
		if time.Now().After(limit) {
			t.Fatalf("the server's clock did not pass %v", d)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// wantDeadlineFailed asserts that job id is a failed job with the error
// of deadline d and attempts attempts.
func wantDeadlineFailed(t *testing.T, b backend.Backend, id int64, d time.Time, attempts int) {
	t.Helper()
	f, err := b.FailedGet(t.Context(), id)
	if err != nil || f.Error != backend.DeadlineError(d) || f.Attempts != attempts {
		t.Fatalf("FailedGet(%d) = %+v, %v; want error %q, attempts %d", id, f, err, backend.DeadlineError(d), attempts)
	}
}

// TestClaimExpiresBeyondLimit: a claim whose first step (expire, at most
// the promotion limit of jobs) leaves expired jobs at the head of the
// ready set still claims none of them: it moves those it meets to the
// failed set, and reports them, with the unique keys they held freed.
func TestClaimExpiresBeyondLimit(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	d := time.Now().Add(500 * time.Millisecond)
	var ps []backend.InsertParams
	for i := range 4 {
		p := deadlined("q", d.Add(time.Duration(i)*time.Millisecond))
		p.Priority = 10
		p.UniqueKey = "u" + string(rune('a'+i))
		ps = append(ps, p)
	}
	plain := deadlined("q", time.Time{})
	ids := insertIDs(t, b, append(ps, plain, plain)...)
	waitPast(t, b, "q", d.Add(3*time.Millisecond))

	// A promotion limit of 1: expire moves the first; the claim of 3
	// meets the next three first in claim order.
	k := b.keys.queue("q")
	call := scriptClaim.on(k, []any{3, leaseMicros(time.Minute), 1, k.channel, b.origin})
	if err := b.c.evalAll(ctx, []*evalCall{call}, false); err != nil {
		t.Fatal(err)
	}
	rows, _, err := b.readClaim(ctx, "q", call.res)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if slices.Contains(ids[:4], r.ID) {
			t.Fatalf("claimed job %d, past its deadline", r.ID)
		}
	}
	for i, id := range ids[:4] {
		wantDeadlineFailed(t, b, id, ps[i].Deadline, 0)
		if h := uniqueHolder(t, b, ps[i].UniqueKey); h != 0 {
			t.Errorf("unique key %s still held by %d after its job expired", ps[i].UniqueKey, h)
		}
	}
	if n := zcard(t, b, k.deadlines); n != 0 {
		t.Errorf("deadlines set holds %d jobs, want none", n)
	}
	res, err := b.LeaseSweep(ctx, backend.SweepParams{})
	if err != nil {
		t.Fatal(err)
	}
	// The one expire moved is reported by the sweep like the three the
	// claim met: the claim reported all four.
	var expired []int64
	for _, j := range res.Jobs {
		if j.Expired && j.Failed && j.Queue == "q" && j.Type == "t" {
			expired = append(expired, j.Ref.ID)
		}
	}
	slices.Sort(expired)
	if res.Expired != 4 || !slices.Equal(expired, ids[:4]) {
		t.Fatalf("sweep after the claim = %+v; want the 4 expired jobs %v", res, ids[:4])
	}
	if res, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil || len(res.Jobs) != 0 {
		t.Fatalf("second sweep = %+v, %v; want nothing", res, err)
	}
	// The keys are free: inserting them again makes new jobs.
	again := insertIDs(t, b, keyed("q", "ua"))
	if slices.Contains(ids, again[0]) {
		t.Fatalf("insert of a freed key named job %d", again[0])
	}
}

// TestMultiQueueClaimSkipsExpired: a claim over several queues sees past
// the expired jobs at a queue's head when it shares the claim out (peek),
// so they take no share: it claims as many jobs as it asked for.
func TestMultiQueueClaimSkipsExpired(t *testing.T) {
	b := openTest(t, Options{})
	d := time.Now().Add(500 * time.Millisecond)
	urgent := deadlined("a", d)
	urgent.Priority = 10
	plain := deadlined("a", time.Time{})
	insertIDs(t, b, urgent, urgent, urgent, plain)
	plainB := deadlined("b", time.Time{})
	insertIDs(t, b, plainB, plainB)
	waitPast(t, b, "a", d)
	rows := claimN(t, b, 3, time.Minute, "a", "b")
	for _, r := range rows {
		if r.Priority == 10 {
			t.Fatalf("claimed job %d, past its deadline", r.ID)
		}
	}
}

// TestDeadlineSetKept: the deadlines set holds exactly the waiting jobs
// with a deadline, whatever moves them: a claim takes a job out, a retry,
// a release and a rescue put it back, a cancel, a completion and an
// expiry take it out for good. A released job past its deadline, and a
// rescued one, expire like any other waiting job.
func TestDeadlineSetKept(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	k := b.keys.queue("q")
	in := func(ids ...int64) {
		t.Helper()
		var got []int64
		for _, id := range ids {
			if _, ok := zscore(t, b, k.deadlines, tsHex(id)); ok {
				got = append(got, id)
			}
		}
		if n := zcard(t, b, k.deadlines); int(n) != len(ids) || len(got) != len(ids) {
			t.Fatalf("deadlines set holds %d jobs, of them %v; want exactly %v", n, got, ids)
		}
	}
	far := time.Now().Add(time.Hour)
	ids := insertIDs(t, b, deadlined("q", far), deadlined("q", far), deadlined("q", far))
	in(ids...)
	if row, err := b.JobGet(ctx, ids[0]); err != nil || !row.Deadline.Equal(far.Truncate(time.Microsecond)) {
		t.Fatalf("JobGet = %+v, %v; want deadline %v", row, err, far)
	}
	rows := claimN(t, b, 3, time.Minute, "q")
	in()
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
		{Ref: rows[0].Ref(), Kind: backend.OutcomeRetry, RetryDelay: time.Hour, Error: "again"},
		{Ref: rows[1].Ref(), Kind: backend.OutcomeDone},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobRelease(ctx, []backend.JobRef{rows[2].Ref()}); err != nil {
		t.Fatal(err)
	}
	in(rows[0].ID, rows[2].ID)
	if res, err := b.JobCancel(ctx, []int64{rows[0].ID}); err != nil || len(res) != 1 || res[0].Outcome != backend.CancelCancelled {
		t.Fatalf("JobCancel = %v, %v", res, err)
	}
	in(rows[2].ID)

	// A rescued job goes back to the set, and a released one past its
	// deadline expires; so does a rescued one, in the same sweep.
	soon := time.Now().Add(700 * time.Millisecond)
	more := insertIDs(t, b, deadlined("q", soon), deadlined("q", soon))
	in(rows[2].ID, more[0], more[1])
	claimed, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 4, Lease: 300 * time.Millisecond})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim = %d jobs, %v; want 3", len(claimed), err)
	}
	in()
	var released, lapsed backend.JobRef
	for _, r := range claimed {
		switch r.ID {
		case more[0]:
			released = r.Ref()
		case more[1]:
			lapsed = r.Ref()
		}
	}
	if _, err := b.JobRelease(ctx, []backend.JobRef{released}); err != nil {
		t.Fatal(err)
	}
	waitPast(t, b, "q", soon)
	res, err := b.LeaseSweep(ctx, backend.SweepParams{})
	if err != nil {
		t.Fatal(err)
	}
	var rescued, expired []int64
	for _, j := range res.Jobs {
		if j.Expired {
			expired = append(expired, j.Ref.ID)
		} else if !j.Failed {
			rescued = append(rescued, j.Ref.ID)
		}
	}
	slices.Sort(expired)
	if !slices.Contains(rescued, lapsed.ID) || !slices.Equal(expired, more) || res.Expired != 2 {
		t.Fatalf("sweep = %+v; want job %d rescued, then %v expired", res, lapsed.ID, more)
	}
	wantDeadlineFailed(t, b, more[0], soon, 0) // its free release un-counted the attempt
	wantDeadlineFailed(t, b, more[1], soon, 1)
	// The other jobs' rescues left the set holding what still waits.
	in(rows[2].ID)
	if _, err := b.FailedGet(ctx, rows[2].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job %d, its deadline an hour off, is failed: %v", rows[2].ID, err)
	}
}

// TestDeadlineBatchAcrossQueues: an insert over several queues checks
// each queue's deadlines against the clock of the server holding it, and
// one passed deadline refuses the whole batch, naming its item, with
// nothing written.
func TestDeadlineBatchAcrossQueues(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	far := time.Now().Add(time.Hour).Truncate(time.Second)
	_, err := b.JobInsertMany(ctx, []backend.InsertParams{
		deadlined("a", far), deadlined("b", far), deadlined("a", time.Time{}), deadlined("b", time.Now().Add(-time.Second)),
	})
	var ie *backend.InputError
	if !errors.As(err, &ie) || ie.Field != "deadline" || !strings.Contains(err.Error(), "job 4 of 4") {
		t.Fatalf("insert with a passed deadline in queue b = %v; want a deadline input error naming job 4 of 4", err)
	}
	if st, err := b.QueueStats(ctx); err != nil || len(st) != 0 {
		t.Fatalf("QueueStats after the refused batch = %+v, %v; want nothing", st, err)
	}
	ids := insertIDs(t, b, deadlined("a", far), deadlined("b", far.Add(time.Second)), deadlined("a", time.Time{}))
	for i, want := range []time.Time{far, far.Add(time.Second), {}} {
		if row, err := b.JobGet(ctx, ids[i]); err != nil || !row.Deadline.Equal(want) {
			t.Errorf("JobGet(%d) = %+v, %v; want deadline %v", ids[i], row, err, want)
		}
	}
}
