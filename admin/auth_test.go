package admin

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// postForm posts a login or logout form like a browser on the same site.
func (e *env) postForm(path string, form url.Values, cookies ...*http.Cookie) *http.Response {
	e.t.Helper()
	r, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range cookies {
		r.AddCookie(c)
	}
	res, err := noRedirect.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// get sends a GET with cookies, no token.
func (e *env) get(path string, cookies ...*http.Cookie) *http.Response {
	e.t.Helper()
	r, err := http.NewRequest("GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	res, err := noRedirect.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func TestLogin(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens, Prefix: "/admin"})
	e.s.handle("GET /page", ScopeRead, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	e.s.handle("POST /page", ScopeAdmin, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("done")) })

	// A dashboard page without a login redirects to the form, with next.
	res := e.get("/page?x=1")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/login?next="+url.QueryEscape("/admin/page?x=1") {
		t.Fatalf("unauthenticated page: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// A wrong token goes back to the form and sets no cookie.
	res = e.postForm("/login", url.Values{"token": {"wrong-wrong-wrong"}, "next": {"/admin/page"}})
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/admin/login?failed=1") || len(res.Cookies()) != 0 {
		t.Fatalf("wrong token: %d %q %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	// ...where the form says so.
	page, err := http.Get(e.srv.URL + "/login?failed=1&next=%2Fadmin%2Fpage")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "That token was not accepted") {
		t.Fatalf("login form after a refusal: %d, no refusal notice:\n%s", page.StatusCode, body)
	}
	// The read token logs in: a session cookie that is not the token.
	res = e.postForm("/login", url.Values{"token": {readToken}, "next": {"/admin/page?x=1"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/page?x=1" {
		t.Fatalf("login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	cs := res.Cookies()
	if len(cs) != 1 {
		t.Fatalf("login set %d cookies", len(cs))
	}
	c := cs[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/admin" || c.Secure || strings.Contains(c.Value, "0123456789abcdef") || len(c.Value) < 32 {
		t.Fatalf("cookie %+v", c)
	}
	if r := e.get("/page", c); r.StatusCode != http.StatusOK {
		t.Fatalf("page with the session: %d", r.StatusCode)
	}
	if r := e.get("/api/v1/queues", c); r.StatusCode != http.StatusOK {
		t.Fatalf("API with the session: %d", r.StatusCode)
	}
	// Behind a proxy that adds its own Basic credentials the session
	// still counts; a wrong bearer token does not fall back to it.
	for _, c2 := range []struct {
		auth string
		want int
	}{{"Basic cHJveHk6cGFzcw==", http.StatusOK}, {"Bearer wrong-wrong-wrong", http.StatusUnauthorized}} {
		r, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/queues", nil)
		r.Header.Set("Authorization", c2.auth)
		r.AddCookie(c)
		res, err := noRedirect.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c2.want {
			t.Fatalf("session with Authorization %q: %d, want %d", c2.auth, res.StatusCode, c2.want)
		}
	}
	// The read session cannot do an admin action: 403, not a redirect.
	if r := e.postForm("/page", nil, c); r.StatusCode != http.StatusForbidden {
		t.Fatalf("admin POST with a read session: %d", r.StatusCode)
	}
	// ...answered as a page a browser shows, not as the API's JSON.
	pr, _ := http.NewRequest("POST", e.srv.URL+"/page", nil)
	pr.Header.Set("Sec-Fetch-Site", "same-origin")
	pr.AddCookie(c)
	if res, err := noRedirect.Do(pr); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "Not allowed") {
			t.Fatalf("admin POST with a read session: %d %s, want a 403 page:\n%s", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	// A cross-site login attempt is refused.
	r, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	if res, err := noRedirect.Do(r); err != nil || res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("cross-site login: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	// Logout ends the session on the server: the old cookie stops working.
	res = e.postForm("/logout", nil, c)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d %v", res.StatusCode, res.Cookies())
	}
	if r := e.get("/api/v1/queues", c); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with a logged-out session: %d", r.StatusCode)
	}
	if r := e.get("/page", c); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("page with a logged-out session: %d", r.StatusCode)
	}
}

func TestLoginNext(t *testing.T) {
	s := &server{opts: Options{Prefix: "/admin"}}
	for next, want := range map[string]string{
		"/admin/failed?q=1":     "/admin/failed?q=1",
		"/admin":                "/admin",
		"":                      "/admin/",
		"//evil.example/admin/": "/admin/",
		"https://evil.example/": "/admin/",
		"/\\evil.example":       "/admin/",
		"/other":                "/admin/",
		"/adminx":               "/admin/",
		"javascript:alert(1)":   "/admin/",
		"/admin/\r\nSet-Cookie": "/admin/",
	} {
		if got := s.localNext(next); got != want {
			t.Errorf("localNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestNoTokens(t *testing.T) {
	// Without tokens every route is open (jobq serve then binds loopback
	// only), and login just follows next.
	e := newEnvOn(t, memoryBackend(t), Options{})
	e.want(e.do(req{method: "POST", path: "/api/v1/failed/purge", body: `{"all":true}`}), http.StatusOK, "")
	res := e.postForm("/login", url.Values{"next": {"/queues"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/queues" || len(res.Cookies()) != 0 {
		t.Fatalf("login without tokens: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestParseToken(t *testing.T) {
	tk, err := ParseToken(" admin:0123456789abcdef:with-colon ")
	if err != nil || tk.Scope != ScopeAdmin || tk.Secret != "0123456789abcdef:with-colon" {
		t.Fatalf("ParseToken: %+v %v", tk, err)
	}
	for _, bad := range []string{"0123456789abcdef0123", "admn:0123456789abcdef", "read:short", "read:"} {
		_, err := ParseToken(bad)
		if err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
			continue
		}
		if _, secret, _ := strings.Cut(bad, ":"); secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("ParseToken(%q)'s error shows the secret: %v", bad, err)
		}
	}
	if _, err := New(Options{Inspector: newEnvOn(t, memoryBackend(t), Options{}).insp, Tokens: []Token{{Secret: "", Scope: ScopeRead}}}); err == nil {
		t.Error("New accepted an empty secret")
	}
}
