package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// keyRules reads queue's key rules from the backend.
func (e *env) keyRules(queue string) jobq.KeyRules {
	e.t.Helper()
	qs, err := e.insp.Queues(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Queue == queue {
			return q.Keys
		}
	}
	return jobq.KeyRules{}
}

// keyList decodes GET path's keys as "queue/key" strings, in order, and
// returns them with the decoded objects.
func (e *env) keyList(path string) ([]string, []map[string]any) {
	e.t.Helper()
	r := e.do(req{path: path})
	e.want(r, http.StatusOK, "")
	var names []string
	var objs []map[string]any
	for _, k := range r.body["keys"].([]any) {
		k := k.(map[string]any)
		names = append(names, k["queue"].(string)+"/"+k["key"].(string))
		objs = append(objs, k)
	}
	return names, objs
}

// TestKeysAPI: key rules set through the API are the backend's, the key
// list and a key's view say what the backend holds (a held key naming its
// failed head, errors masked), and a held head replayed through the API
// runs first, in its place, while a discarded one lets its key go on.
func TestKeysAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
	r := e.do(req{method: "PUT", path: "/api/v1/queues/ledger/keys", body: map[string]any{"ordered": true}})
	e.want(r, http.StatusOK, "")
	if k := r.body["keys"].(map[string]any); r.body["queue"] != "ledger" || k["ordered"] != true || k["on_failure"] != "hold" || num(k["limit"]) != 0 {
		t.Fatalf("set rules answered %s, want ordered with the default policy hold shown", r.raw)
	}
	if got := e.keyRules("ledger"); got != (jobq.KeyRules{Ordered: true}) {
		t.Fatalf("backend rules %+v after the PUT", got)
	}

	a := enqueueKeyed(t, e.client, "ledger", "acct:1", 3)
	b := enqueueKeyed(t, e.client, "ledger", "acct:2", 1)
	enqueueKeyed(t, e.client, "crawl", "site:3", 2)
	slash := enqueueKeyed(t, e.client, "crawl", "tenant/7 x", 1)
	// The head of acct:1 fails for good: under hold, the key waits.
	first := wantClaim(t, e.b, "ledger", a[0], b[0])
	endRows(t, e.b, true, first[0])
	_, rows := claimIDs(t, e.b, "ledger", 10)
	if len(rows) != 0 {
		t.Fatalf("a held key and a running one gave %d more jobs", len(rows))
	}

	// Busiest first (pending plus running), then queue and key by name.
	names, objs := e.keyList("/api/v1/keys")
	if want := "[crawl/site:3 ledger/acct:1 crawl/tenant/7 x ledger/acct:2]"; fmt.Sprint(names) != want {
		t.Fatalf("keys listed %v, want %s", names, want)
	}
	held := objs[1]
	if held["held"] != true || num(held["head_id"]) != a[0] || num(held["pending"]) != 2 || num(held["failed"]) != 1 || num(held["reserved"]) != 0 || held["held_since"] == nil {
		t.Fatalf("held key shown as %v, want held by %d with 2 pending and 1 failed", held, a[0])
	}
	if fj, err := e.insp.Failed(context.Background(), a[0]); err != nil || held["held_since"] != fj.FailedAt.Format(time.RFC3339Nano) {
		t.Fatalf("held_since %v, want when the head failed (%v)", held["held_since"], err)
	}
	if objs[3]["held"] != false || objs[3]["head_id"] != nil || objs[3]["held_since"] != nil || num(objs[3]["reserved"]) != 1 {
		t.Fatalf("running key shown as %v", objs[3])
	}
	for path, want := range map[string]string{
		"/api/v1/keys?held=true":                 "[ledger/acct:1]",
		"/api/v1/keys?held=false&queue=crawl":    "[crawl/site:3 crawl/tenant/7 x]",
		"/api/v1/keys?limit=1":                   "[crawl/site:3]",
		"/api/v1/keys?queue=nothing-here":        "[]",
		"/api/v1/keys?queue=ledger&held=1&limit": "[ledger/acct:1]",
	} {
		if got, _ := e.keyList(path); fmt.Sprint(got) != want {
			t.Errorf("GET %s listed %v, want %s", path, got, want)
		}
	}

	// One key: its jobs in ID order, the failed head first, its error
	// masked; and whether it is held.
	one := e.do(req{path: "/api/v1/queues/ledger/keys/acct:1"})
	e.want(one, http.StatusOK, "")
	if one.body["held"] != true || one.num("head_id") != a[0] || one.body["held_since"] != held["held_since"] || one.body["key"] != "acct:1" || one.body["queue"] != "ledger" {
		t.Fatalf("key view %s", one.raw)
	}
	jobs := one.body["jobs"].([]any)
	var got []string
	for _, j := range jobs {
		j := j.(map[string]any)
		got = append(got, fmt.Sprintf("%d %s %s %d", num(j["id"]), j["state"], j["type"], num(j["attempts"])))
		if num(j["turn"]) == 0 {
			t.Errorf("job %v shown without its turn", j)
		}
	}
	if want := fmt.Sprintf("[%d failed charge 1 %d pending charge 0 %d pending charge 0]", a[0], a[1], a[2]); fmt.Sprint(got) != want {
		t.Fatalf("key jobs %v, want %s", got, want)
	}
	if e := jobs[0].(map[string]any)["error"].(string); strings.Contains(e, "hunter2") || !strings.Contains(e, "charge failed") {
		t.Fatalf("head's error shown as %q: want it with its URL password masked", e)
	}
	if strings.Contains(string(one.raw), "hunter2") {
		t.Fatalf("a password reached the key view: %s", one.raw)
	}
	sl := e.do(req{path: "/api/v1/queues/crawl/keys/" + url.PathEscape("tenant/7 x")})
	e.want(sl, http.StatusOK, "")
	if js := sl.body["jobs"].([]any); len(js) != 1 || num(js[0].(map[string]any)["id"]) != slash[0] || sl.body["held"] != false {
		t.Fatalf("key with a slash and a space: %s", sl.raw)
	}
	none := e.do(req{path: "/api/v1/queues/ledger/keys/nobody"})
	e.want(none, http.StatusOK, "")
	if len(none.body["jobs"].([]any)) != 0 || none.body["held"] != false || none.body["held_since"] != nil {
		t.Fatalf("key without jobs: %s", none.raw)
	}
	// The failed list and the job list narrow to a key.
	fl := e.do(req{path: "/api/v1/failed?key=acct:1"})
	if f := fl.body["failed"].([]any); len(f) != 1 || num(f[0].(map[string]any)["id"]) != a[0] {
		t.Fatalf("failed jobs of acct:1: %s", fl.raw)
	}
	if l := e.do(req{path: "/api/v1/jobs?queue=ledger&key=acct:1"}); len(l.body["jobs"].([]any)) != 2 {
		t.Fatalf("pending jobs of acct:1: %s", l.raw)
	}
	if l := e.do(req{path: "/api/v1/failed?key=acct:2"}); len(l.body["failed"].([]any)) != 0 {
		t.Fatalf("failed jobs of acct:2: %s", l.raw)
	}

	// Queue listings show the rules.
	ql := e.do(req{path: "/api/v1/queues/ledger"})
	if ql.body["key_ordered"] != true || ql.body["key_on_failure"] != "hold" || ql.num("key_limit") != 0 {
		t.Fatalf("queue ledger shown as %s", ql.raw)
	}
	var crawl map[string]any
	for _, q := range e.do(req{path: "/api/v1/queues"}).body["queues"].([]any) {
		if q.(map[string]any)["queue"] == "crawl" {
			crawl = q.(map[string]any)
		}
	}
	if crawl == nil || crawl["key_ordered"] != false || crawl["key_on_failure"] != nil || num(crawl["key_limit"]) != 0 {
		t.Fatalf("queue crawl (no rules) listed as %v", crawl)
	}

	endRows(t, e.b, false, first[1])
	// Replay the held head through the API: it runs again first, alone.
	rp := e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", a[0])})
	e.want(rp, http.StatusOK, "")
	if rp.num("replayed") != 1 {
		t.Fatalf("replay answered %s", rp.raw)
	}
	if _, objs := e.keyList("/api/v1/keys?held=true"); len(objs) != 0 {
		t.Fatalf("key still held after its head's replay: %v", objs)
	}
	endRows(t, e.b, false, wantClaim(t, e.b, "ledger", a[0])...)
	// The next head fails: replayed by a filter naming its key, it is
	// back in its place too.
	endRows(t, e.b, true, wantClaim(t, e.b, "ledger", a[1])...)
	rf := e.do(req{method: "POST", path: "/api/v1/failed/replay", body: map[string]any{"all": true, "queue": "ledger", "key": "acct:1"}})
	e.want(rf, http.StatusOK, "")
	if rf.num("replayed") != 1 {
		t.Fatalf("replay by key answered %s", rf.raw)
	}
	// Fails again, and is discarded: the key goes on with its next job.
	endRows(t, e.b, true, wantClaim(t, e.b, "ledger", a[1])...)
	e.want(e.do(req{method: "DELETE", path: fmt.Sprintf("/api/v1/failed/%d", a[1])}), http.StatusOK, "")
	endRows(t, e.b, false, wantClaim(t, e.b, "ledger", a[2])...)

	// A purge by key deletes that key's failed jobs only.
	other := enqueueKeyed(t, e.client, "ledger", "acct:9", 1)
	mine := enqueueKeyed(t, e.client, "ledger", "acct:8", 1)
	endRows(t, e.b, true, wantClaim(t, e.b, "ledger", other[0], mine[0])...)
	pk := e.do(req{method: "POST", path: "/api/v1/failed/purge", body: map[string]any{"all": true, "key": "acct:8"}})
	e.want(pk, http.StatusOK, "")
	if pk.num("purged") != 1 {
		t.Fatalf("purge by key answered %s", pk.raw)
	}
	if _, err := e.insp.Failed(context.Background(), other[0]); err != nil {
		t.Fatalf("purge of acct:8 took acct:9's failed job: %v", err)
	}

	// A limit, then {} clears the rules.
	e.want(e.do(req{method: "PUT", path: "/api/v1/queues/crawl/keys", body: map[string]any{"limit": 2}}), http.StatusOK, "")
	if got := e.keyRules("crawl"); got != (jobq.KeyRules{Limit: 2}) {
		t.Fatalf("crawl rules %+v, want limit 2", got)
	}
	if q := e.do(req{path: "/api/v1/queues/crawl"}); q.num("key_limit") != 2 || q.body["key_on_failure"] != nil {
		t.Fatalf("crawl shown as %s", q.raw)
	}
	cl := e.do(req{method: "PUT", path: "/api/v1/queues/ledger/keys", body: `{}`})
	e.want(cl, http.StatusOK, "")
	if got := e.keyRules("ledger"); !got.IsZero() {
		t.Fatalf("ledger rules %+v after {}", got)
	}
	if k := cl.body["keys"].(map[string]any); k["ordered"] != false || k["on_failure"] != nil {
		t.Fatalf("clear answered %s", cl.raw)
	}
}

// TestKeysAPIBadInput: every bad request is a 400 naming its field, and
// nothing is written: the rules stay, no failed job moves.
func TestKeysAPIBadInput(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	e.want(e.do(req{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":2}`}), http.StatusOK, "")
	enqueueKeyed(t, e.client, "q", "k", 1)
	e.failQueued("q", 1)
	long := strings.Repeat("k", backend.MaxKeyLen+1)
	for _, c := range []struct{ name, path, body, field string }{
		{"negative limit", "/api/v1/queues/q/keys", `{"limit":-1}`, "limit"},
		{"limit too high", "/api/v1/queues/q/keys", `{"limit":1000000000}`, "limit"},
		{"ordered limit 2", "/api/v1/queues/q/keys", `{"ordered":true,"limit":2}`, "limit"},
		{"limit not a number", "/api/v1/queues/q/keys", `{"limit":"2"}`, "limit"},
		{"policy without ordered", "/api/v1/queues/q/keys", `{"on_failure":"hold"}`, "on_failure"},
		{"unknown policy", "/api/v1/queues/q/keys", `{"ordered":true,"on_failure":"skip"}`, "on_failure"},
		{"policy not a string", "/api/v1/queues/q/keys", `{"ordered":true,"on_failure":1}`, "on_failure"},
		{"ordered not a boolean", "/api/v1/queues/q/keys", `{"ordered":"yes"}`, "ordered"},
		{"unknown field", "/api/v1/queues/q/keys", `{"ordred":true}`, "ordred"},
		{"empty body", "/api/v1/queues/q/keys", ``, "body"},
		{"not an object", "/api/v1/queues/q/keys", `[]`, "body"},
		{"bad queue", "/api/v1/queues/bad%20q/keys", `{}`, "queue"},
		{"replay bad key", "/api/v1/failed/replay", `{"all":true,"key":"\u0001"}`, "key"},
		{"purge long key", "/api/v1/failed/purge", `{"all":true,"key":"` + long + `"}`, "key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			method := "PUT"
			if strings.HasPrefix(c.path, "/api/v1/failed") {
				method = "POST"
			}
			r := e.do(req{method: method, path: c.path, body: c.body})
			e.want(r, http.StatusBadRequest, "invalid_input")
			if r.errorField() != c.field {
				t.Errorf("field %q, want %q (%s)", r.errorField(), c.field, r.raw)
			}
			if got := e.keyRules("q"); got != (jobq.KeyRules{Limit: 2}) {
				t.Fatalf("rules %+v after a refused request", got)
			}
			e.wantCounts(0, 0, 1)
		})
	}
	for _, c := range []struct{ path, field string }{
		{"/api/v1/keys?held=maybe", "held"},
		{"/api/v1/keys?limit=0", "limit"},
		{"/api/v1/keys?limit=1001", "limit"},
		{"/api/v1/keys?limit=x", "limit"},
		{"/api/v1/keys?queue=a%20b", "queue"},
		{"/api/v1/keys?hold=true", "hold"},
		{"/api/v1/queues/q/keys/%01", "key"},
		{"/api/v1/queues/q/keys/" + long, "key"},
		{"/api/v1/queues/bad%20q/keys/k", "queue"},
		{"/api/v1/failed?key=%01", "key"},
		{"/api/v1/jobs?key=%ff", "key"},
	} {
		r := e.do(req{path: c.path})
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != c.field {
			t.Errorf("GET %s: field %q, want %q", c.path, r.errorField(), c.field)
		}
	}
}

// TestKeysAPINotSupported: a backend without keys answers the key routes
// 501 not_supported, as any capability it lacks, and a key filter on the
// failed or job lists is refused the same way rather than ignored (which
// would purge or replay every failed job of the queue).
func TestKeysAPINotSupported(t *testing.T) {
	e := newEnvOn(t, noKeys{memoryBackend(t)}, Options{})
	e.failJobs("q", 2)
	for _, q := range []req{
		{path: "/api/v1/keys"},
		{path: "/api/v1/queues/q/keys/k"},
		{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":1}`},
		{path: "/api/v1/failed?key=k"},
		{path: "/api/v1/jobs?key=k"},
		{method: "POST", path: "/api/v1/failed/purge", body: `{"all":true,"key":"k"}`},
		{method: "POST", path: "/api/v1/failed/replay", body: `{"all":true,"queue":"q","key":"k"}`},
	} {
		e.want(e.do(q), http.StatusNotImplemented, "not_supported")
	}
	e.wantCounts(0, 0, 2)
	// Without a key the same lists work.
	e.want(e.do(req{path: "/api/v1/failed?queue=q"}), http.StatusOK, "")
}

// TestKeysAPIScopes: setting key rules is an admin write, refused to a
// weaker token and across origins; reading keys needs read.
func TestKeysAPIScopes(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
	for _, c := range []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"read lists keys", req{path: "/api/v1/keys", token: tok(readToken)}, 200, ""},
		{"read shows a key", req{path: "/api/v1/queues/q/keys/k", token: tok(readToken)}, 200, ""},
		{"no token", req{path: "/api/v1/keys", token: tok("")}, 401, "unauthorized"},
		{"read cannot set", req{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":1}`, token: tok(readToken)}, 403, "forbidden"},
		{"enqueue cannot set", req{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":1}`, token: tok(enqueueToken)}, 403, "forbidden"},
		{"cross-site", req{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":1}`, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, "cross_origin"},
		{"other origin", req{method: "PUT", path: "/api/v1/queues/q/keys", body: `{"limit":1}`, headers: map[string]string{"Origin": "https://evil.example"}}, 403, "cross_origin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			e.want(e.do(c.q), c.status, c.code)
			if got := e.keyRules("q"); !got.IsZero() {
				t.Fatalf("rules %+v after a refused write", got)
			}
		})
	}
}

// TestEnqueueKey: a job enqueued through the API with a key carries it; a
// bad key is a 400 naming it (in a batch, the job's), and a backend
// without keys refuses a keyed job with 501: nothing is written.
func TestEnqueueKey(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	r := e.do(req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"type": "charge", "queue": "ledger", "key": "acct:1"}})
	e.want(r, http.StatusCreated, "")
	br := e.do(req{method: "POST", path: "/api/v1/jobs/batch", body: map[string]any{"jobs": []map[string]any{{"type": "a", "key": "t/1"}, {"type": "b"}}}})
	e.want(br, http.StatusCreated, "")
	ids := []int64{r.num("id")}
	for _, j := range br.body["jobs"].([]any) {
		ids = append(ids, num(j.(map[string]any)["id"]))
	}
	for i, want := range []string{"acct:1", "t/1", ""} {
		row, err := e.b.JobGet(context.Background(), ids[i])
		if err != nil || row.Key != want {
			t.Fatalf("job %d stored with key %q (%v), want %q", ids[i], row.Key, err, want)
		}
	}
	e.wantCounts(3, 0, 0)
	long := strings.Repeat("k", backend.MaxKeyLen+1)
	for _, c := range []struct{ path, body, field string }{
		{"/api/v1/jobs", `{"type":"a","key":"\u0001"}`, "key"},
		{"/api/v1/jobs", `{"type":"a","key":"` + long + `"}`, "key"},
		{"/api/v1/jobs", `{"type":"a","key":7}`, "key"},
		{"/api/v1/jobs/batch", `{"jobs":[{"type":"a","key":"k"},{"type":"b","key":"` + long + `"}]}`, "jobs[1].key"},
	} {
		r := e.do(req{method: "POST", path: c.path, body: c.body})
		e.want(r, http.StatusBadRequest, "invalid_input")
		if r.errorField() != c.field {
			t.Errorf("%s: field %q, want %q", c.body[:min(len(c.body), 40)], r.errorField(), c.field)
		}
	}
	e.wantCounts(3, 0, 0)

	nk := newEnvOn(t, noKeys{memoryBackend(t)}, Options{})
	nk.want(nk.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a","key":"k"}`}), http.StatusNotImplemented, "not_supported")
	nk.want(nk.do(req{method: "POST", path: "/api/v1/jobs/batch", body: `{"jobs":[{"type":"a"},{"type":"b","key":"k"}]}`}), http.StatusNotImplemented, "not_supported")
	nk.wantCounts(0, 0, 0)
	nk.want(nk.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"a"}`}), http.StatusCreated, "")
}

// TestJobKeyAPI: one job's view says its key, live or failed, and leaves
// the field out for a job without one.
func TestJobKeyAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	keyed := enqueueKeyed(t, e.client, "ledger", "a<b", 2)
	plain, err := e.client.Enqueue(t.Context(), "charge", map[string]any{}, jobq.Queue("plain"))
	if err != nil {
		t.Fatal(err)
	}
	endRows(t, e.b, true, wantClaim(t, e.b, "ledger", keyed...)[0])
	for _, path := range []string{
		fmt.Sprintf("/api/v1/jobs/%d", keyed[0]), // failed
		fmt.Sprintf("/api/v1/failed/%d", keyed[0]),
		fmt.Sprintf("/api/v1/jobs/%d", keyed[1]), // reserved
	} {
		r := e.do(req{path: path})
		e.want(r, http.StatusOK, "")
		if r.body["key"] != "a<b" {
			t.Errorf("GET %s: key %v, want a<b: %s", path, r.body["key"], r.raw)
		}
	}
	r := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", plain)})
	e.want(r, http.StatusOK, "")
	if _, ok := r.body["key"]; ok {
		t.Errorf("a job without a key shows one: %s", r.raw)
	}
}
