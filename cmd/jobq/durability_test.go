package main

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/backend/redis/redistest"
)

// TestDurabilityWarningOnce: a Redis without persistence is worth one
// warning from each worker or server, in its own log, and none from the
// short commands an operator runs many times (enqueue, stats, failed).
func TestDurabilityWarningOnce(t *testing.T) {
	srv := redistest.StartServer(t) // keeps nothing on disk
	db := srv.URL + "?key_prefix=durability"
	for _, args := range [][]string{
		{"enqueue", "http", `{"url":"https://example.com/"}`},
		{"stats"},
		{"failed", "list"},
	} {
		r := run(t, append([]string{"--db", db}, args...)...)
		if r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
		if strings.Contains(r.out+r.errOut, "persist") {
			t.Errorf("%v warns about persistence:\n%s%s", args, r.out, r.errOut)
		}
	}
	s := startServe(t, "--db", db, "serve", "--worker")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(s.errOut.String(), "persistence is off"); n != 1 {
		t.Fatalf("serve --worker warned %d times about persistence, want once in its log:\n%s", n, s.errOut.String())
	}
	if !strings.Contains(s.errOut.String(), `level=WARN msg="jobq redis: persistence is off`) {
		t.Errorf("the warning is not in the command's own log:\n%s", s.errOut.String())
	}
}

// TestRootHelpNamesEveryBackend: the root help and the --db flag name
// every URL form a user can pass.
func TestRootHelpNamesEveryBackend(t *testing.T) {
	r := run(t, "--help")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, form := range []string{"sqlite:", "postgres://", "redis://", "rediss://", "memory:", "sync:"} {
		if !strings.Contains(r.out, form) {
			t.Errorf("jobq --help does not name %s:\n%s", form, r.out)
		}
	}
	if flag := r.out[strings.Index(r.out, "--db string"):]; !strings.Contains(flag, "redis://") {
		t.Errorf("the --db flag's help does not name redis://: %s", flag)
	}
}
