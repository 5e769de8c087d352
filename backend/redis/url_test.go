package redis

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want urlSettings
		tls  bool
	}{
		{url: "redis://127.0.0.1:6379", want: urlSettings{client: clientConfig{addrs: []string{"127.0.0.1:6379"}}}},
		{url: "redis://localhost", want: urlSettings{client: clientConfig{addrs: []string{"localhost:6379"}}}},
		{url: "redis://", want: urlSettings{client: clientConfig{addrs: []string{"localhost:6379"}}}},
		{url: "redis://[::1]:7000/3", want: urlSettings{client: clientConfig{addrs: []string{"[::1]:7000"}, db: 3}}},
		{url: "redis://:pw@h:1/2?key_prefix=app1", want: urlSettings{client: clientConfig{addrs: []string{"h:1"}, password: "pw", db: 2}, keyPrefix: "app1"}},
		{url: "redis://user:pw@h/0?timeout=5s&pool_size=50", want: urlSettings{client: clientConfig{addrs: []string{"h:6379"}, username: "user", password: "pw"}, timeout: 5 * time.Second, poolSize: 50}},
		{url: "REDISS://h:6380?key_prefix=a.b:c-d_e", want: urlSettings{client: clientConfig{addrs: []string{"h:6380"}}, keyPrefix: "a.b:c-d_e"}, tls: true},
		{url: "redis://h1:7001?cluster=true&addr=h2:7002&addr=h3", want: urlSettings{client: clientConfig{addrs: []string{"h1:7001", "h2:7002", "h3:6379"}, cluster: true}}},
	} {
		got, err := parseURL(tc.url)
		if err != nil {
			t.Errorf("parseURL(%s): %v", tc.url, err)
			continue
		}
		if (got.client.tls != nil) != tc.tls {
			t.Errorf("parseURL(%s): TLS %v, want %t", tc.url, got.client.tls != nil, tc.tls)
		}
		got.client.tls = nil
		if !slices.Equal(got.client.addrs, tc.want.client.addrs) {
			t.Errorf("parseURL(%s): addrs %v, want %v", tc.url, got.client.addrs, tc.want.client.addrs)
		}
		g, w := got.client, tc.want.client
		if g.cluster != w.cluster || g.username != w.username || g.password != w.password || g.db != w.db || got.keyPrefix != tc.want.keyPrefix || got.timeout != tc.want.timeout || got.poolSize != tc.want.poolSize {
			t.Errorf("parseURL(%s) = %+v, want %+v", tc.url, got, tc.want)
		}
	}
}

// TestParseURLRefused: malformed URLs are invalid input saying what is
// wrong, never showing the password.
func TestParseURLRefused(t *testing.T) {
	for _, tc := range []struct {
		url, want string
	}{
		{"redis://:hunter22@h?bogus=1", "accepted: key_prefix, cluster, addr, timeout, pool_size"},
		{"redis://:hunter22@h/x", "database number"},
		{"redis://:hunter22@h:99999", "port"},
		{"redis://:hunter22@h?cluster=maybe", "true or false"},
		{"redis://:hunter22@h?addr=h2:1", "cluster=true"},
		{"redis://:hunter22@h/1?cluster=true", "only database 0"},
		{"redis://:hunter22@h?timeout=0s", "positive"},
		{"redis://:hunter22@h?pool_size=0", "from 1 to 10000"},
		{"redis://:hunter22@h?key_prefix=a{b}", "letters, digits"},
		{"redis://:hunter22@h?key_prefix=", "letters, digits"},
		{"http://:hunter22@h", "redis:// or rediss://"},
		{"redis://:hunter22/%zz@h", "does not parse"},
	} {
		_, err := parseURL(tc.url)
		if !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseURL(%s) = %v; want invalid input saying %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter22") {
			t.Errorf("parseURL(%s): error shows the password: %v", tc.url, err)
		}
	}
}

// TestRegisteredSchemes: redis: and rediss: open through backend.Open,
// and its errors are redacted too.
func TestRegisteredSchemes(t *testing.T) {
	for _, s := range []string{"redis", "rediss"} {
		if !slices.Contains(backend.Schemes(), s) {
			t.Fatalf("scheme %s not registered: %v", s, backend.Schemes())
		}
	}
	_, err := backend.Open(t.Context(), "redis://:hunter22@127.0.0.1:6379?nope=1")
	if !errors.Is(err, backend.ErrInvalidInput) || strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("backend.Open with a bad parameter: %v; want invalid input without the password", err)
	}
}
