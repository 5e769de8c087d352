package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// countTest runs a count query on the test server outside any backend.
func countTest(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// withSchemaParam adds jobq_schema=schema to a URL.
func withSchemaParam(url, schema string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + SchemaParam + "=" + schema
}

// TestOpenExisting: Options.Existing (and backend.OpenWith with
// OpenOptions.Existing, which the registered opener passes on) opens only a
// schema at this build's version. A missing schema, an empty one or an
// older one fails with a *backend.SchemaError (ErrNoSchema) naming the
// schema and the versions but no command, and is left exactly as it was:
// a missing schema is not created, an empty one gets no table, an older
// one is not migrated. A newer one fails with one wrapping
// ErrSchemaTooNew.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	// openExisting opens schema with Existing both ways and checks the
	// error found, as a *backend.SchemaError at version have.
	openExisting := func(t *testing.T, schema string, have int) error {
		t.Helper()
		for _, open := range []func() (backend.Backend, error){
			func() (backend.Backend, error) {
				return Open(t.Context(), url, Options{Schema: schema, Existing: true})
			},
			func() (backend.Backend, error) {
				return backend.OpenWith(t.Context(), withSchemaParam(url, schema), backend.OpenOptions{Existing: true})
			},
		} {
			b, err := open()
			if err == nil {
				_ = b.Close()
				return nil
			}
			sentinel := backend.ErrNoSchema
			if have > LatestVersion() {
				sentinel = backend.ErrSchemaTooNew
			}
			var se *backend.SchemaError
			if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), fmt.Sprintf("%q", schema)) || !errors.As(err, &se) {
				t.Fatalf("Open with Existing: %v; want a *backend.SchemaError wrapping %v naming schema %q", err, sentinel, schema)
			}
			if se.Have != have || se.Want != LatestVersion() {
				t.Fatalf("SchemaError = %+v; want Have %d, Want %d", *se, have, LatestVersion())
			}
			if strings.Contains(err.Error(), "jobq migrate") {
				t.Fatalf("Open with Existing: %v; the library gives command-line advice", err)
			}
		}
		_, err := Open(t.Context(), url, Options{Schema: schema, Existing: true})
		return err
	}

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		schema := testSchema(t) // a name only: nothing creates it
		err := openExisting(t, schema, 0)
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("err = %v, want one saying the schema does not exist", err)
		}
		if countTest(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) != 0 {
			t.Fatalf("schema %s exists after a failed Existing open", schema)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		schema := testSchema(t)
		execTest(t, "CREATE SCHEMA "+quoteIdent(schema))
		err := openExisting(t, schema, 0)
		if err == nil || !strings.Contains(err.Error(), "holds no jobq tables") {
			t.Fatalf("err = %v, want one saying the schema holds no jobq tables", err)
		}
		if n := countTest(t, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1`, schema); n != 0 {
			t.Fatalf("schema %s holds %d relations after a failed Existing open, want none", schema, n)
		}
	})

	t.Run("Older", func(t *testing.T) {
		t.Parallel()
		b := openTest(t, Options{NoVacuum: true})
		versions := quoteIdent(b.Schema()) + ".jobq_schema_version"
		execTest(t, fmt.Sprintf("DELETE FROM %s WHERE version = %d", versions, LatestVersion()))
		err := openExisting(t, b.Schema(), LatestVersion()-1)
		if want := fmt.Sprintf("version %d, this jobq needs %d", LatestVersion()-1, LatestVersion()); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want one saying %q", err, want)
		}
		if v := mustInt(t, b, "SELECT max(version) FROM "+versions); v != int64(LatestVersion()-1) {
			t.Fatalf("schema at version %d after a failed Existing open, want still %d", v, LatestVersion()-1)
		}
	})

	t.Run("Newer", func(t *testing.T) {
		t.Parallel()
		b := openTest(t, Options{NoVacuum: true})
		execTest(t, fmt.Sprintf("INSERT INTO %s.jobq_schema_version (version) VALUES (%d)", quoteIdent(b.Schema()), LatestVersion()+1))
		if err := openExisting(t, b.Schema(), LatestVersion()+1); err == nil {
			t.Fatal("Existing open of a newer schema succeeded")
		}
	})

	// A backend opened without migrating finds the tables missing only
	// when a call needs them: that too is a schema the caller can fix, so
	// it gets the same typed error rather than the driver's.
	t.Run("CallWithoutTables", func(t *testing.T) {
		t.Parallel()
		b := openTest(t, Options{NoVacuum: true, NoMigrate: true})
		_, err := b.JobGet(t.Context(), 1)
		var se *backend.SchemaError
		if !errors.Is(err, backend.ErrNoSchema) || !errors.As(err, &se) || se.Have != 0 || se.Want != LatestVersion() ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", b.Schema())) || strings.Contains(err.Error(), "jobq migrate") {
			t.Fatalf("JobGet on a schema without tables: %v; want a *backend.SchemaError at version 0 naming the schema and no command", err)
		}
	})

	t.Run("Current", func(t *testing.T) {
		t.Parallel()
		b := openTest(t, Options{NoVacuum: true})
		if err := openExisting(t, b.Schema(), LatestVersion()); err != nil {
			t.Fatalf("Existing open of an up-to-date schema: %v", err)
		}
	})
}

// TestOpenRedactsSecrets: no error of Open, through postgres.Open or
// backend.Open, shows the URL's password or a password-like query
// parameter, whether the URL does not parse, nothing listens at its port
// or the server refuses the login.
func TestOpenRedactsSecrets(t *testing.T) {
	t.Parallel()
	const password, token = "s3cret-pw-7731", "tok-99812-x"
	server, err := neturl.Parse(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	server.User = neturl.UserPassword("jobq_no_such_role", password)
	cases := []struct {
		name, url string
		want      error
	}{
		{"Unreachable", "postgres://postgres:" + password + "@127.0.0.1:1/test?connect_timeout=2&sslpassword=" + token, backend.ErrUnavailable},
		{"PasswordDoesNotParse", "postgres://postgres:" + password + "%zz@127.0.0.1:1/test", backend.ErrInvalidInput},
		{"QueryDoesNotParse", "postgres://postgres:" + password + "@127.0.0.1:1/test?password=" + token + "&x=%zz", backend.ErrInvalidInput},
		{"UnknownRole", server.String(), backend.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Open(t.Context(), c.url, Options{})
			_, viaBackend := backend.Open(t.Context(), c.url)
			for _, err := range []error{err, viaBackend} {
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if msg := err.Error(); strings.Contains(msg, password) || strings.Contains(msg, token) {
					t.Fatalf("error shows a secret: %s", msg)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || strings.Count(msg, "open") > 1 {
					t.Fatalf("error is not one line saying each thing once: %q", msg)
				}
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestListenerLogRedactsSecrets: when the server refuses the listener's
// reconnection (its role may no longer log in), the warnings it logs name
// the failure but not the URL's password nor its password-like
// parameters.
func TestListenerLogRedactsSecrets(t *testing.T) {
	t.Parallel()
	owner := openTest(t, Options{NoVacuum: true})
	role, roleURL := testRole(t, owner.Schema())
	u, err := neturl.Parse(roleURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	const token = "tok-55123-y"
	q := u.Query()
	q.Set("sslpassword", token) // unused without sslkey; here to be scrubbed
	u.RawQuery = q.Encode()
	logs, logger := newLogRecords()
	b := openSchema(t, u.String(), Options{Schema: owner.Schema(), NoVacuum: true, Logger: logger})
	_, cancel := b.Subscribe([]string{"q"})
	defer cancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return b.listener.pid.Load() != 0 })

	execTest(t, "ALTER ROLE "+role+" NOLOGIN")
	execTest(t, "SELECT pg_terminate_backend($1)", int32(b.listener.pid.Load()))
	waitFor(t, time.Minute, "the listener to log a refused reconnection", func() bool {
		for _, l := range logs.at(slog.LevelWarn) {
			if strings.Contains(l.Text, "not permitted to log in") {
				return true
			}
		}
		return false
	})
	for _, l := range logs.all() {
		if strings.Contains(l.Text, password) || strings.Contains(l.Text, token) {
			t.Fatalf("log line shows a secret: %s", l.Text)
		}
	}
}
