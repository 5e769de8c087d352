package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

func TestMasked(t *testing.T) {
	s := &server{opts: Options{MaskKeys: DefaultMaskKeys}}
	for _, c := range []struct{ in, want string }{
		{`{"password":"x","user":"u"}`, `{"password":"***","user":"u"}`},
		{`{"a":{"b":[{"Token":{"deep":1}},{"PASSWORD":null}]}}`, `{"a":{"b":[{"Token":"***"},{"PASSWORD":"***"}]}}`},
		{`{"API-Key":"k","api_key":"k","apikey":"k"}`, `{"API-Key":"***","api_key":"***","apikey":"***"}`},
		{`[{"secret":"s"},1,"password",true,null]`, `[{"secret":"***"},1,"password",true,null]`},
		{`{"z":1,"a":2}`, `{"z":1,"a":2}`},                                                                  // key order kept
		{`{"n":12345678901234567890}`, `{"n":12345678901234567890}`},                                        // numbers kept as written
		{`{"s":"<script>", "t": "\u0060"}`, `{"s":"<script>", "t": "\u0060"}`},                              // nothing masked: as written
		{`{"s":"<script>", "t": "\u0060", "token": 1}`, `{"s":"<script>","t":"` + "`" + `","token":"***"}`}, // re-encoded
		{`"password"`, `"password"`},
		{`{"headers":{"Authorization":"Bearer abc","Cookie":"c"}}`, `{"headers":{"Authorization":"***","Cookie":"***"}}`},
		// Names that contain a masked key, however they are spelt.
		{`{"access_token":"a","X-Api-Key":"b","clientSecret":"c","db.password":"d","refresh-token":"e","name":"n"}`,
			`{"access_token":"***","X-Api-Key":"***","clientSecret":"***","db.password":"***","refresh-token":"***","name":"n"}`},
		// URL credentials in any string value: the user info's password and
		// query parameters named like masked keys.
		{`{"hook":"https://bot:pw1@hooks.example.com/x?page=2&Api-Key=k1","dsn":["postgres://app:s3cret@db:5432/app"]}`,
			`{"hook":"https://bot:***@hooks.example.com/x?page=2&Api-Key=***","dsn":["postgres://app:***@db:5432/app"]}`},
		{`{"u":"https://example.com/a?b=c","v":"mailto:x@y","w":"user@host"}`, `{"u":"https://example.com/a?b=c","v":"mailto:x@y","w":"user@host"}`},
	} {
		if got := string(s.masked([]byte(c.in))); got != c.want {
			t.Errorf("masked(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	// Not JSON: returned untouched, no panic.
	for _, in := range []string{``, `{`, `{"password":`, `{"a":1}}`, `{"a":1} x`, "\xff", `[1,]`} {
		if got := string(s.masked([]byte(in))); got != in {
			t.Errorf("masked(%q) = %q, want it untouched", in, got)
		}
	}
	// Nested past the bound: not shown at all rather than unmasked.
	deep := strings.Repeat(`[`, maxMaskDepth+5) + `{"password":"x"}` + strings.Repeat(`]`, maxMaskDepth+5)
	if got := s.masked([]byte(deep)); strings.Contains(string(got), `"x"`) {
		t.Errorf("a deeply nested password was shown: %.80s", got)
	}
	// Custom keys replace the defaults.
	custom := &server{opts: Options{MaskKeys: []string{"ssn"}}}
	if got := string(custom.masked([]byte(`{"SSN":"1","password":"p"}`))); got != `{"SSN":"***","password":"p"}` {
		t.Errorf("custom keys: %s", got)
	}
	if m := s.maskedMeta(map[string]string{"Authorization": "Bearer x", "tenant": "t", "callback": "https://u:p@h/?token=t"}); m["Authorization"] != "***" || m["tenant"] != "t" || m["callback"] != "https://u:***@h/?token=***" {
		t.Errorf("metadata masked as %v", m)
	}
	// Free text: an error message quoting URLs.
	for in, want := range map[string]string{
		`dial postgres://app:s3cret@db:5432/app?sslmode=disable: refused`: `dial postgres://app:***@db:5432/app?sslmode=disable: refused`,
		`POST https://h.example/x?a=1&access_token=abc#f: 500`:            `POST https://h.example/x?a=1&access_token=***#f: 500`,
		`no URL here: a:b@c, ?token=x`:                                    `no URL here: a:b@c, ?token=x`,
		`redis://:pw@r:6379/0 and amqp://guest:guest@mq/`:                 `redis://:***@r:6379/0 and amqp://guest:***@mq/`,
	} {
		if got := s.maskedText(in); got != want {
			t.Errorf("maskedText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMaskedErrors: a URL's password in a job's error is masked in the
// API's and the dashboard's answers, and stored as it was.
func TestMaskedErrors(t *testing.T) {
	const errText = "POST https://bot:hunter2@hooks.example.com/x?token=tok9: 503"
	b := openSQLite(t)
	failJobs(t, b, "q", 1, `{}`, errText)
	e := newEnvOn(t, b, Options{})
	srv, insp := dashServer(t, b)
	fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{}, 1, 0)
	if err != nil || len(fj) != 1 || fj[0].Error != errText {
		t.Fatalf("stored failed job %+v, %v; want its error as written", fj, err)
	}
	id := fj[0].ID
	pages := map[string]string{
		"API list":           string(e.do(req{path: "/api/v1/failed"}).raw),
		"API detail":         string(e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", id)}).raw),
		"dashboard list":     func() string { _, body := get(t, srv, "/failed"); return body }(),
		"dashboard job page": func() string { _, body := get(t, srv, fmt.Sprintf("/failed/%d", id)); return body }(),
	}
	for name, body := range pages {
		if strings.Contains(body, "hunter2") || strings.Contains(body, "tok9") || !strings.Contains(body, "hooks.example.com") {
			t.Errorf("%s shows %.300s", name, body)
		}
	}
}

func FuzzMasked(f *testing.F) {
	for _, s := range []string{`{"password":"x"}`, `[{"a":{"token":[1,2]}}]`, `{`, `"x"`, `1e400`, "{\"\\ud800\":1}"} {
		f.Add([]byte(s))
	}
	s := &server{opts: Options{MaskKeys: DefaultMaskKeys}}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := s.masked(in)
		if json.Valid(in) && !json.Valid(out) && string(out) != string(tooDeep) {
			t.Fatalf("valid %q masked to invalid %q", in, out)
		}
	})
}

// TestMaskedInAPI: payload and metadata keys are masked in every answer
// that shows a job, and stored unmasked.
func TestMaskedInAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{MaskKeys: []string{"password", "authorization"}})
	payload := `{"user":"u","auth":{"Password":"hunter2"},"list":[{"password":"x"}]}`
	r := e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"login","payload":` + payload + `,"metadata":{"Authorization":"Bearer abc","trace":"t1"},"max_attempts":1}`})
	e.want(r, http.StatusCreated, "")
	id := r.num("id")
	row, err := e.b.JobGet(context.Background(), id)
	if err != nil || !strings.Contains(string(row.Payload), "hunter2") || row.Metadata["Authorization"] != "Bearer abc" {
		t.Fatalf("the stored job must keep its values: %+v %v", row, err)
	}
	for _, path := range []string{fmt.Sprintf("/api/v1/jobs/%d", id), "/api/v1/jobs"} {
		got := e.do(req{path: path})
		if strings.Contains(string(got.raw), "hunter2") || strings.Contains(string(got.raw), "Bearer abc") || !strings.Contains(string(got.raw), `"t1"`) {
			t.Errorf("GET %s shows %s", path, got.raw)
		}
	}
	e.failQueued("default", 1)
	fl := e.do(req{path: "/api/v1/failed"})
	if strings.Contains(string(fl.raw), "hunter2") || strings.Contains(string(fl.raw), "Bearer abc") || !strings.Contains(string(fl.raw), "login") {
		t.Errorf("failed list shows %s", fl.raw)
	}
	var list struct {
		Failed []struct {
			ID int64 `json:"id"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(fl.raw, &list); err != nil || len(list.Failed) != 1 {
		t.Fatalf("failed list %s: %v", fl.raw, err)
	}
	one := e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", list.Failed[0].ID)})
	if strings.Contains(string(one.raw), "hunter2") || !strings.Contains(string(one.raw), `"***"`) {
		t.Errorf("failed detail shows %s", one.raw)
	}
}
