package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestDashboardKeys: the keys page lists a held key with its failed head's
// link, its error and Replay and Discard buttons, and the busiest keys; a key's page
// shows its jobs in order; the queue pages show the key rules; and the
// buttons work: a replayed head is claimed first and alone, a discarded
// one lets its key go on, each returning to the page it came from.
func TestDashboardKeys(t *testing.T) {
	b := memoryBackend(t)
	srv, insp, client := keysServer(t, b)
	if err := insp.SetQueueKeys(t.Context(), "ledger", jobq.KeyRules{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	a := enqueueKeyed(t, client, "ledger", "acct:1", 3)
	s := enqueueKeyed(t, client, "crawl", "tenant/2", 1)
	endRows(t, b, true, wantClaim(t, b, "ledger", a[0])...)

	code, body := get(t, srv, "/keys")
	if code != http.StatusOK {
		t.Fatalf("keys page: %d %s", code, body)
	}
	held := section(t, body, `id="held"`, "</table>")
	for _, want := range []string{
		fmt.Sprintf(`href="/failed/%d">job %d<`, a[0], a[0]),
		fmt.Sprintf(`action="/failed/%d/replay"`, a[0]),
		fmt.Sprintf(`action="/failed/%d/purge"`, a[0]),
		`name="back" value="/keys"`,
		`href="/queues/ledger/keys/acct:1"`,
		` UTC">`, // held since: the time the head failed, in the cell's title
	} {
		if !strings.Contains(held, want) {
			t.Errorf("held keys lack %q:\n%s", want, held)
		}
	}
	if strings.Contains(held, "tenant") {
		t.Errorf("a key that is not held is listed as held:\n%s", held)
	}
	// Why it waits: its head's error, masked.
	if !strings.Contains(held, `">charge failed: dial postgres://bob:***@db/x</td>`) || strings.Contains(held, "hunter2") {
		t.Errorf("held key's reason is missing or unmasked:\n%s", held)
	}
	busiest := section(t, body, `id="busiest"`, "</table>")
	if !strings.Contains(busiest, "acct:1") || !strings.Contains(busiest, `href="/queues/crawl/keys/tenant%2F2"`) {
		t.Errorf("busiest keys lack acct:1 or tenant/2's escaped link:\n%s", busiest)
	}
	if strings.Index(body, `id="held"`) > strings.Index(body, `id="busiest"`) {
		t.Error("held keys are not shown first")
	}
	if _, body := get(t, srv, "/keys?held=1&queue=ledger"); strings.Contains(body, `id="busiest"`) || !strings.Contains(body, `name="back" value="/keys?held=1&amp;queue=ledger"`) {
		t.Errorf("held-only page shows the busiest keys or loses its filter in back:\n%s", body)
	}

	// A key's page: its jobs in ID order, the head held, buttons back to it.
	code, body = get(t, srv, "/queues/ledger/keys/acct:1")
	if code != http.StatusOK || !strings.Contains(body, "ordered, on failure hold") || !strings.Contains(body, `badge s-failed">held<`) {
		t.Fatalf("key page: %d\n%s", code, body)
	}
	jobs := section(t, body, `id="keyjobs"`, "</table>")
	at := func(id int64) int { return strings.Index(jobs, fmt.Sprintf(`/%d">%d<`, id, id)) }
	if at(a[0]) < 0 || !(at(a[0]) < at(a[1]) && at(a[1]) < at(a[2])) || !strings.Contains(jobs, fmt.Sprintf(`/failed/%d"`, a[0])) {
		t.Errorf("key page's jobs are not %v in order, the head linked as failed:\n%s", a, jobs)
	}
	if strings.Contains(body, "hunter2") || !strings.Contains(body, "charge failed") {
		t.Errorf("the head's error is missing or unmasked:\n%s", jobs)
	}
	if !strings.Contains(body, fmt.Sprintf(`Held by failed job <a href="/failed/%d">%d</a> since <span`, a[0], a[0])) {
		t.Errorf("key page does not say which job holds it since when:\n%s", body)
	}
	back := `name="back" value="/queues/ledger/keys/acct:1"`
	if !strings.Contains(body, back) || !strings.Contains(body, fmt.Sprintf(`action="/failed/%d/replay"`, a[0])) {
		t.Errorf("key page lacks the head's buttons returning to it")
	}
	if code, body := get(t, srv, "/queues/crawl/keys/tenant%2F2"); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`/jobs/%d"`, s[0])) {
		t.Errorf("key with a slash: %d\n%s", code, body)
	}
	// The queue pages and a job's page show the rules and the key.
	if _, body := get(t, srv, "/queues"); !strings.Contains(body, `<a href="/keys?queue=ledger">ordered, on failure hold</a>`) {
		t.Errorf("queues page lacks ledger's key rules:\n%s", body)
	}
	if _, body := get(t, srv, "/queues/ledger"); !strings.Contains(body, "Keys: ordered, on failure hold") {
		t.Errorf("queue page lacks its key rules")
	}
	if _, body := get(t, srv, fmt.Sprintf("/jobs/%d", a[1])); !strings.Contains(body, `href="/queues/ledger/keys/acct:1">acct:1<`) {
		t.Errorf("job page lacks its key's link")
	}

	// Replay from the key's page: back to it, saying so; the head runs
	// again first, alone.
	code, loc := postForm(t, srv, fmt.Sprintf("/failed/%d/replay", a[0]), url.Values{"back": {"/queues/ledger/keys/acct:1"}}, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/queues/ledger/keys/acct:1?") {
		t.Fatalf("replay: %d %s, want a redirect to the key's page", code, loc)
	}
	if _, body := get(t, srv, loc); !strings.Contains(body, fmt.Sprintf("Replayed job %d: it is pending again.", a[0])) || strings.Contains(body, `id="replay"`) {
		t.Errorf("the key's page after the replay does not say so, or still offers a replay:\n%s", body)
	}
	endRows(t, b, false, wantClaim(t, b, "ledger", a[0])...)
	// The next head fails; discarded from the keys page, its key goes on.
	endRows(t, b, true, wantClaim(t, b, "ledger", a[1])...)
	code, loc = postForm(t, srv, fmt.Sprintf("/failed/%d/purge", a[1]), url.Values{"back": {"/keys?queue=ledger"}}, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/keys?") || !strings.Contains(loc, "queue=ledger") || !strings.Contains(loc, url.QueryEscape("Purged 1 failed job.")) {
		t.Fatalf("discard: %d %s, want a redirect to the keys page", code, loc)
	}
	if _, err := insp.Failed(t.Context(), a[1]); err == nil {
		t.Fatalf("failed job %d is still there after its discard", a[1])
	}
	last := wantClaim(t, b, "ledger", a[2])

	// The last fails: its failed job's page links to its key, and a
	// discard from another site is refused.
	endRows(t, b, true, last...)
	if _, body := get(t, srv, fmt.Sprintf("/failed/%d", a[2])); !strings.Contains(body, `href="/queues/ledger/keys/acct:1">acct:1<`) {
		t.Errorf("failed job page lacks its key's link")
	}
	if code, _ := postForm(t, srv, fmt.Sprintf("/failed/%d/purge", a[2]), url.Values{"back": {"/keys"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != http.StatusForbidden {
		t.Errorf("cross-site discard: %d, want 403", code)
	}
	if _, err := insp.Failed(t.Context(), a[2]); err != nil {
		t.Errorf("failed job %d after a refused discard: %v", a[2], err)
	}
}

// keysServer is dashServer with a client to enqueue keyed jobs on b.
func keysServer(t testing.TB, b backend.Backend) (*httptest.Server, *jobq.Inspector, *jobq.Client) {
	t.Helper()
	srv, insp := dashServer(t, b)
	client, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return srv, insp, client
}

// section is the part of body from the first from to the next to,
// failing the test when from is missing.
func section(t *testing.T, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("page lacks %s:\n%s", from, body)
	}
	s := body[i:]
	if j := strings.Index(s, to); j >= 0 {
		s = s[:j]
	}
	return s
}

// A back field that is not a keys page of this dashboard is ignored: the
// action redirects where it always did, never off the dashboard.
func TestKeysBack(t *testing.T) {
	for v, want := range map[string]string{
		"/keys":                     "/keys",
		"/keys?queue=q&held=1":      "/keys",
		"/queues/q/keys/a%2Fb":      "/queues/q/keys/a%2Fb",
		"":                          "",
		"//evil.example/keys":       "",
		"https://evil.example/keys": "",
		"/\\evil.example":           "",
		"/failed":                   "",
		"/queues/q":                 "",
		"/queues/q/keys/":           "",
		"/queues/q/keys/a/b":        "",
		"/keys#x":                   "",
		"/queues//keys/k":           "",
		"javascript:alert(1)":       "",
		"/keys\r\nLocation: https://evil.example": "",
	} {
		got, _, ok := keysBack(v)
		if got != want || ok != (want != "") {
			t.Errorf("keysBack(%q) = %q %v, want %q", v, got, ok, want)
		}
	}
	b := memoryBackend(t)
	srv, insp := dashServer(t, b)
	failJobs(t, b, "q", 1, `{}`, "boom")
	f, err := insp.FailedPage(t.Context(), jobq.FailedFilter{}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	code, loc := postForm(t, srv, fmt.Sprintf("/failed/%d/replay", f[0].JobID), url.Values{"back": {"//evil.example/keys"}}, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, fmt.Sprintf("/jobs/%d", f[0].JobID)) {
		t.Errorf("replay with a foreign back: %d %s, want the job's page", code, loc)
	}
}

// Without keys the pages are 501; bad names are 400.
func TestDashboardKeysRefusals(t *testing.T) {
	srv, _ := dashServer(t, noKeys{memoryBackend(t)})
	for path, want := range map[string]int{
		"/keys":                http.StatusNotImplemented,
		"/queues/q/keys/k":     http.StatusNotImplemented,
		"/keys?queue=a%20b":    http.StatusBadRequest,
		"/queues/q/keys/%01":   http.StatusBadRequest,
		"/queues/a%20b/keys/k": http.StatusBadRequest,
	} {
		if code, body := get(t, srv, path); code != want {
			t.Errorf("GET %s: %d, want %d\n%s", path, code, want, body)
		}
	}
}

// TestDashboardJobKey: a job's page, live or failed, shows its key as text
// linking to the key's page; a job without a key shows none.
func TestDashboardJobKey(t *testing.T) {
	b := memoryBackend(t)
	srv, _, client := keysServer(t, b)
	keyed := enqueueKeyed(t, client, "ledger", "a<b", 2)
	plain := enqueueKeyed(t, client, "plain", "", 1) // "" is no key
	endRows(t, b, true, wantClaim(t, b, "ledger", keyed...)[0])
	want := `<dd id="key"><a class="mono" href="/queues/ledger/keys/a%3Cb">a&lt;b</a></dd>`
	for _, path := range []string{fmt.Sprintf("/jobs/%d", keyed[1]), fmt.Sprintf("/failed/%d", keyed[0])} {
		code, body := get(t, srv, path)
		if code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "a<b") {
			t.Errorf("%s: %d, want the key escaped, linking to its page (%s):\n%s", path, code, want, body)
		}
	}
	// The link leads to the key's page, which lists both jobs.
	if code, body := get(t, srv, "/queues/ledger/keys/a%3Cb"); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`/jobs/%d"`, keyed[1])) || !strings.Contains(body, fmt.Sprintf(`/failed/%d"`, keyed[0])) {
		t.Errorf("the key's page: %d, lacks its jobs:\n%s", code, body)
	}
	if code, body := get(t, srv, fmt.Sprintf("/jobs/%d", plain[0])); code != http.StatusOK || strings.Contains(body, `id="key"`) {
		t.Errorf("job without a key: %d, shows a key:\n%s", code, body)
	}
}
