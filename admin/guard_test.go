package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rebound are the headers a browser sends after a DNS rebinding: the
// attacker's name as Host and Origin, and same-origin, since to the
// browser the page and the API are one origin.
func rebound(host string) map[string]string {
	return map[string]string{"Host": host, "Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}
}

// TestHostRebinding: without tokens, a request addressed to any name but
// a loopback one is refused, reads and writes alike, and writes nothing.
func TestHostRebinding(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{})
	evil := "rebind.evil.example:8080"
	e.want(e.do(req{path: "/api/v1/queues", headers: rebound(evil)}), http.StatusForbidden, "host_not_allowed")
	r := e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"http","payload":{"url":"http://example.invalid/"}}`, headers: rebound(evil)})
	e.want(r, http.StatusForbidden, "host_not_allowed")
	if !strings.Contains(r.errField("message"), "--allowed-hosts") {
		t.Errorf("refusal does not say how to allow a name: %s", r.raw)
	}
	e.wantCounts(0, 0, 0)
	page := e.do(req{path: "/", headers: rebound(evil)})
	if page.status != http.StatusForbidden || !strings.Contains(string(page.raw), "Host not allowed") {
		t.Fatalf("dashboard with a rebound Host: %d %s", page.status, page.raw)
	}
	if page.header.Get("Content-Security-Policy") != contentSecurityPolicy {
		t.Errorf("refusal without the security headers: %v", page.header)
	}

	// Names that only look local are refused; loopback names in any
	// spelling are answered.
	if (hostRule{}).allows("") { // HTTP/1.0 without Host; Go's client cannot send it
		t.Error("an empty Host is answered")
	}
	for _, host := range []string{"localhost.evil.example", "127.0.0.1.nip.io", "evil.example", "10.0.0.5:8080", "[::2]:80", "localhost:80@evil.example"} {
		e.want(e.do(req{path: "/api/v1/queues", headers: rebound(host)}), http.StatusForbidden, "host_not_allowed")
	}
	for _, host := range []string{"localhost", "LOCALHOST:8080", "localhost.", "127.0.0.1", "127.0.0.2:9", "[::1]", "[::1]:8080"} {
		e.want(e.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": host}}), http.StatusOK, "")
	}
}

// TestAllowedHosts: the list adds names beside the loopback ones, with or
// without tokens; with tokens and no list any host is answered, since a
// rebound browser holds no token.
func TestAllowedHosts(t *testing.T) {
	named := newEnvOn(t, memoryBackend(t), Options{AllowedHosts: []string{"jobq.test", "10.0.0.5"}})
	for host, want := range map[string]int{"jobq.test": 200, "JOBQ.test:8080": 200, "10.0.0.5:80": 200, "localhost": 200, "other.test": 403} {
		if got := named.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": host}}).status; got != want {
			t.Errorf("no tokens, allowed jobq.test: Host %q answered %d, want %d", host, got, want)
		}
	}
	tokens := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
	tokens.want(tokens.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": "jobq.example.com"}}), http.StatusOK, "")
	both := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens, AllowedHosts: []string{"jobq.example.com"}})
	both.want(both.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": "jobq.example.com:443"}}), http.StatusOK, "")
	both.want(both.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": "evil.example"}}), http.StatusForbidden, "host_not_allowed")
	star := newEnvOn(t, memoryBackend(t), Options{AllowedHosts: []string{"*"}})
	star.want(star.do(req{path: "/api/v1/queues", headers: map[string]string{"Host": "anything.example"}}), http.StatusOK, "")

	for _, bad := range [][]string{{"http://jobq.test"}, {"jobq.test/admin"}, {""}, {"*", "jobq.test"}, {"user@jobq.test"}} {
		if _, err := New(Options{Inspector: named.insp, AllowedHosts: bad}); err == nil || !strings.Contains(err.Error(), "AllowedHosts") {
			t.Errorf("AllowedHosts %q: err %v, want a refusal naming AllowedHosts", bad, err)
		}
	}
}

// TestLoginThrottle: after five wrong tokens a client waits before its
// next one is even checked (a right token included), twice as long after
// each further mistake; a right token after the wait clears the count.
// Wrong bearer tokens count the same.
func TestLoginThrottle(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
	wrong := url.Values{"token": {"wrong-wrong-wrong-wrong"}}
	for i := range freeFailures {
		if res := e.postForm("/login", wrong); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("wrong token %d: %d, want the form again", i+1, res.StatusCode)
		}
	}
	res := e.postForm("/login", url.Values{"token": {adminToken}})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || len(res.Cookies()) != 0 {
		t.Fatalf("right token right after %d wrong ones: %d Retry-After %q cookies %v, want 429, 1 s, no session", freeFailures, res.StatusCode, res.Header.Get("Retry-After"), res.Cookies())
	}
	// The API's bearer tokens are held back too, right ones included.
	r := e.do(req{path: "/api/v1/queues"})
	e.want(r, http.StatusTooManyRequests, "too_many_attempts")

	time.Sleep(1100 * time.Millisecond)
	e.want(e.do(req{path: "/api/v1/queues", token: tok("wrong-wrong-wrong-wrong")}), http.StatusUnauthorized, "unauthorized")
	// The sixth mistake doubles the wait.
	if got := e.do(req{path: "/api/v1/queues"}); got.status != http.StatusTooManyRequests || got.header.Get("Retry-After") != "2" {
		t.Fatalf("after a sixth wrong token: %d Retry-After %q, want 429 and 2 s", got.status, got.header.Get("Retry-After"))
	}
	time.Sleep(2100 * time.Millisecond)
	if res := e.postForm("/login", url.Values{"token": {adminToken}}); res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("right token after the wait: %d cookies %v, want a session", res.StatusCode, res.Cookies())
	}
	// Cleared: mistakes are free again.
	if res := e.postForm("/login", wrong); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a wrong token after a right one: %d, want the form again", res.StatusCode)
	}
	e.want(e.do(req{path: "/api/v1/queues"}), http.StatusOK, "")
}

// TestThrottleBounded: a guesser with many addresses cannot grow the
// table past maxClients.
func TestThrottleBounded(t *testing.T) {
	th := newThrottle()
	for i := range maxClients + 500 {
		th.failed(strconv.Itoa(i))
	}
	if n := len(th.byClient); n > maxClients {
		t.Fatalf("throttle remembers %d clients, want at most %d", n, maxClients)
	}
}

// TestSecureCookies: behind a TLS-terminating proxy the request arrives
// without TLS, and the option still marks the login cookie Secure.
func TestSecureCookies(t *testing.T) {
	for _, secure := range []bool{false, true} {
		e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens, SecureCookies: secure})
		res := e.postForm("/login", url.Values{"token": {adminToken}})
		cs := res.Cookies()
		if len(cs) != 1 || cs[0].Secure != secure {
			t.Fatalf("SecureCookies %v: cookies %v, want one with Secure %v", secure, cs, secure)
		}
		res = e.postForm("/logout", nil, cs[0])
		if cs := res.Cookies(); len(cs) != 1 || cs[0].Secure != secure {
			t.Fatalf("SecureCookies %v: logout cookies %v, want one with Secure %v", secure, cs, secure)
		}
	}
}
