// Package storetest names a fresh store of each durable backend, for the
// tests that run against all of them (the worker-process tests, the admin
// API and dashboard): a temporary SQLite file, a Postgres schema, a Redis
// key prefix, each removed when the test ends.
package storetest

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backend/postgres/pgtest"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// Store is one backend: URL makes a fresh store of it for tb and returns
// its URL. A server backend whose server is unreachable skips tb (fails it
// under CI=true).
type Store struct {
	Name string
	URL  func(tb testing.TB) string
}

// Durable lists the durable backends.
var Durable = []Store{
	{"sqlite", func(tb testing.TB) string { return "sqlite:" + filepath.Join(tb.TempDir(), "jobq.db") }},
	{"postgres", func(tb testing.TB) string {
		u := pgtest.URL(tb)
		return withParam(tb, u, "jobq_schema", pgtest.Schema(tb, u))
	}},
	{"redis", func(tb testing.TB) string {
		u := redistest.URL(tb)
		return withParam(tb, u, "key_prefix", redistest.Prefix(tb, u))
	}},
}

// withParam returns the URL u with the query parameter k set to v.
func withParam(tb testing.TB, u, k, v string) string {
	tb.Helper()
	p, err := url.Parse(u)
	if err != nil {
		tb.Fatalf("test server URL: %v", err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}
