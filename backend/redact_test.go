package backend

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:jobq.db": "sqlite:jobq.db",
		"memory:":        "memory:",
		"postgres://app@db:5432/app?jobq_schema=x":                 "postgres://app@db:5432/app?jobq_schema=x",
		"postgres://app:s3cret@db:5432/app":                        "postgres://app:***@db:5432/app",
		"postgres://app@db/app?sslpassword=k3y&sslmode=require":    "postgres://app@db/app?sslmode=require&sslpassword=***",
		"redis://:hunter2@cache:6379/0?key_prefix=a":               "redis://:***@cache:6379/0?key_prefix=a",
		"postgres://app:pa ss%zz@db/app":                           "postgres://app:***@db/app",
		"postgres://app:p/a?s#s@db/app":                            "postgres://app:***@db/app",
		"postgres://db:5432/app?Password=abc&application_name=web": "postgres://db:5432/app?Password=***&application_name=web",
		// One list: a name holding a masked key ("access_token") and the
		// short names matched whole ("key"), not key_prefix.
		"redis://cache:6379/0?key_prefix=jobq&access_token=t0k&key=k3y": "redis://cache:6379/0?access_token=***&key=***&key_prefix=jobq",
	} {
		got := RedactURL(in)
		if got != want && !(strings.Contains(want, "***") && !leaks(got, in)) {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// leaks reports whether out still holds a secret of the URL in.
func leaks(out, in string) bool {
	for _, s := range Secrets(in) {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

func TestRedactScrubsEveryForm(t *testing.T) {
	t.Parallel()
	url := "postgres://app:p%40ss:w0rd@db:5432/app?sslpassword=t0ken"
	text := fmt.Sprintf("open %s: connect (user=app password=p@ss:w0rd) token t0ken; also p%%40ss:w0rd", url)
	out := Redact(text, url)
	for _, s := range []string{"p@ss:w0rd", "p%40ss:w0rd", "t0ken"} {
		if strings.Contains(out, s) {
			t.Fatalf("Redact left %q in %q", s, out)
		}
	}
	if !strings.Contains(out, "postgres://app:***@db:5432/app") {
		t.Fatalf("Redact(%q) = %q; want the URL shown redacted", text, out)
	}
}

func TestRedactError(t *testing.T) {
	t.Parallel()
	url := "postgres://app:s3cret@db/app"
	err := RedactError(fmt.Errorf("open %s: %w", url, ErrUnavailable), url)
	if strings.Contains(err.Error(), "s3cret") || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("RedactError = %q (Is unavailable %v); want the secret gone and the sentinel kept", err, errors.Is(err, ErrUnavailable))
	}
	plain := errors.New("no secret here")
	if RedactError(plain, url) != plain || RedactError(nil, url) != nil {
		t.Fatal("RedactError changed an error without secrets, or a nil one")
	}
}
