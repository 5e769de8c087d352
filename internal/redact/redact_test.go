package redact

import (
	"fmt"
	"strings"
	"testing"
)

// TestMasker: key names and URL credentials are masked in JSON, maps and
// text; nothing else changes.
func TestMasker(t *testing.T) {
	s := Default
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
		if got := string(s.JSON([]byte(c.in))); got != c.want {
			t.Errorf("JSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	// Not JSON: returned untouched, no panic.
	for _, in := range []string{``, `{`, `{"password":`, `{"a":1}}`, `{"a":1} x`, "\xff", `[1,]`} {
		if got := string(s.JSON([]byte(in))); got != in {
			t.Errorf("JSON(%q) = %q, want it untouched", in, got)
		}
	}
	// Nested past the bound: not shown at all rather than unmasked.
	deep := strings.Repeat(`[`, maxMaskDepth+5) + `{"password":"x"}` + strings.Repeat(`]`, maxMaskDepth+5)
	if got := s.JSON([]byte(deep)); strings.Contains(string(got), `"x"`) {
		t.Errorf("a deeply nested password was shown: %.80s", got)
	}
	// Custom keys replace the defaults.
	custom := New([]string{"ssn"})
	if got := string(custom.JSON([]byte(`{"SSN":"1","password":"p"}`))); got != `{"SSN":"***","password":"p"}` {
		t.Errorf("custom keys: %s", got)
	}
	if m := s.Map(map[string]string{"Authorization": "Bearer x", "tenant": "t", "callback": "https://u:p@h/?token=t"}); m["Authorization"] != "***" || m["tenant"] != "t" || m["callback"] != "https://u:***@h/?token=***" {
		t.Errorf("metadata masked as %v", m)
	}
	// Free text: an error message quoting URLs.
	for in, want := range map[string]string{
		`dial postgres://app:s3cret@db:5432/app?sslmode=disable: refused`: `dial postgres://app:***@db:5432/app?sslmode=disable: refused`,
		`POST https://h.example/x?a=1&access_token=abc#f: 500`:            `POST https://h.example/x?a=1&access_token=***#f: 500`,
		`no URL here: a:b@c, ?token=x`:                                    `no URL here: a:b@c, ?token=x`,
		`redis://:pw@r:6379/0 and amqp://guest:guest@mq/`:                 `redis://:***@r:6379/0 and amqp://guest:***@mq/`,
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTextStopsAtQuoting: a masked query value ends where the URL does,
// at a character a URL cannot hold unencoded, so the quote or bracket
// around a URL in an error or in JSON text is kept.
func TestTextStopsAtQuoting(t *testing.T) {
	s := Default
	quoted := fmt.Sprintf("url %q: bad", "https://h/p?token=abc")
	for in, want := range map[string]string{
		quoted:                                  `url "https://h/p?token=***": bad`,
		`{"url":"https://h/p?token=abc","n":1}`: `{"url":"https://h/p?token=***","n":1}`,
		`{"url":"https://h/p?a=1&token=abc"}`:   `{"url":"https://h/p?a=1&token=***"}`,
		`"{\"u\":\"https://h/?token=abc\"}"`:    `"{\"u\":\"https://h/?token=***\"}"`,
		`see <https://h/?api_key=abc> or ` + "`https://h/?token=abc`": `see <https://h/?api_key=***> or ` + "`https://h/?token=***`",
		"https://h/?token=abc\tnext":                                  "https://h/?token=***\tnext",
		`{"next":"https://h/?a=1\u0026token=abc"}`:                    `{"next":"https://h/?a=1\u0026token=***"}`,
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestURLParam: a URL's credential parameters are the masked keys (by
// containment, as payload keys) and the short names matched whole; the
// short names do not mask the parameters they are part of.
func TestURLParam(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "sslpassword": true, "Password": true, "access_token": true, "api_key": true,
		"apikey": true, "key": true, "KEY": true, "pass": true, "pwd": true,
		"key_prefix": false, "passfile": false, "sslkey": false, "jobq_schema": false, "sslmode": false,
	} {
		if got := URLParam(name); got != want {
			t.Errorf("URLParam(%q) = %v, want %v", name, got, want)
		}
	}
	if got := Default.Text("dial redis://cache/0?key=k3y&key_prefix=p: refused"); got != "dial redis://cache/0?key="+Mask+"&key_prefix=p: refused" {
		t.Errorf("Text masked %q", got)
	}
}
