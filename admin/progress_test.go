package admin

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/storetest"
)

// TestAPIJobProgress: GET /api/v1/jobs/{id} of a running job carries its
// handler's last progress, and so does the list of reserved jobs; a
// pending job has none.
func TestAPIJobProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, storeURL string) {
		e := newEnv(t, storeURL, Options{})
		id := storetest.RunningWithProgress(t, e.b, "prog", 64, storetest.ProgressMessage)

		g := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", id)})
		e.want(g, http.StatusOK, "")
		p, ok := g.body["progress"].(map[string]any)
		if g.body["state"] != "reserved" || !ok || num(p["percent"]) != 64 || p["message"] != storetest.ProgressMessage || p["at"] == "" {
			t.Fatalf("GET jobs/%d = %s, want reserved with its progress", id, g.raw)
		}
		l := e.do(req{path: "/api/v1/jobs?state=reserved&queue=prog"})
		e.want(l, http.StatusOK, "")
		jobs, _ := l.body["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("reserved list = %s, want the one job", l.raw)
		}
		if p, _ := jobs[0].(map[string]any)["progress"].(map[string]any); p == nil || num(p["percent"]) != 64 {
			t.Errorf("reserved list = %s, want the job with its progress", l.raw)
		}
		res := e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"t","queue":"prog-wait"}`})
		if res.status/100 != 2 {
			t.Fatalf("enqueue: %d %s", res.status, res.raw)
		}
		w := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", int64(num(res.body["id"])))})
		if _, has := w.body["progress"]; has || w.body["state"] != "pending" {
			t.Errorf("GET of a pending job = %s, want no progress", w.raw)
		}
	})
}

// TestDashboardJobProgress: a running job's page and the queue's running
// list draw its progress bar, the message escaped (markup in it is text,
// never live).
func TestDashboardJobProgress(t *testing.T) {
	b := openSQLite(t)
	srv, _ := dashServer(t, b)
	id := storetest.RunningWithProgress(t, b, "prog", 64, storetest.ProgressMessage)
	for _, path := range []string{fmt.Sprintf("/jobs/%d", id), "/queues/prog?state=reserved"} {
		code, body := get(t, srv, path)
		if code != http.StatusOK || !strings.Contains(body, `<progress max="100" value="64">`) {
			t.Fatalf("GET %s: %d, want 200 with a progress bar at 64:\n%s", path, code, body)
		}
		if strings.Contains(body, `<img src=x onerror`) {
			t.Errorf("GET %s: the progress message's markup is on the page unescaped", path)
		}
		if !strings.Contains(html.UnescapeString(body), storetest.ProgressMessage) {
			t.Errorf("GET %s lacks the progress message", path)
		}
	}
}

// TestDashboardJobDeadline: a waiting job's page says by when it must
// start (jobq.Deadline); a job without one says nothing of it.
func TestDashboardJobDeadline(t *testing.T) {
	b := openSQLite(t)
	srv, _ := dashServer(t, b)
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	with, err := c.Enqueue(t.Context(), "quote", nil, jobq.Deadline(at))
	if err != nil {
		t.Fatal(err)
	}
	without, err := c.Enqueue(t.Context(), "quote", nil)
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv, fmt.Sprintf("/jobs/%d", with))
	if code != http.StatusOK || !strings.Contains(body, `id="deadline"`) || !strings.Contains(body, at.Format("15:04:05")) {
		t.Fatalf("GET job %d with a deadline at %s: %d, want its deadline shown:\n%s", with, at, code, body)
	}
	if code, body := get(t, srv, fmt.Sprintf("/jobs/%d", without)); code != http.StatusOK || strings.Contains(body, `id="deadline"`) {
		t.Fatalf("GET job %d without a deadline: %d, want none shown:\n%s", without, code, body)
	}
}
