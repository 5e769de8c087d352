package main

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres/pgtest"
)

// TestSchemaHint: the library's *backend.SchemaError says what the store
// holds; the command line adds, once and on one line, the command that
// fixes it: create for a store without a schema, upgrade for an older
// one, and for a newer one that this jobq is the thing to upgrade. The
// hint comes from the error's fields, not its text.
func TestSchemaHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	setVersion := func(t *testing.T, path, query string) {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(t.Context(), query); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		make    func(t *testing.T, db, path string)
		hint    string // the CLI's advice, as printed
		have    func(want int) int
		migrate bool // whether the hint names jobq migrate
	}{
		{"Missing", func(*testing.T, string, string) {}, "; create it with: jobq migrate --db ", func(int) int { return 0 }, true},
		{"Older", func(t *testing.T, db, path string) {
			if r := run(t, "--db", db, "migrate"); r.err != nil {
				t.Fatal(r.err)
			}
			setVersion(t, path, "DELETE FROM jobq_schema WHERE version = (SELECT max(version) FROM jobq_schema)")
		}, "; upgrade it with: jobq migrate --db ", func(want int) int { return want - 1 }, true},
		{"Newer", func(t *testing.T, db, path string) {
			if r := run(t, "--db", db, "migrate"); r.err != nil {
				t.Fatal(r.err)
			}
			setVersion(t, path, "INSERT INTO jobq_schema (version, applied_at) VALUES (999, 0)")
		}, "; this jobq is older than the store: upgrade jobq", func(int) int { return 999 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, c.name+".db")
			db := "sqlite:" + path
			c.make(t, db, path)
			r := run(t, "--db", db, "stats")
			var se *backend.SchemaError
			if r.code() != exitError || !errors.As(r.err, &se) {
				t.Fatalf("stats: exit %d, %v; want exit 1 and a *backend.SchemaError", r.code(), r.err)
			}
			if want := c.have(se.Want); se.Have != want {
				t.Errorf("SchemaError.Have = %d, want %d", se.Have, want)
			}
			msg, suffix := r.err.Error(), c.hint
			if c.migrate {
				suffix += db
			}
			if strings.Contains(msg, "\n") || strings.Count(msg, c.hint) != 1 || !strings.HasSuffix(msg, suffix) {
				t.Errorf("stats: %q; want one line ending in %q", msg, suffix)
			}
			if n := strings.Count(msg, "jobq migrate"); c.migrate && n != 1 || !c.migrate && n != 0 {
				t.Errorf("stats: %q names jobq migrate %d times", msg, n)
			}
		})
	}
}

// TestSchemaHintRedactsPostgres: a mistyped jobq_schema on a URL with a
// password gets the create hint naming the --db to paste, with the
// password shown as *** and nowhere in clear.
func TestSchemaHintRedactsPostgres(t *testing.T) {
	base := pgtest.URL(t)
	t.Parallel()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "secret-pw-48213"
	user := "postgres"
	if u.User != nil {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, secret) // the test server trusts local logins: never checked
	q := u.Query()
	q.Set("jobq_schema", pgtest.Schema(t, base)) // dropped at the end should it be created
	u.RawQuery = q.Encode()
	db := u.String()

	r := run(t, "--db", db, "stats")
	var se *backend.SchemaError
	if r.code() != exitError || !errors.As(r.err, &se) || se.Have != 0 {
		t.Fatalf("stats: exit %d, %v; want exit 1 and a *backend.SchemaError at version 0", r.code(), r.err)
	}
	msg := r.err.Error()
	want := "; create it with: jobq migrate --db " + shellQuote(backend.RedactURL(db))
	if strings.Contains(msg, secret) || strings.Contains(msg, "\n") || !strings.HasSuffix(msg, want) || !strings.Contains(want, "***") {
		t.Errorf("stats: %q; want one line ending in %q, without the password", msg, want)
	}
	if strings.Contains(r.out+r.errOut, secret) {
		t.Errorf("stats printed the password: %q %q", r.out, r.errOut)
	}
}
