package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// keyErr is the error of a failed keyed attempt: its URL's password must
// never reach an answer.
const keyErr = "charge failed: dial postgres://bob:hunter2@db/x"

// enqueueKeyed enqueues n jobs of key on queue, one attempt each, and
// returns their IDs in order.
func enqueueKeyed(t testing.TB, c *jobq.Client, queue, key string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		id, err := c.Enqueue(context.Background(), "charge", map[string]any{"n": i}, jobq.Queue(queue), jobq.Key(key), jobq.MaxAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// claimIDs claims up to max jobs of queue and returns their IDs, in the
// order the claim gave them.
func claimIDs(t testing.TB, b backend.Backend, queue string, max int) ([]int64, []*backend.JobRow) {
	t.Helper()
	rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{queue}, Max: max, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids, rows
}

// endRows ends claimed rows: failed for good with keyErr when fail is set
// (each has one attempt), else done.
func endRows(t testing.TB, b backend.Backend, fail bool, rows ...*backend.JobRow) {
	t.Helper()
	outs := make([]backend.Outcome, len(rows))
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
		if fail {
			outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: keyErr}
		}
	}
	if _, err := b.JobComplete(context.Background(), backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
}

// wantClaim claims up to 10 jobs of queue and fails unless exactly want
// came, in that order; it returns their rows.
func wantClaim(t testing.TB, b backend.Backend, queue string, want ...int64) []*backend.JobRow {
	t.Helper()
	got, rows := claimIDs(t, b, queue, 10)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claim of %s gave %v, want %v", queue, got, want)
	}
	return rows
}

// noKeys is a backend without keys, queue control nor anything else
// optional: the memory backend behind a type that shows only its
// Backend methods.
type noKeys struct{ backend.Backend }

// JobInsertMany refuses a keyed job, as the contract asks of a backend
// without KeyController (the memory backend underneath would take it).
func (n noKeys) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if err := backend.RefuseKeys(params); err != nil {
		return nil, err
	}
	return n.Backend.JobInsertMany(ctx, params)
}

// TestKeyFilters: the failed list, the job list, and replay and purge by
// filter narrow to one key; a bad key is a 400 naming "key" that moves
// nothing; and on a backend without keys a key filter is 501, not
// ignored (ignored, a purge of one key's failed jobs would purge every
// one of the queue's).
func TestKeyFilters(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	a := enqueueKeyed(t, e.client, "q", "acct:1", 2)
	b := enqueueKeyed(t, e.client, "q", "acct:2", 2)
	endRows(t, e.b, true, wantClaim(t, e.b, "q", a[0], a[1], b[0], b[1])[:3]...)
	e.wantCounts(0, 0, 3)

	ids := func(path, field string) string {
		r := e.do(req{path: path})
		e.want(r, http.StatusOK, "")
		var out []int64
		for _, j := range r.body[field].([]any) {
			out = append(out, num(j.(map[string]any)["id"]))
		}
		return fmt.Sprint(out)
	}
	if got, want := ids("/api/v1/failed?key=acct:1", "failed"), fmt.Sprint([]int64{a[1], a[0]}); got != want {
		t.Fatalf("failed jobs of acct:1: %s, want %s", got, want)
	}
	if got, want := ids("/api/v1/jobs?state=reserved&key=acct:2", "jobs"), fmt.Sprint([]int64{b[1]}); got != want {
		t.Fatalf("running jobs of acct:2: %s, want %s", got, want)
	}
	if got := ids("/api/v1/jobs?state=reserved&key=acct:1", "jobs"); got != "[]" {
		t.Fatalf("running jobs of acct:1: %s, want none", got)
	}

	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/failed?key=%01", ""},
		{"GET", "/api/v1/jobs?key=%ff", ""},
		{"POST", "/api/v1/failed/replay", `{"all":true,"key":"\u0001"}`},
		{"POST", "/api/v1/failed/purge", `{"all":true,"key":"` + strings.Repeat("k", backend.MaxKeyLen+1) + `"}`},
	} {
		q := req{method: c.method, path: c.path}
		if c.body != "" {
			q.body = c.body
		}
		r := e.do(q)
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != "key" {
			t.Errorf("%s %s: field %q, want key", c.method, c.path, r.errorField())
		}
	}
	e.wantCounts(0, 0, 3)

	// Replay by key: that key's only, back to pending.
	r := e.do(req{method: "POST", path: "/api/v1/failed/replay", body: map[string]any{"all": true, "key": "acct:1"}})
	e.want(r, http.StatusOK, "")
	if r.num("replayed") != 2 {
		t.Fatalf("replay of acct:1 answered %s", r.raw)
	}
	e.wantCounts(2, 0, 1)
	// Purge by key: that key's only.
	p := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"all": true, "queue": "q", "key": "acct:1"}})
	e.want(p, http.StatusOK, "")
	if p.num("purged") != 0 {
		t.Fatalf("purge of acct:1 (none failed now) answered %s", p.raw)
	}
	if _, err := e.insp.Failed(context.Background(), b[0]); err != nil {
		t.Fatalf("acct:2's failed job after a purge of acct:1: %v", err)
	}

	nk := newEnvOn(t, noKeys{memoryBackend(t)}, Options{})
	nk.failJobs("q", 2)
	for _, q := range []req{
		{path: "/api/v1/failed?key=k"},
		{path: "/api/v1/jobs?key=k"},
		{method: "POST", path: "/api/v1/failed/purge", body: `{"all":true,"key":"k"}`},
		{method: "POST", path: "/api/v1/failed/replay", body: `{"all":true,"queue":"q","key":"k"}`},
	} {
		nk.want(nk.do(q), http.StatusNotImplemented, "not_supported")
	}
	nk.wantCounts(0, 0, 2)
	nk.want(nk.do(req{path: "/api/v1/failed?queue=q"}), http.StatusOK, "")
}
