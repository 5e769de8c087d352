package admin

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// The overview, the queue's list, a job, the failed list, a failed job and
// the schedules render the backend's real rows, on each durable backend.
func TestDashboardPages(t *testing.T) {
	for _, st := range stores {
		t.Run(st.Name, func(t *testing.T) {
			b := openStore(t, st.URL(t))
			srv, insp := dashServer(t, b)
			ids := insertJobs(t, b, "mail", 1234, `{"to":"ann@example.com","n":1}`, 0)
			insertJobs(t, b, "mail", 7, `{}`, time.Hour)
			failJobs(t, b, "billing", 3, `{"invoice":42}`, "card declined")
			if err := insp.PauseQueue(t.Context(), "billing"); err != nil {
				t.Fatal(err)
			}

			code, body := get(t, srv, "/")
			if code != http.StatusOK {
				t.Fatalf("overview: %d %s", code, body)
			}
			for _, want := range []string{`data-total="pending">1,234<`, `data-total="scheduled">7<`, `data-total="failed">3<`, `data-queue="billing"`, `badge paused`} {
				if !strings.Contains(body, want) {
					t.Errorf("overview lacks %q", want)
				}
			}

			code, body = get(t, srv, "/queues/mail?state=pending")
			if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`/jobs/%d"`, ids[len(ids)-1])) {
				t.Fatalf("queue page: %d, newest job %d not linked", code, ids[len(ids)-1])
			}
			// The next page starts below the last ID shown.
			next := ids[len(ids)-pageSize]
			if !strings.Contains(body, "before="+strconv.FormatInt(next, 10)) {
				t.Errorf("queue page: no cursor before=%d: %s", next, body[strings.Index(body, "pager")-20:])
			}
			code, body = get(t, srv, "/queues/mail?state=pending&before="+strconv.FormatInt(next, 10))
			after := ids[len(ids)-pageSize-1] // IDs are not consecutive on Redis
			if code != http.StatusOK || strings.Contains(body, fmt.Sprintf(`/jobs/%d"`, next)) || !strings.Contains(body, fmt.Sprintf(`/jobs/%d"`, after)) {
				t.Errorf("second page: %d, want it to start at job %d", code, after)
			}

			code, body = get(t, srv, fmt.Sprintf("/jobs/%d", ids[0]))
			if code != http.StatusOK || !strings.Contains(body, "ann@example.com") || !strings.Contains(body, "pending") {
				t.Errorf("job page: %d %s", code, body)
			}
			if code, _ := get(t, srv, "/jobs/999999"); code != http.StatusNotFound {
				t.Errorf("unknown job: %d, want 404", code)
			}

			code, body = get(t, srv, "/failed?queue=billing")
			if code != http.StatusOK || !strings.Contains(body, "card declined") || !strings.Contains(body, "all <strong>3</strong> matching") {
				t.Errorf("failed list: %d %s", code, body)
			}
			failed, err := insp.FailedPage(t.Context(), jobq.FailedFilter{}, 3, 0)
			if err != nil || len(failed) != 3 {
				t.Fatalf("failed page: %v", err)
			}
			// The list names each failed job by its job's ID, in its link
			// and its checkbox: no failed row's own ID is its job's here.
			for _, f := range failed {
				link, box := fmt.Sprintf(`href="/failed/%d">%d<`, f.JobID, f.JobID), fmt.Sprintf(`name="id" value="%d"`, f.JobID)
				if f.ID == f.JobID || !strings.Contains(body, link) || !strings.Contains(body, box) {
					t.Errorf("failed list lacks job %d's link or checkbox (its row's own ID %d)", f.JobID, f.ID)
				}
			}
			code, body = get(t, srv, fmt.Sprintf("/failed/%d", failed[0].JobID))
			if code != http.StatusOK || !strings.Contains(body, "card declined") || !strings.Contains(body, `&#34;invoice&#34;: 42`) ||
				!strings.Contains(body, fmt.Sprintf("<h1>Job %d ", failed[0].JobID)) {
				t.Errorf("failed job page: %d %s", code, body)
			}
			// The job's page of a failed job is its failed job's page.
			replay := fmt.Sprintf(`action="/failed/%d/replay"`, failed[0].JobID)
			if code, body := get(t, srv, fmt.Sprintf("/jobs/%d", failed[0].JobID)); code != http.StatusOK ||
				!strings.Contains(body, "card declined") || !strings.Contains(body, replay) {
				t.Errorf("job page of failed job %d: %d %s", failed[0].JobID, code, body)
			}
			if code, _ := get(t, srv, "/schedules"); code != http.StatusOK {
				t.Errorf("schedules: %d", code)
			}
			code, body = get(t, srv, "/queues")
			if code != http.StatusOK || !strings.Contains(body, "/queues/billing/resume") || !strings.Contains(body, "/queues/mail/pause") {
				t.Errorf("queues page: %d, want resume for billing and pause for mail", code)
			}
		})
	}
}

// Bad parameters are a 400 page, not a 500 or an empty list.
func TestDashboardBadInput(t *testing.T) {
	srv, _ := dashServer(t, openSQLite(t))
	for _, p := range []string{"/queues/q?before=x", "/queues/q?before=-1", "/queues/q?state=dead", "/queues/q?state=cancelling", "/failed?before=0x1", "/jobs/abc", "/failed/0"} {
		if code, _ := get(t, srv, p); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, code)
		}
	}
}

// A payload, error and metadata full of markup are shown as text: the
// page carries them escaped, never as live markup.
func TestDashboardEscapesPayload(t *testing.T) {
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	payload := `{"html":"<script>window.__xss=1</script><img src=x onerror=alert(1)>","t":"{{.}}"}`
	failJobs(t, b, "q", 1, payload, `</pre><script>alert(1)</script>`)
	fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, srv, fmt.Sprintf("/failed/%d", fj[0].JobID))
	for _, raw := range []string{"<script>window", "<img src=x", "</pre><script>"} {
		if strings.Contains(body, raw) {
			t.Errorf("page carries %q unescaped", raw)
		}
	}
	if !strings.Contains(html.UnescapeString(body), "<script>window.__xss=1</script>") || !strings.Contains(body, "{{.}}") {
		t.Error("payload text missing from the page")
	}
}

// Bulk replay of "all matching" a queue filter replays every one of them,
// not a page, and leaves other queues' failed jobs; purge by IDs deletes
// just those, nothing ticked deletes nothing, and "all matching" purges the
// filter's matches, or with no filter every failed job. The redirect says
// how many.
func TestDashboardBulkReplayAndPurge(t *testing.T) {
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	failJobs(t, b, "a", pageSize+20, `{}`, "boom")
	failJobs(t, b, "b", 5, `{}`, "boom")

	code, loc := postForm(t, srv, "/failed/replay", url.Values{"queue": {"a"}, "all": {"1"}}, nil)
	if code != http.StatusSeeOther || !strings.Contains(loc, url.QueryEscape("Replayed 70 jobs.")) {
		t.Fatalf("replay all: %d %s", code, loc)
	}
	if a, bq := statsOfQueue(t, insp, "a"), statsOfQueue(t, insp, "b"); a.Failed != 0 || a.Pending != 70 || bq.Failed != 5 {
		t.Fatalf("after replay: a %+v, b %+v", a, bq)
	}

	rows, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "b"}, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"queue": {"b"}, "id": {strconv.FormatInt(rows[0].JobID, 10), strconv.FormatInt(rows[1].JobID, 10)}}
	if code, loc := postForm(t, srv, "/failed/purge", form, nil); code != http.StatusSeeOther || !strings.Contains(loc, url.QueryEscape("Purged 2 failed jobs.")) {
		t.Fatalf("purge: %d %s", code, loc)
	}
	if got := statsOfQueue(t, insp, "b").Failed; got != 3 {
		t.Fatalf("after purge of 2: %d failed in b, want 3", got)
	}
	// Nothing ticked: nothing purged, and the page says so.
	if code, loc := postForm(t, srv, "/failed/purge", url.Values{"queue": {"b"}}, nil); code != http.StatusSeeOther || !strings.Contains(loc, "Nothing+purged") {
		t.Fatalf("empty purge: %d %s", code, loc)
	}
	if got := statsOfQueue(t, insp, "b").Failed; got != 3 {
		t.Fatalf("after an empty purge: %d failed in b, want 3", got)
	}
	// "All matching" a queue: that queue's only; with no filter: every one.
	failJobs(t, b, "c", 2, `{}`, "boom")
	if code, loc := postForm(t, srv, "/failed/purge", url.Values{"queue": {"c"}, "all": {"1"}}, nil); code != http.StatusSeeOther || !strings.Contains(loc, url.QueryEscape("Purged 2 failed jobs.")) {
		t.Fatalf("purge all of c: %d %s", code, loc)
	}
	if c, bq := statsOfQueue(t, insp, "c").Failed, statsOfQueue(t, insp, "b").Failed; c != 0 || bq != 3 {
		t.Fatalf("after purging all of c: %d failed in c, %d in b; want 0 and 3", c, bq)
	}
	if code, loc := postForm(t, srv, "/failed/purge", url.Values{"all": {"1"}}, nil); code != http.StatusSeeOther || !strings.Contains(loc, url.QueryEscape("Purged 3 failed jobs.")) {
		t.Fatalf("purge all: %d %s", code, loc)
	}
	if got := statsOfQueue(t, insp, "b").Failed; got != 0 {
		t.Fatalf("after purging all: %d failed in b, want 0", got)
	}
}

// A form posted from another site is refused by the dashboard's routes
// and changes nothing.
func TestDashboardRefusesCrossOrigin(t *testing.T) {
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	failJobs(t, b, "q", 2, `{}`, "boom")
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}},
		{"Sec-Fetch-Site": nil, "Origin": {"https://evil.example"}},
	} {
		if code, _ := postForm(t, srv, "/failed/purge", url.Values{"all": {"1"}}, h); code != http.StatusForbidden {
			t.Errorf("purge with %v: %d, want 403", h, code)
		}
		if code, _ := postForm(t, srv, "/queues/q/pause", nil, h); code != http.StatusForbidden {
			t.Errorf("pause with %v: %d, want 403", h, code)
		}
	}
	if got := statsOfQueue(t, insp, "q").Failed; got != 2 {
		t.Fatalf("failed jobs after refused purges: %d, want 2", got)
	}
	if s, err := insp.QueueSettings(t.Context()); err != nil || len(s) != 0 {
		t.Fatalf("queue settings after refused pause: %v %v", s, err)
	}
}

// Pause and resume buttons change the queue's setting.
func TestDashboardPauseResume(t *testing.T) {
	srv, insp := dashServer(t, openSQLite(t))
	paused := func() bool {
		s, err := insp.QueueSettings(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(s) == 1 && s[0].Queue == "mail" && s[0].Paused
	}
	if code, _ := postForm(t, srv, "/queues/mail/pause", nil, nil); code != http.StatusSeeOther || !paused() {
		t.Fatalf("pause: %d, paused %v", code, paused())
	}
	code, loc := postForm(t, srv, "/queues/mail/resume", nil, nil)
	if code != http.StatusSeeOther || paused() {
		t.Fatalf("resume: %d, paused %v", code, paused())
	}
	// The redirect's page says what was done; a flash message nobody
	// signed (a link anyone can write) is not shown.
	if _, body := get(t, srv, loc); !strings.Contains(body, "Resumed queue mail.") {
		t.Errorf("the page after resume (%s) does not say so", loc)
	}
	if _, body := get(t, srv, "/queues?flash=Session+expired:+log+in+at+evil.example&fs=00"); strings.Contains(body, "evil.example") {
		t.Errorf("an unsigned flash message was shown")
	}
}

// The counts are shared for their TTL (one backend query however many
// viewers), refreshed after it and at once after a change.
func TestCountsCache(t *testing.T) {
	b := openSQLite(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := newCountsCache(jobq.NewInspector(b), func() time.Time { return now })
	pending := func() int64 {
		qs, _, err := c.get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return jobq.Totals(statsOf(qs)).Pending
	}
	insertJobs(t, b, "q", 1, `{}`, 0)
	if got := pending(); got != 1 {
		t.Fatalf("first read: %d", got)
	}
	insertJobs(t, b, "q", 1, `{}`, 0)
	if got := pending(); got != 1 {
		t.Fatalf("within the TTL: %d, want the cached 1", got)
	}
	now = now.Add(countsTTL)
	if got := pending(); got != 2 {
		t.Fatalf("after the TTL: %d, want 2", got)
	}
	insertJobs(t, b, "q", 1, `{}`, 0)
	c.invalidate()
	if got := pending(); got != 3 {
		t.Fatalf("after invalidate: %d, want 3", got)
	}
}

// The history turns samples into per-minute bars: jobs inserted that left
// the live set count as finished, growth of the failed table as failed, the
// rest of the finished as completed; a gap without samples, or a sample
// whose insert count could not be read, is unknown, not guessed.
func TestCountsHistory(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	c := &countsCache{now: func() time.Time { return now }}
	at := func(m, s int) time.Time { return now.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	c.samples = []sample{
		{at: at(-12, 0), live: 7, failed: 0, inserted: 500, known: true},
		// The insert count could not be read: the minute is unknown.
		{at: at(-12, 10), live: 3, failed: 0},
		{at: at(-10, 0), live: 100, failed: 5, inserted: 1000, known: true},
		// +50 inserted, live −10, so 60 finished, 4 of them failed.
		{at: at(-10, 30), live: 90, failed: 9, inserted: 1050, known: true},
		// A replay of 9 (failed −9, live +9) and nothing else: zero, not negative.
		{at: at(-9, 0), live: 99, failed: 0, inserted: 1050, known: true},
		// Two intervals in one minute add up: +30 inserted, live +10 (20
		// finished, 2 failed), then +5 inserted, live −5 (10 finished).
		{at: at(-8, 10), live: 109, failed: 2, inserted: 1080, known: true},
		{at: at(-8, 20), live: 104, failed: 2, inserted: 1085, known: true},
		// Ten minutes without samples: unknown, then one known minute.
		{at: at(-1, 0), live: 0, failed: 0, inserted: 1200, known: true},
		{at: at(0, 0), live: 0, failed: 1, inserted: 1210, known: true},
	}
	h := c.history()
	if len(h) != 60 {
		t.Fatalf("%d bars, want 60", len(h))
	}
	bar := func(m int) minute { return h[59+m] }
	if b := bar(-12); b.Known {
		t.Errorf("minute -12 (insert count unread): %+v, want unknown", b)
	}
	if b := bar(-10); !b.Known || b.Completed != 56 || b.Failed != 4 {
		t.Errorf("minute -10: %+v, want 56 completed, 4 failed", b)
	}
	if b := bar(-9); !b.Known || b.Completed != 0 || b.Failed != 0 {
		t.Errorf("minute -9 (replay): %+v, want known zeros", b)
	}
	if b := bar(-8); !b.Known || b.Completed != 28 || b.Failed != 2 {
		t.Errorf("minute -8 (two intervals): %+v, want 28 completed, 2 failed", b)
	}
	if b := bar(-1); b.Known {
		t.Errorf("minute -1 after a 8-minute gap: %+v, want unknown", b)
	}
	if b := bar(0); !b.Known || b.Completed != 9 || b.Failed != 1 {
		t.Errorf("minute 0: %+v, want 9 completed, 1 failed", b)
	}
	if b := bar(-30); b.Known || b.Unsupported {
		t.Errorf("minute -30: %+v, want unknown (not unsupported)", b)
	}
}

// The templates carry nothing the Content-Security-Policy would block: no
// inline script, no inline event handler, no style attribute. (A page
// that needed one would break silently in a browser.)
func TestTemplatesNeedNoInlineCode(t *testing.T) {
	entries, err := web.ReadDir("web/templates")
	if err != nil || len(entries) == 0 {
		t.Fatalf("templates: %v", err)
	}
	bad := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<script(?:(?:\s(?:defer|type="[^"]*"))*)>|\son[a-z]+\s*=|\sstyle\s*=|<style|javascript:`)
	for _, e := range entries {
		b, err := web.ReadFile("web/templates/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if m := bad.Find(b); m != nil {
			t.Errorf("%s: %q would need 'unsafe-inline'", e.Name(), m)
		}
	}
}

// The assets are served with their types (nosniff refuses a script served
// as text/plain) and the login page keeps next inside the dashboard.
func TestDashboardAssetsAndLogin(t *testing.T) {
	srv, _ := dashServer(t, openSQLite(t))
	for path, typ := range map[string]string{"/static/dash.js": "javascript", "/static/dash.css": "text/css"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), typ) {
			t.Errorf("%s: %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), typ)
		}
	}
	code, body := get(t, srv, "/login?next="+url.QueryEscape("//evil.example/"))
	if code != http.StatusOK || !strings.Contains(body, `name="next" value="/"`) || !strings.Contains(body, `action="/login"`) {
		t.Errorf("login page: %d %s", code, body)
	}
	code, body = get(t, srv, "/login?next="+url.QueryEscape("/failed?queue=a"))
	if code != http.StatusOK || !strings.Contains(body, `name="next" value="/failed?queue=a"`) {
		t.Errorf("login page keeps a local next: %d %s", code, body)
	}
}

// A running job whose cancel was requested shows as cancelling, without a
// Cancel button; a pending one offers it.
func TestDashboardJobCancelling(t *testing.T) {
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	ids := insertJobs(t, b, "mail", 2, `{}`, 0)
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"mail"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	running := rows[0].ID
	if res, err := insp.Cancel(t.Context(), running); err != nil || res[0].Outcome != jobq.CancelRequested {
		t.Fatalf("cancel the running job: %+v, %v", res, err)
	}
	code, body := get(t, srv, fmt.Sprintf("/jobs/%d", running))
	if code != http.StatusOK || !strings.Contains(body, `s-cancelling">cancelling<`) || strings.Contains(body, "/cancel") {
		t.Errorf("cancelling job's page: %d, want state cancelling and no Cancel button:\n%s", code, body)
	}
	other := ids[0]
	if other == running {
		other = ids[1]
	}
	if code, body := get(t, srv, fmt.Sprintf("/jobs/%d", other)); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf("/jobs/%d/cancel", other)) {
		t.Errorf("pending job's page: %d, want a Cancel button", code)
	}
}

// TestDashboardJobMetadata: a job's page shows its metadata, a secret
// key's value masked.
func TestDashboardJobMetadata(t *testing.T) {
	b := openSQLite(t)
	srv, _ := dashServer(t, b)
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1,
		Metadata: map[string]string{"tenant": "acme-7", "api-token": "tk-3310"}}})
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv, fmt.Sprintf("/jobs/%d", res[0].ID))
	if code != http.StatusOK || !strings.Contains(body, "<h2>Metadata</h2>") || !strings.Contains(body, "acme-7") ||
		!strings.Contains(body, "api-token") || strings.Contains(body, "tk-3310") {
		t.Errorf("job page (%d) shows its metadata wrongly:\n%s", code, body)
	}
}
