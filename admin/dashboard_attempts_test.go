package admin

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardAttempts: the failed job's page and, after a replay, the
// job's page show a table of every failed attempt: number, duration,
// worker and masked error, oldest first.
func TestDashboardAttempts(t *testing.T) {
	e := newEnvOn(t, openSQLite(t), Options{})
	jobID := e.failTwice("q")
	rows := []*regexp.Regexp{
		regexp.MustCompile(`<tr><td>1</td><td>[^<]+</td><td>1\.5s</td><td class="mono">host-a:101</td><td><pre class="error">dial https://bot:\*\*\*@h\.example/x: refused</pre></td></tr>`),
		regexp.MustCompile(`<tr><td>2</td><td>[^<]+</td><td>250µs</td><td class="mono">host-b:202</td><td><pre class="error">http 503</pre></td></tr>`),
	}
	check := func(what, body string) {
		t.Helper()
		i := strings.Index(body, `id="attempts"`)
		if i < 0 {
			t.Fatalf("%s has no attempts table:\n%s", what, body)
		}
		table := body[i:]
		table = table[:strings.Index(table, "</table>")]
		for n, re := range rows {
			if !re.MatchString(table) {
				t.Errorf("%s: attempt %d row missing, want /%s/ in\n%s", what, n+1, re, table)
			}
		}
		if strings.Index(table, "<td>1</td>") > strings.Index(table, "<td>2</td>") {
			t.Errorf("%s lists the attempts newest first:\n%s", what, table)
		}
		if strings.Contains(body, "pw-4402") {
			t.Errorf("%s shows an attempt's secret", what)
		}
	}
	code, body := get(t, e.srv, fmt.Sprintf("/failed/%d", jobID))
	if code != http.StatusOK {
		t.Fatalf("failed job page: %d %s", code, body)
	}
	check("failed job page", body)

	e.want(e.do(req{method: "POST", path: fmt.Sprintf("/api/v1/failed/%d/replay", jobID)}), http.StatusOK, "")
	code, body = get(t, e.srv, fmt.Sprintf("/jobs/%d", jobID))
	if code != http.StatusOK {
		t.Fatalf("job page: %d %s", code, body)
	}
	check("job page", body)
}
