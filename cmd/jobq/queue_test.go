package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

func TestQueuePauseLimitList(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "enqueue", "t", "{}", "--queue", "mail"); r.err != nil {
		t.Fatal(r.err)
	}
	for _, args := range [][]string{
		{"queue", "pause", "mail", "idle"},
		{"queue", "limit", "mail", "--concurrency", "3", "--rate", "50/1s"},
		{"queue", "limit", "idle", "--rate", "10/m"},
		{"queue", "limit", "mail", "--concurrency", "0"}, // keeps the rate
	} {
		if r := run(t, append([]string{"--db", db}, args...)...); r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
	}
	b := openDB(t, db)
	got, err := b.(backend.QueueController).QueueSettingsList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.QueueSettings{
		{Queue: "idle", Paused: true, QueueLimits: backend.QueueLimits{Rate: 10, RatePeriod: time.Minute}},
		{Queue: "mail", Paused: true, QueueLimits: backend.QueueLimits{Rate: 50, RatePeriod: time.Second}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stored settings %+v, want %+v", got, want)
	}
	r := run(t, "--db", db, "queue", "list")
	if r.err != nil || !strings.Contains(r.out, "idle   0        0          0         0       yes     -            10/1m") ||
		!strings.Contains(r.out, "mail   1        0          0         0       yes     -            50/1s") {
		t.Fatalf("queue list: %v\n%s", r.err, r.out)
	}
	if r := run(t, "--db", db, "queue", "resume", "mail"); r.err != nil || r.out != "queue mail resumed\n" {
		t.Fatalf("resume: %q, %v", r.out, r.err)
	}
	if r := run(t, "--db", db, "queue", "limit", "mail", "--clear"); r.err != nil {
		t.Fatal(r.err)
	}
	r = run(t, "--db", db, "queue", "list", "--json")
	if r.err != nil || !strings.Contains(r.out, `"queue": "mail"`) || strings.Contains(r.out, `"rate": 50`) {
		t.Fatalf("queue list --json after resume and clear: %v\n%s", r.err, r.out)
	}
}

func TestQueueBadInput(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "pause"}, "needs at least one queue name"},
		{[]string{"queue", "pause", "bad q"}, "invalid queue"},
		{[]string{"queue", "limit", "q"}, "give --concurrency N, --rate N/PERIOD or --clear"},
		{[]string{"queue", "limit", "q", "--clear", "--rate", "5/s"}, "--clear removes both limits"},
		{[]string{"queue", "limit", "q", "--rate", "50"}, "no '/'"},
		{[]string{"queue", "limit", "q", "--rate", "50/1us"}, "PERIOD must be 1ms..24h"},
		{[]string{"queue", "limit", "q", "--rate", "x/1s"}, "N must be"},
		{[]string{"queue", "limit", "q", "--concurrency", "-1"}, "--concurrency -1"},
		{[]string{"queue", "bogus"}, "unknown command"},
	} {
		r := run(t, append([]string{"--db", db}, c.args...)...)
		if r.code() != exitUsage || r.err == nil || !strings.Contains(r.err.Error(), c.want) || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("%v: code %d, err %v; want exit 2 and one line with %q", c.args, r.code(), r.err, c.want)
		}
	}
	// A read-only command on a missing store creates nothing.
	missing := tempDB(t)
	if r := run(t, "--db", missing, "queue", "list"); r.code() != exitError || !strings.Contains(r.err.Error(), "jobq migrate") {
		t.Fatalf("queue list on a missing store: code %d, %v", r.code(), r.err)
	}
}
