package admin

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/internal/storetest"
)

// TestAPIJobResult: GET /api/v1/jobs/{id} of a kept completed job carries
// its handler's result, masked like its payload; one kept without a
// result has none; the list of completed jobs leaves results out.
func TestAPIJobResult(t *testing.T) {
	forEachStore(t, func(t *testing.T, storeURL string) {
		e := newEnv(t, storeURL, Options{})
		id := storetest.KeptWithResult(t, e.b, "res", []byte(storetest.KeptResult))
		bare := storetest.KeptWithResult(t, e.b, "res", nil)

		g := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", id)})
		e.want(g, http.StatusOK, "")
		res, ok := g.body["result"].(map[string]any)
		if g.body["state"] != "completed" || !ok || res["url"] != "s3://b/a-320.png" || num(res["width"]) != 320 || res["token"] != "***" {
			t.Fatalf("GET jobs/%d = %s, want completed with its result, token masked", id, g.raw)
		}
		if strings.Contains(string(g.raw), storetest.ResultSecret) {
			t.Errorf("GET jobs/%d shows the result's secret: %s", id, g.raw)
		}
		n := e.do(req{path: fmt.Sprintf("/api/v1/jobs/%d", bare)})
		e.want(n, http.StatusOK, "")
		if _, has := n.body["result"]; has {
			t.Errorf("GET jobs/%d of a job kept without a result = %s, want no result", bare, n.raw)
		}
		l := e.do(req{path: "/api/v1/jobs?state=completed&queue=res"})
		e.want(l, http.StatusOK, "")
		if jobs, _ := l.body["jobs"].([]any); len(jobs) != 2 || strings.Contains(string(l.raw), `"result"`) {
			t.Errorf("completed list = %s, want both jobs without results", l.raw)
		}
	})
}

// TestDashboardJobResult: a kept completed job's page shows its result,
// masked and escaped (markup in it is text, never live); a job without
// one has no Result section.
func TestDashboardJobResult(t *testing.T) {
	b := openSQLite(t)
	srv, _ := dashServer(t, b)
	id := storetest.KeptWithResult(t, b, "res", []byte(storetest.KeptResult))
	code, body := get(t, srv, fmt.Sprintf("/jobs/%d", id))
	if code != http.StatusOK || !strings.Contains(body, `<pre class="payload" id="result">`) {
		t.Fatalf("GET /jobs/%d: %d, want 200 with a result section:\n%s", id, code, body)
	}
	if strings.Contains(body, "<script>window.__xss=31") {
		t.Error("the result's markup is on the page unescaped")
	}
	text := html.UnescapeString(body)
	for _, want := range []string{`"url": "s3://b/a-320.png"`, `"note": "<script>window.__xss=31</script>"`, `"token": "***"`} {
		if !strings.Contains(text, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	if strings.Contains(body, storetest.ResultSecret) {
		t.Error("job page shows the result's secret")
	}
	bare := storetest.KeptWithResult(t, b, "res", nil)
	if code, body := get(t, srv, fmt.Sprintf("/jobs/%d", bare)); code != http.StatusOK || strings.Contains(body, `id="result"`) {
		t.Errorf("GET /jobs/%d of a job kept without a result: %d, has a result section: %v", bare, code, strings.Contains(body, `id="result"`))
	}
}
