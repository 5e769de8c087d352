package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/postgres/pgtest"
)

// TestConformanceThroughPgBouncer runs the conformance suite through a
// PgBouncer in transaction pooling mode (PgBouncer 1.18 carries no named
// prepared statement from one transaction to the next, and hands each
// transaction whichever server connection is free): every behaviour holds
// with no session state, and the listener LISTENs on the server itself
// (jobq_listen).
func TestConformanceThroughPgBouncer(t *testing.T) {
	p := pgtest.StartPooled(t)
	url := p.URL + "&" + ListenParam + "=" + p.Direct
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			b := openSchema(t, url, Options{Schema: testSchema(t)})
			if b.pool.Config().ConnConfig.DefaultQueryExecMode.String() != "exec" {
				t.Fatalf("query exec mode behind a pooler: %s, want exec", b.pool.Config().ConnConfig.DefaultQueryExecMode)
			}
			return b
		},
		BeginTx: beginTx,
	})
}

// TestPooledWakeUps: behind a transaction pooler, a Backend without
// jobq_listen never LISTENs (through the pooler its hints would reach
// other clients), yet wakes its own subscribers at once; with jobq_listen
// its listener, on the server itself, hears other processes' inserts.
func TestPooledWakeUps(t *testing.T) {
	p := pgtest.StartPooled(t)
	schema := testSchema(t)
	quiet := openSchema(t, p.URL, Options{Schema: schema})
	listening := openSchema(t, p.URL+"&"+ListenParam+"="+p.Direct, Options{Schema: schema})
	other := openSchema(t, p.URL, Options{Schema: schema})

	ch, cancel := quiet.Subscribe([]string{"n"})
	defer cancel()
	insertN(t, quiet, "n", 1)
	wantWake(t, ch, "an insert by the subscriber's own Backend")
	lch, lcancel := listening.Subscribe([]string{"n"})
	defer lcancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return listening.listener.pid.Load() != 0 })
	drain(ch)
	drain(lch)
	insertN(t, other, "n", 1)
	wantWake(t, lch, "an insert by another Backend, heard on the server itself")
	select {
	case <-ch:
		t.Fatal("a Backend behind the pooler without jobq_listen was woken by another Backend's insert: it listens")
	case <-time.After(300 * time.Millisecond):
	}
	if pid := quiet.listener.pid.Load(); pid != 0 {
		t.Fatalf("a Backend behind the pooler without jobq_listen has a LISTEN connection (pid %d)", pid)
	}
}

// TestPoolerOptions: the pooler's parameters are checked before anything
// connects, each mistake named.
func TestPoolerOptions(t *testing.T) {
	const base = "postgres://u@127.0.0.1:1/db"
	for _, c := range []struct {
		url  string
		opts Options
		want string
	}{
		{base + "?jobq_pooler=session", Options{}, `"session": use "transaction"`},
		{base + "?jobq_listen=db:5432", Options{}, "set the pooler too"},
		{base + "?jobq_pooler=transaction&jobq_listen=db", Options{}, `"db": want host:port`},
		{base + "?jobq_pooler=transaction&jobq_listen=db:x", Options{}, `"db:x": want host:port`},
		{base + "?jobq_pooler=transaction", Options{Pooler: "other"}, `URL names "transaction" but Options says "other"`},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := Open(ctx, c.url, c.opts)
		cancel()
		if !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s, %+v) = %v, want an input error saying %s", c.url, c.opts, err, c.want)
		}
	}
}
