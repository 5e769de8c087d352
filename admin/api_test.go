package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestAPI drives every route over HTTP against each durable backend and
// checks what each answer says against what the backend holds.
func TestAPI(t *testing.T) {
	forEachStore(t, func(t *testing.T, storeURL string) {
		e := newEnv(t, storeURL, Options{Tokens: testTokens})
		t.Run("enqueue", func(t *testing.T) { testEnqueue(t, e.with(t)) })
		t.Run("bad input", func(t *testing.T) { testBadInput(t, e.with(t)) })
		t.Run("lists and detail", func(t *testing.T) { testLists(t, e.with(t)) })
		t.Run("failed", func(t *testing.T) { testFailed(t, e.with(t)) })
		t.Run("queues", func(t *testing.T) { testQueues(t, e.with(t)) })
		t.Run("cancel", func(t *testing.T) { testCancel(t, e.with(t)) })
		t.Run("schedules", func(t *testing.T) { testSchedules(t, e.with(t)) })
		t.Run("errors", func(t *testing.T) { testErrors(t, e.with(t)) })
		t.Run("scopes", func(t *testing.T) { testScopes(t, e.with(t)) })
		t.Run("cross origin", func(t *testing.T) { testCrossOrigin(t, e.with(t)) })
	})
}

// reset empties the env's backend of live and failed jobs.
func (e *env) reset() {
	e.t.Helper()
	ctx := context.Background()
	for _, st := range []jobq.JobState{jobq.StatePending, jobq.StateScheduled, jobq.StateReserved} {
		for {
			rows, err := e.insp.JobsPage(ctx, st, jobq.JobFilter{}, 1000, 0)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(rows) == 0 {
				break
			}
			ids := make([]int64, len(rows))
			for i, r := range rows {
				ids[i] = r.ID
			}
			if _, err := e.insp.Cancel(ctx, ids...); err != nil {
				e.t.Fatal(err)
			}
			if st == jobq.StateReserved {
				break // cancelling ones stay reserved; the tests never leave any
			}
		}
	}
	if _, err := e.insp.PurgeAll(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.wantCounts(0, 0, 0)
}

func testEnqueue(t *testing.T, e *env) {
	e.reset()
	// A deadline is stored (or refused by a backend without them, 501);
	// one already passed by the store's clock is bad input.
	dl := e.do(req{method: "POST", path: "/api/v1/jobs", token: tok(enqueueToken), body: map[string]any{"type": "quote", "deadline": "10m"}})
	if dl.status != http.StatusNotImplemented {
		e.want(dl, http.StatusCreated, "")
		row, err := e.b.JobGet(context.Background(), dl.num("id"))
		if err != nil || row.Deadline.Before(time.Now().Add(9*time.Minute)) || row.Deadline.After(time.Now().Add(11*time.Minute)) {
			t.Fatalf("job with deadline 10m: %+v, %v", row, err)
		}
		e.want(e.do(req{method: "POST", path: "/api/v1/jobs", token: tok(enqueueToken), body: map[string]any{"type": "quote", "deadline": "2020-01-01T00:00:00Z"}}),
			http.StatusBadRequest, "")
		e.reset()
	}
	r := e.do(req{method: "POST", path: "/api/v1/jobs", token: tok(enqueueToken), body: map[string]any{
		"type": "mail", "queue": "q1", "payload": map[string]any{"to": "a@example.com", "nested": []any{map[string]any{"Password": "hunter2"}}},
		"priority": 5, "max_attempts": 7, "metadata": map[string]string{"tenant": "t1", "Authorization": "Bearer xyz"},
	}})
	e.want(r, http.StatusCreated, "")
	id := r.num("id")
	row, err := e.b.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("the answered id %d is not in the backend: %v", id, err)
	}
	if row.Queue != "q1" || row.Type != "mail" || row.Priority != 5 || row.MaxAttempts != 7 || row.Metadata["tenant"] != "t1" {
		t.Fatalf("stored job %+v does not match the request", row)
	}

	// The Idempotency-Key header: the first request creates, a retry
	// answers 200 with the same id and writes nothing.
	body := map[string]any{"type": "mail", "queue": "q1", "payload": map[string]int{"n": 1}}
	first := e.do(req{method: "POST", path: "/api/v1/jobs", body: body, headers: map[string]string{"Idempotency-Key": "order-42"}})
	e.want(first, http.StatusCreated, "")
	again := e.do(req{method: "POST", path: "/api/v1/jobs", body: body, headers: map[string]string{"Idempotency-Key": "order-42"}})
	e.want(again, http.StatusOK, "")
	if again.num("id") != first.num("id") || again.body["duplicate"] != true {
		t.Fatalf("retry answered %s, want the first id %d as a duplicate", again.raw, first.num("id"))
	}
	if row, _ := e.b.JobGet(context.Background(), first.num("id")); row == nil || row.UniqueKey != "order-42" {
		t.Fatalf("the header did not become the unique key: %+v", row)
	}
	e.wantCounts(2, 0, 0)

	// "unique" computes the key from the job's parts: the same args in
	// another key order are a duplicate.
	ub := func(payload string) map[string]any {
		return map[string]any{"type": "mail", "queue": "q1", "payload": json.RawMessage(payload), "unique": map[string]any{"args": true, "period": "1h"}}
	}
	u1 := e.do(req{method: "POST", path: "/api/v1/jobs", body: ub(`{"to":"b@x","n":2}`)})
	e.want(u1, http.StatusCreated, "")
	u2 := e.do(req{method: "POST", path: "/api/v1/jobs", body: ub(`{"n":2,"to":"b@x"}`)})
	e.want(u2, http.StatusOK, "")
	if u2.num("id") != u1.num("id") || u2.body["duplicate"] != true {
		t.Fatalf("same args reordered answered %s, want the first id %d as a duplicate", u2.raw, u1.num("id"))
	}
	ub2 := ub(`{"to":"b@x","n":2}`)
	ub2["on_conflict"], ub2["payload"] = "replace", json.RawMessage(`{"n":2,"to":"b@x"}`)
	if u3 := e.do(req{method: "POST", path: "/api/v1/jobs", body: ub2}); u3.status == http.StatusNotImplemented {
		e.t.Logf("no conflict modes: %s", u3.raw)
	} else {
		e.want(u3, http.StatusOK, "")
		if u3.num("id") != u1.num("id") || u3.body["replaced"] != true {
			t.Fatalf("replace answered %s, want the first id %d replaced", u3.raw, u1.num("id"))
		}
	}
	e.want(e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/jobs/%d/cancel", u1.num("id"))}), http.StatusOK, "")
	e.wantCounts(2, 0, 0)

	// A delayed and a run_at job are scheduled.
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"type": "later", "delay": "1h"}}), http.StatusCreated, "")
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"type": "later", "run_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}), http.StatusCreated, "")
	e.wantCounts(2, 2, 0)

	// A batch: all inserted, then the retried batch is all duplicates.
	batch := map[string]any{"jobs": []map[string]any{{"type": "a"}, {"type": "b", "queue": "q2"}, {"type": "c", "priority": -3}}}
	br := e.do(req{method: "POST", path: "/api/v1/jobs/batch", body: batch, headers: map[string]string{"Idempotency-Key": "import-7"}})
	e.want(br, http.StatusCreated, "")
	if br.num("inserted") != 3 || br.num("duplicates") != 0 {
		t.Fatalf("batch answered %s", br.raw)
	}
	br2 := e.do(req{method: "POST", path: "/api/v1/jobs/batch", body: batch, headers: map[string]string{"Idempotency-Key": "import-7"}})
	e.want(br2, http.StatusOK, "")
	if br2.num("inserted") != 0 || br2.num("duplicates") != 3 {
		t.Fatalf("retried batch answered %s", br2.raw)
	}
	if fmt.Sprint(br.body["jobs"]) != strings.ReplaceAll(fmt.Sprint(br2.body["jobs"]), "true", "false") {
		t.Fatalf("retried batch ids %v differ from the first %v", br2.body["jobs"], br.body["jobs"])
	}
	e.wantCounts(5, 2, 0)
}

func testBadInput(t *testing.T, e *env) {
	e.reset()
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name, path, body, field string
		headers                 map[string]string
	}{
		{"no type", "/api/v1/jobs", `{"payload":{}}`, "type", nil},
		{"bad queue", "/api/v1/jobs", `{"type":"a","queue":"no spaces"}`, "queue", nil},
		{"priority", "/api/v1/jobs", `{"type":"a","priority":5000}`, "priority", nil},
		{"max attempts", "/api/v1/jobs", `{"type":"a","max_attempts":-1}`, "max_attempts", nil},
		{"max attempts high", "/api/v1/jobs", `{"type":"a","max_attempts":100000}`, "max_attempts", nil},
		{"delay", "/api/v1/jobs", `{"type":"a","delay":"soon"}`, "delay", nil},
		{"negative delay", "/api/v1/jobs", `{"type":"a","delay":"-1s"}`, "delay", nil},
		{"run_at", "/api/v1/jobs", `{"type":"a","run_at":"tomorrow"}`, "run_at", nil},
		{"delay and run_at", "/api/v1/jobs", `{"type":"a","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, "run_at", nil},
		{"unknown field", "/api/v1/jobs", `{"type":"a","max_attempt":3}`, "max_attempt", nil},
		{"wrong type", "/api/v1/jobs", `{"type":"a","priority":"high"}`, "priority", nil},
		{"metadata not strings", "/api/v1/jobs", `{"type":"a","metadata":{"k":1}}`, "metadata", nil},
		{"unique key long", "/api/v1/jobs", `{"type":"a","unique_key":"` + long + `"}`, "unique_key", nil},
		{"header vs unique key", "/api/v1/jobs", `{"type":"a","unique_key":"x"}`, "unique_key", map[string]string{"Idempotency-Key": "y"}},
		{"unique period", "/api/v1/jobs", `{"type":"a","unique":{"period":"10ms"}}`, "unique", nil},
		{"unique part", "/api/v1/jobs", `{"type":"a","unique":{"payload":true}}`, "unique", nil},
		{"on_conflict", "/api/v1/jobs", `{"type":"a","unique_key":"k","on_conflict":"merge"}`, "on_conflict", nil},
		{"replace without key", "/api/v1/jobs", `{"type":"a","on_conflict":"replace"}`, "on_conflict", nil},
		{"debounce", "/api/v1/jobs", `{"type":"a","unique_key":"k","on_conflict":"debounce","debounce":"soon"}`, "debounce", nil},
		{"debounce_max", "/api/v1/jobs", `{"type":"a","unique_key":"k","on_conflict":"debounce","debounce":"1m","debounce_max":"1s"}`, "debounce_max", nil},
		{"debounce for skip", "/api/v1/jobs", `{"type":"a","unique_key":"k","debounce":"1m"}`, "debounce", nil},
		{"deadline", "/api/v1/jobs", `{"type":"a","deadline":"soon"}`, "deadline", nil},
		{"deadline keyed", "/api/v1/jobs", `{"type":"a","key":"k","deadline":"1h"}`, "deadline", nil},
		{"not JSON", "/api/v1/jobs", `{"type":`, "body", nil},
		{"empty body", "/api/v1/jobs", ``, "body", nil},
		{"two values", "/api/v1/jobs", `{"type":"a"}{"type":"b"}`, "body", nil},
		{"batch empty", "/api/v1/jobs/batch", `{"jobs":[]}`, "jobs", nil},
		{"batch bad second", "/api/v1/jobs/batch", `{"jobs":[{"type":"a"},{"type":"b","queue":"bad queue"}]}`, "jobs[1].queue", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			r := e.do(req{method: "POST", path: c.path, body: c.body, headers: c.headers})
			e.want(r, http.StatusBadRequest, "invalid_input")
			if r.errorField() != c.field {
				t.Errorf("field %q, want %q (%s)", r.errorField(), c.field, r.raw)
			}
			e.wantCounts(0, 0, 0)
		})
	}
	for _, c := range []struct{ path, field string }{
		{"/api/v1/jobs?state=done", "state"},
		{"/api/v1/jobs?state=failed", "state"},     // at /api/v1/failed
		{"/api/v1/jobs?state=cancelling", "state"}, // listed as reserved
		{"/api/v1/jobs?limit=0", "limit"},
		{"/api/v1/jobs?limit=5000", "limit"},
		{"/api/v1/jobs?cursor=-1", "cursor"},
		{"/api/v1/jobs?since=yesterday", "since"},
		{"/api/v1/jobs?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
		{"/api/v1/jobs?queue=a%20b", "queue"},
		{"/api/v1/jobs?sort=id", "sort"},
		{"/api/v1/jobs/abc", "id"},
		{"/api/v1/jobs/0", "id"},
		{"/api/v1/failed?older_than=-1h", "older_than"},
		{"/api/v1/failed?failed_before=x", "failed_before"},
		{"/api/v1/queues/bad%20name", "queue"},
	} {
		r := e.do(req{path: c.path})
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != c.field {
			t.Errorf("GET %s: field %q, want %q", c.path, r.errorField(), c.field)
		}
	}
}

func testLists(t *testing.T, e *env) {
	e.reset()
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		id, err := e.client.Enqueue(ctx, "list", map[string]any{"i": i, "token": "t0p"}, jobq.Queue("lq"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := e.client.Enqueue(ctx, "other", nil, jobq.Queue("elsewhere")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Enqueue(ctx, "list", nil, jobq.Queue("lq"), jobq.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Pages of 2 through queue lq's pending jobs: every id once, newest
	// first, and the last page has no cursor.
	var seen []int64
	path := "/api/v1/jobs?state=pending&queue=lq&limit=2"
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		r := e.do(req{path: path})
		e.want(r, http.StatusOK, "")
		for _, j := range r.body["jobs"].([]any) {
			j := j.(map[string]any)
			seen = append(seen, num(j["id"]))
			if j["state"] != "pending" || j["queue"] != "lq" {
				t.Fatalf("listed %v", j)
			}
			if p := j["payload"].(map[string]any); p["token"] != "***" {
				t.Fatalf("payload key token not masked in the list: %v", p)
			}
		}
		next := r.num("next_cursor")
		if next == 0 {
			break
		}
		path = fmt.Sprintf("/api/v1/jobs?state=pending&queue=lq&limit=2&cursor=%d", next)
	}
	if fmt.Sprint(seen) != fmt.Sprint([]int64{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Fatalf("paged ids %v, want %v newest first", seen, ids)
	}
	sched := e.do(req{path: "/api/v1/jobs?state=scheduled"})
	if n := len(sched.body["jobs"].([]any)); n != 1 {
		t.Fatalf("scheduled list has %d jobs, want 1: %s", n, sched.raw)
	}
	typed := e.do(req{path: "/api/v1/jobs?type=other"})
	if n := len(typed.body["jobs"].([]any)); n != 1 {
		t.Fatalf("type filter listed %d jobs, want 1", n)
	}
	// A time range that ends before the jobs were due lists none.
	past := e.do(req{path: "/api/v1/jobs?until=2000-01-01T00:00:00Z"})
	if n := len(past.body["jobs"].([]any)); n != 0 {
		t.Fatalf("until 2000 listed %d jobs", n)
	}

	d := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", ids[2])})
	e.want(d, http.StatusOK, "")
	if d.num("id") != ids[2] || d.body["state"] != "pending" || d.body["type"] != "list" {
		t.Fatalf("detail %s", d.raw)
	}
	e.want(e.do(req{path: "/api/v1/jobs/999999999"}), http.StatusNotFound, "not_found")
}

func testFailed(t *testing.T, e *env) {
	e.reset()
	fa := e.failJobs("fa", 3)
	fb := e.failJobs("fb", 2)
	e.wantCounts(0, 0, 5)

	l := e.do(req{path: "/api/v1/failed?queue=fa"})
	e.want(l, http.StatusOK, "")
	list := l.body["failed"].([]any)
	if len(list) != 3 {
		t.Fatalf("listed %d failed jobs of fa, want 3", len(list))
	}
	first := list[0].(map[string]any)
	if first["error"] != "boom" || first["payload"].(map[string]any)["password"] != "***" {
		t.Fatalf("failed job shown as %v", first)
	}
	// A failed job's id is its job's; the cursor pages past the last shown.
	for i, f := range list {
		if id := num(f.(map[string]any)["id"]); id != fa[i] {
			t.Fatalf("failed job %d of fa listed with id %d, want its job's %d: %s", i, id, fa[i], l.raw)
		}
	}
	pg := e.do(req{path: "/api/v1/failed?queue=fa&limit=2"})
	if len(pg.body["failed"].([]any)) != 2 || pg.num("next_cursor") == 0 {
		t.Fatalf("a full page of 2 has no cursor: %s", pg.raw)
	}
	rest := e.do(req{path: fmt.Sprintf("/api/v1/failed?queue=fa&limit=2&cursor=%d", pg.num("next_cursor"))})
	if got := rest.body["failed"].([]any); len(got) != 1 || num(got[0].(map[string]any)["id"]) != fa[2] {
		t.Fatalf("the page after the cursor: %s, want job %d alone", rest.raw, fa[2])
	}

	g := e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", fa[0])})
	e.want(g, http.StatusOK, "")
	if g.num("id") != fa[0] || g.body["queue"] != "fa" || g.body["job_id"] != nil {
		t.Fatalf("failed detail %s", g.raw)
	}
	e.want(e.do(req{path: "/api/v1/failed/999999999"}), http.StatusNotFound, "not_found")
	// The job's own route finds it too, failed, under the same ID.
	j := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", fa[0])})
	e.want(j, http.StatusOK, "")
	if j.num("id") != fa[0] || j.body["state"] != "failed" || j.body["last_error"] != "boom" || j.body["finished_at"] == nil {
		t.Fatalf("failed job %d as a job: %s", fa[0], j.raw)
	}

	// Replay one: it is pending again and gone from the failed jobs.
	r := e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", fa[0])})
	e.want(r, http.StatusOK, "")
	if r.num("replayed") != 1 {
		t.Fatalf("replay one answered %s", r.raw)
	}
	e.wantCounts(1, 0, 4)
	e.want(e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", fa[0])}), http.StatusNotFound, "not_found")

	// Bulk by IDs is all or none: an unknown ID moves nothing.
	e.want(e.do(req{method: "POST", path: "/api/v1/failed/replay", body: map[string]any{"ids": []int64{fa[1], 999999999}}}), http.StatusNotFound, "not_found")
	e.wantCounts(1, 0, 4)
	// Neither ids nor all: refused, nothing moves.
	bad := e.do(req{method: "POST", path: "/api/v1/failed/replay", body: `{}`})
	e.want(bad, http.StatusBadRequest, "invalid_input")
	if bad.errorField() != "all" {
		t.Fatalf("field %q", bad.errorField())
	}
	e.want(e.do(req{method: "POST", path: "/api/v1/failed/purge", body: `{"ids":[1],"all":true}`}), http.StatusBadRequest, "invalid_input")
	e.wantCounts(1, 0, 4)
	// A purge naming neither ids nor all is refused on "all", whatever
	// else it holds: an empty id list or a bare filter deletes nothing.
	for _, body := range []string{`{}`, `{"ids":[]}`, `{"ids":null}`, `{"all":false}`, `{"queue":"fb"}`, `{"keep_newest":1}`} {
		p := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: body})
		e.want(p, http.StatusBadRequest, "invalid_input")
		if p.errorField() != "all" || !strings.Contains(p.errField("message"), "set all to true") {
			t.Fatalf("purge %s refused as %s, want field all saying how to purge everything", body, p.raw)
		}
	}
	e.wantCounts(1, 0, 4)

	// Replay every match of a filter, with the count.
	ra := e.do(req{method: "POST", path: "/api/v1/failed/replay", body: map[string]any{"all": true, "queue": "fa"}})
	e.want(ra, http.StatusOK, "")
	if ra.num("replayed") != 2 || ra.num("skipped") != 0 {
		t.Fatalf("replay all of fa answered %s", ra.raw)
	}
	e.wantCounts(3, 0, 2)

	// Purge one, then purge all matching (and 404 for a purged one).
	e.want(e.do(req{method: "DELETE", path: fmt.Sprintf("/api/v1/failed/%d", fb[0])}), http.StatusOK, "")
	e.want(e.do(req{method: "DELETE", path: fmt.Sprintf("/api/v1/failed/%d", fb[0])}), http.StatusNotFound, "not_found")
	// By ids: exactly those (an unknown one is not counted).
	pi := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"ids": []int64{fb[1], 999999999}}})
	e.want(pi, http.StatusOK, "")
	if pi.num("purged") != 1 {
		t.Fatalf("purge by ids answered %s, want 1", pi.raw)
	}
	if _, err := e.insp.Failed(context.Background(), fb[1]); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("failed job %d after its purge: %v, want not found", fb[1], err)
	}
	e.wantCounts(3, 0, 0)
	more := e.failJobs("fc", 3)
	kn := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"all": true, "queue": "fc", "keep_newest": 1}})
	e.want(kn, http.StatusOK, "")
	if kn.num("purged") != 2 {
		t.Fatalf("keep newest 1 of 3 purged %s", kn.raw)
	}
	if _, err := e.insp.Failed(context.Background(), more[0]); err != nil {
		t.Fatalf("the newest failed job of fc was purged: %v", err)
	}
	// A filter with all: only its matches.
	e.failJobs("fd", 2)
	pm := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"all": true, "queue": "fd"}})
	e.want(pm, http.StatusOK, "")
	if pm.num("purged") != 2 {
		t.Fatalf("purge all of fd answered %s", pm.raw)
	}
	e.wantCounts(3, 0, 1)
	// All with no filter, said explicitly: everything.
	pa := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"all": true}})
	e.want(pa, http.StatusOK, "")
	if pa.num("purged") != 1 {
		t.Fatalf("purge all answered %s", pa.raw)
	}
	e.wantCounts(3, 0, 0)
}

func testQueues(t *testing.T, e *env) {
	e.reset()
	ctx := context.Background()
	for range 2 {
		if _, err := e.client.Enqueue(ctx, "x", nil, jobq.Queue("qa")); err != nil {
			t.Fatal(err)
		}
	}
	e.failJobs("qa", 1)
	l := e.do(req{path: "/api/v1/queues"})
	e.want(l, http.StatusOK, "")
	var qa map[string]any
	for _, q := range l.body["queues"].([]any) {
		if q.(map[string]any)["queue"] == "qa" {
			qa = q.(map[string]any)
		}
	}
	if qa == nil || num(qa["pending"]) != 2 || num(qa["failed"]) != 1 || qa["paused"] != false {
		t.Fatalf("queue qa shown as %v", qa)
	}
	e.want(e.do(req{method: "POST", path: "/api/v1/queues/qa/pause"}), http.StatusOK, "")
	one := e.do(req{path: "/api/v1/queues/qa"})
	if one.body["paused"] != true || one.num("pending") != 2 {
		t.Fatalf("paused queue shown as %s", one.raw)
	}
	settings, err := e.insp.QueueSettings(ctx)
	if err != nil || len(settings) != 1 || !settings[0].Paused {
		t.Fatalf("backend settings after pause: %v %v", settings, err)
	}
	lim := e.do(req{method: "PUT", path: "/api/v1/queues/qa/limits", body: map[string]any{"concurrency": 3, "rate": 10, "rate_period": "1s"}})
	e.want(lim, http.StatusOK, "")
	e.want(e.do(req{method: "PUT", path: "/api/v1/queues/qa/limits", body: map[string]any{"rate_period": "1s"}}), http.StatusBadRequest, "invalid_input")
	e.want(e.do(req{method: "POST", path: "/api/v1/queues/qa/resume"}), http.StatusOK, "")
	settings, _ = e.insp.QueueSettings(ctx)
	if len(settings) != 1 || settings[0].Paused || settings[0].Concurrency != 3 || settings[0].Rate != 10 || settings[0].RatePeriod != time.Second {
		t.Fatalf("backend settings after limits and resume: %+v", settings)
	}
	e.want(e.do(req{method: "PUT", path: "/api/v1/queues/qa/limits", body: `{}`}), http.StatusOK, "")
	if settings, _ = e.insp.QueueSettings(ctx); len(settings) != 0 {
		t.Fatalf("limits not cleared: %+v", settings)
	}
	empty := e.do(req{path: "/api/v1/queues/nothing-here"})
	e.want(empty, http.StatusOK, "")
	if empty.num("pending") != 0 || empty.body["queue"] != "nothing-here" {
		t.Fatalf("empty queue shown as %s", empty.raw)
	}
}

func testCancel(t *testing.T, e *env) {
	e.reset()
	id, err := e.client.Enqueue(context.Background(), "x", nil, jobq.Queue("cq"))
	if err != nil {
		t.Fatal(err)
	}
	c := e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/jobs/%d/cancel", id)})
	e.want(c, http.StatusOK, "")
	if c.body["outcome"] != "cancelled" || c.body["changed"] != true {
		t.Fatalf("cancel answered %s", c.raw)
	}
	again := e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/jobs/%d/cancel", id)})
	if again.body["outcome"] != "already_cancelled" || again.body["changed"] != false {
		t.Fatalf("second cancel answered %s", again.raw)
	}
	d := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", id)})
	e.want(d, http.StatusOK, "")
	if d.body["state"] != "cancelled" || d.body["finished_at"] == nil {
		t.Fatalf("cancelled job's detail %s", d.raw)
	}
	l := e.do(req{path: "/api/v1/jobs?state=cancelled&queue=cq"})
	if n := len(l.body["jobs"].([]any)); n != 1 {
		t.Fatalf("cancelled list has %d jobs", n)
	}
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs/999999999/cancel"}), http.StatusNotFound, "not_found")
	e.wantCounts(0, 0, 0)
}

func testSchedules(t *testing.T, e *env) {
	store, ok := backend.As[backend.ScheduleStore](e.b)
	if !ok {
		t.Fatalf("%T keeps no schedules", e.b)
	}
	if _, err := store.ScheduleUpsert(context.Background(), []backend.ScheduleDef{{Name: "nightly", Spec: "0 3 * * *", Queue: "cron", Type: "report"}}); err != nil {
		t.Fatal(err)
	}
	r := e.do(req{path: "/api/v1/schedules"})
	e.want(r, http.StatusOK, "")
	list, _ := r.body["schedules"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["name"] != "nightly" || list[0].(map[string]any)["next"] == nil {
		t.Fatalf("schedules answered %s", r.raw)
	}
	one := e.do(req{path: "/api/v1/schedules/nightly"})
	e.want(one, http.StatusOK, "")
	if one.body["spec"] != "0 3 * * *" || one.body["queue"] != "cron" || one.body["type"] != "report" {
		t.Fatalf("schedule answered %s", one.raw)
	}
	e.want(e.do(req{path: "/api/v1/schedules/none"}), http.StatusNotFound, "not_found")
}

func testErrors(t *testing.T, e *env) {
	e.reset()
	r := e.do(req{path: "/api/v1/nope"})
	e.want(r, http.StatusNotFound, "not_found")
	r = e.do(req{method: "DELETE", path: "/api/v1/jobs"})
	e.want(r, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "POST") || !strings.Contains(allow, "GET") {
		t.Fatalf("Allow %q", allow)
	}
	e.want(e.do(req{method: "PATCH", path: "/api/v1/queues/a/pause"}), http.StatusMethodNotAllowed, "method_not_allowed")

	// Over the body limit (1 MiB by default): 413, nothing written.
	big := `{"type":"a","payload":"` + strings.Repeat("x", 1<<20) + `"}`
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs", body: big}), http.StatusRequestEntityTooLarge, "too_large")
	e.wantCounts(0, 0, 0)

	// Every answer carries the security headers.
	for _, h := range []struct{ k, v string }{
		{"Content-Security-Policy", contentSecurityPolicy},
		{"X-Content-Type-Options", "nosniff"},
		{"X-Frame-Options", "DENY"},
		{"Referrer-Policy", "same-origin"},
	} {
		if got := r.header.Get(h.k); got != h.v {
			t.Errorf("%s: %q", h.k, got)
		}
	}
}

func testScopes(t *testing.T, e *env) {
	e.reset()
	failed := e.failJobs("sq", 2)
	e.wantCounts(0, 0, 2)
	for _, c := range []struct {
		name   string
		token  string
		method string
		path   string
		body   string
		status int
		code   string
	}{
		{"no token", "", "GET", "/api/v1/queues", "", 401, "unauthorized"},
		{"unknown token", "nope-nope-nope-nope", "GET", "/api/v1/queues", "", 401, "unauthorized"},
		{"admin secret with a suffix", adminToken + "x", "GET", "/api/v1/queues", "", 401, "unauthorized"},
		{"read reads", readToken, "GET", "/api/v1/failed", "", 200, ""},
		{"read cannot enqueue", readToken, "POST", "/api/v1/jobs", `{"type":"a"}`, 403, "forbidden"},
		{"read cannot replay", readToken, "POST", fmt.Sprintf("/api/v1/failed/%d/replay", failed[0]), "", 403, "forbidden"},
		{"read cannot replay all", readToken, "POST", "/api/v1/failed/replay", `{"all":true}`, 403, "forbidden"},
		{"enqueue cannot purge", enqueueToken, "POST", "/api/v1/failed/purge", `{"all":true}`, 403, "forbidden"},
		{"enqueue cannot delete", enqueueToken, "DELETE", fmt.Sprintf("/api/v1/failed/%d", failed[0]), "", 403, "forbidden"},
		{"enqueue cannot pause", enqueueToken, "POST", "/api/v1/queues/sq/pause", "", 403, "forbidden"},
		{"enqueue cannot cancel", enqueueToken, "POST", "/api/v1/jobs/1/cancel", "", 403, "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			q := req{method: c.method, path: c.path, token: tok(c.token)}
			if c.body != "" {
				q.body = c.body
			}
			r := e.do(q)
			e.want(r, c.status, c.code)
			if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			e.wantCounts(0, 0, 2)
		})
	}
	if s, _ := e.insp.QueueSettings(context.Background()); len(s) != 0 {
		t.Fatalf("a refused pause paused: %+v", s)
	}
	if strings.Contains(e.logs.String(), "0123456789abcdef") {
		t.Fatalf("a token reached the log: %s", e.logs.String())
	}
}

func testCrossOrigin(t *testing.T, e *env) {
	e.reset()
	failed := e.failJobs("xo", 1)
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
	} {
		r := e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a"}`, headers: h})
		e.want(r, http.StatusForbidden, "cross_origin")
		r = e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", failed[0]), headers: h})
		e.want(r, http.StatusForbidden, "cross_origin")
		e.wantCounts(0, 0, 1)
	}
	// A same-origin browser request and a non-browser one pass.
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a"}`, headers: map[string]string{"Sec-Fetch-Site": "same-origin"}}), http.StatusCreated, "")
	e.want(e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a"}`}), http.StatusCreated, "")
	// Reads are not checked.
	e.want(e.do(req{path: "/api/v1/queues", headers: map[string]string{"Sec-Fetch-Site": "cross-site"}}), http.StatusOK, "")
	e.wantCounts(2, 0, 1)
}

// TestOpenAPI holds the document against the route table: every
// documented path and method reaches a handler (not the mux's 404 or
// 405), and every registered API route is documented.
func TestOpenAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	r := e.do(req{path: "/api/v1/openapi.json"})
	e.want(r, http.StatusOK, "")
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			documented[m+" "+path] = true
			concrete := strings.NewReplacer("{id}", "1", "{queue}", "default", "{name}", "nightly", "{key}", "acct:1").Replace(path)
			got := e.do(req{method: m, path: concrete, body: `{}`})
			if c := got.errCode(); got.status == 404 && c == "not_found" && strings.Contains(got.errField("message"), "no such API route") || got.status == 405 {
				t.Errorf("documented %s %s is not routed: %d %s", m, path, got.status, got.raw)
			}
		}
	}
	n := 0
	for _, p := range e.s.patterns {
		if !strings.Contains(p, " /api/") {
			continue
		}
		n++
		if !documented[p] {
			t.Errorf("route %s is not in openapi.json", p)
		}
	}
	if n != len(documented) || n != len(e.s.apiRoutes()) {
		t.Errorf("%d API routes registered, %d in the table, %d documented", n, len(e.s.apiRoutes()), len(documented))
	}
}

// TestNotSupported: what the backend cannot do is 501 not_supported; a
// handler without a client refuses enqueues the same way.
func TestNotSupported(t *testing.T) {
	b := syncBackend(t)
	reg := jobq.NewRegistry()
	client, err := jobq.NewClient(b, jobq.ClientConfig{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, b, Options{Client: client})
	for _, q := range []req{
		{path: "/api/v1/jobs?state=pending"},
		{path: "/api/v1/schedules"},
		{method: "POST", path: "/api/v1/jobs/1/cancel"},
		{method: "POST", path: "/api/v1/queues/default/pause"},
	} {
		e.want(e.do(q), http.StatusNotImplemented, "not_supported")
	}
	noClient := newEnvOn(t, memoryBackend(t), Options{})
	noClient.s.opts.Client = nil
	noClient.want(noClient.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a"}`}), http.StatusNotImplemented, "not_supported")
	noClient.want(noClient.do(req{method: "POST", path: "/api/v1/jobs/batch", body: `{"jobs":[{"type":"a"}]}`}), http.StatusNotImplemented, "not_supported")
	noClient.wantCounts(0, 0, 0)
}

// TestAPIRoutesBesideCatchAll: a dashboard catch-all ("GET /") does not
// swallow unknown API paths, which still get JSON 404 and 405.
func TestAPIRoutesBesideCatchAll(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	e.s.handle("GET /", ScopeRead, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("dashboard")) })
	e.want(e.do(req{path: "/api/v1/nope"}), http.StatusNotFound, "not_found")
	e.want(e.do(req{path: "/api/v2/jobs"}), http.StatusNotFound, "not_found")
	r := e.do(req{method: "DELETE", path: "/api/v1/jobs"})
	e.want(r, http.StatusMethodNotAllowed, "method_not_allowed")
	if got := r.header.Get("Allow"); got != "GET, POST, HEAD" {
		t.Fatalf("Allow %q", got)
	}
	e.want(e.do(req{path: "/api/v1/queues"}), http.StatusOK, "")
	if r := e.do(req{path: "/not/a/dashboard/page"}); r.status != http.StatusOK || string(r.raw) != "dashboard" {
		t.Fatalf("the dashboard's route: %d %s", r.status, r.raw)
	}
}
