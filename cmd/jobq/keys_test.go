package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestKeysCommands: a queue's key rules set from the command line are
// what the store holds; keyed jobs enqueued with --key are listed by key;
// a failed head holds its ordered key, which keys list and keys show say,
// and retrying by key runs it again first.
func TestKeysCommands(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := run(t, "--db", db, "queue", "keys", "charges", "--ordered"); r.err != nil || r.out != "queue charges: keys ordered, on failure hold\n" {
		t.Fatalf("queue keys: %q, %v", r.out, r.err)
	}
	var ids []string
	for _, key := range []string{"acct-1", "acct-1", "acct-2", "acct-1"} {
		r := run(t, "--db", db, "enqueue", "charge", "{}", "--queue", "charges", "--key", key)
		if r.err != nil {
			t.Fatal(r.err)
		}
		ids = append(ids, strings.TrimSpace(r.out))
	}
	b := openDB(t, db)
	settings, err := b.(backend.QueueController).QueueSettingsList(t.Context())
	if want := []backend.QueueSettings{{Queue: "charges", Keys: backend.KeyRules{Ordered: true}}}; err != nil || !slices.Equal(settings, want) {
		t.Fatalf("stored settings %+v, %v; want %+v", settings, err, want)
	}
	// Fail acct-1's head, as a worker would on its last attempt.
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"charges"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim = %d jobs, %v; want the two heads", len(rows), err)
	}
	var outs []backend.Outcome
	for _, r := range rows {
		kind := backend.OutcomeDone
		if r.Key == "acct-1" {
			kind = backend.OutcomeFail
		}
		outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: kind, Error: "card declined"})
	}
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--db", db, "keys", "list", "--json")
	var keys []keyJSON
	if r.err != nil || json.Unmarshal([]byte(r.out), &keys) != nil {
		t.Fatalf("keys list --json: %v\n%s", r.err, r.out)
	}
	head := fmt.Sprint(keys[0].HeadID)
	if want := []keyJSON{{Queue: "charges", Key: "acct-1", Pending: 2, Failed: 1, Held: true, HeadID: keys[0].HeadID, HeldSince: keys[0].HeldSince}}; !slices.Equal(keys, want) || head != ids[0] || keys[0].HeldSince == "" {
		t.Fatalf("keys list = %+v, want %+v held by job %s", keys, want, ids[0])
	}
	r = run(t, "--db", db, "keys", "list", "--held")
	if r.err != nil || !strings.Contains(r.out, "charges  acct-1  2        0        1       since ") || !strings.HasSuffix(r.out, "  "+head+"\n") {
		t.Fatalf("keys list --held: %v\n%s", r.err, r.out)
	}
	r = run(t, "--db", db, "keys", "show", "acct-1", "--queue", "charges")
	var shown []string
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n")[2:] {
		shown = append(shown, strings.Join(strings.Fields(line), " "))
	}
	want := []string{head + " failed charge 1 card declined", ids[1] + " pending charge 0 -", ids[3] + " pending charge 0 -"}
	if r.err != nil || !strings.Contains(r.out, "held by failed job "+head) || !slices.Equal(shown, want) {
		t.Fatalf("keys show: %v\n%s\nwant rows %q", r.err, r.out, want)
	}
	if r := run(t, "--db", db, "failed", "retry", "--all", "--key", "acct-1"); r.err != nil || r.out != "replayed 1, skipped 0\n" {
		t.Fatalf("failed retry --key: %q, %v", r.out, r.err)
	}
	rows, err = b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"charges"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 1 || fmt.Sprint(rows[0].ID) != ids[0] {
		t.Fatalf("after the retry claimed %d jobs, %v; want only the replayed head %s", len(rows), err, ids[0])
	}
	if r := run(t, "--db", db, "queue", "keys", "charges", "--clear"); r.err != nil || r.out != "queue charges: keys -\n" {
		t.Fatalf("queue keys --clear: %q, %v", r.out, r.err)
	}
}

func TestKeysBadInput(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "keys", "q"}, "give --limit N, --ordered or --clear"},
		{[]string{"queue", "keys", "q", "--ordered", "--limit", "2"}, "an ordered key runs one job at a time"},
		{[]string{"queue", "keys", "q", "--on-failure", "halt"}, "without ordered keys"},
		{[]string{"queue", "keys", "q", "--ordered", "--on-failure", "skip"}, "use hold, continue or halt"},
		{[]string{"queue", "keys", "q", "--clear", "--limit", "1"}, "give it alone"},
		{[]string{"keys", "show", "k"}, "--queue"},
		{[]string{"enqueue", "t", "{}", "--key", "a\tb"}, "key"},
		{[]string{"keys", "list", "--limit", "0"}, "--limit 0"},
	} {
		r := run(t, append([]string{"--db", db}, c.args...)...)
		if r.code() != exitUsage || r.err == nil || !strings.Contains(r.err.Error(), c.want) || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("%v: code %d, err %v; want exit 2 and one line with %q", c.args, r.code(), r.err, c.want)
		}
	}
	b := openDB(t, db)
	if s, err := b.(backend.QueueController).QueueSettingsList(t.Context()); err != nil || len(s) != 0 {
		t.Fatalf("refused commands stored settings %+v, %v", s, err)
	}
	if st, err := b.QueueStats(t.Context()); err != nil || len(st) != 0 {
		t.Fatalf("refused commands stored jobs %+v, %v", st, err)
	}
}

// TestJobsShowKey: 'jobq jobs show' and 'jobq failed show' say a job's
// key, in text and --json, and say nothing of a key for a job without.
func TestJobsShowKey(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	enqueue := func(args ...string) string {
		t.Helper()
		r := run(t, append([]string{"--db", db, "enqueue", "charge", "{}"}, args...)...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		return strings.TrimSpace(r.out)
	}
	keyed, plain := enqueue("--queue", "charges", "--key", "account:42"), enqueue("--queue", "other")
	keyLine := regexp.MustCompile(`(?m)^Key:\s+account:42$`)
	show := func(args ...string) (string, map[string]any) {
		t.Helper()
		r := run(t, append([]string{"--db", db}, args...)...)
		j := run(t, append([]string{"--db", db}, append(args, "--json")...)...)
		var obj map[string]any
		if r.err != nil || j.err != nil || json.Unmarshal([]byte(j.out), &obj) != nil {
			t.Fatalf("%v: %v, %v\n%s\n%s", args, r.err, j.err, r.out, j.out)
		}
		return r.out, obj
	}
	if out, obj := show("jobs", "show", keyed); !keyLine.MatchString(out) || obj["key"] != "account:42" {
		t.Errorf("jobs show of a keyed job: key %v in JSON, text:\n%s", obj["key"], out)
	}
	if out, obj := show("jobs", "show", plain); strings.Contains(out, "Key:") || obj["key"] != nil {
		t.Errorf("jobs show of a job without a key: key %v in JSON, text:\n%s", obj["key"], out)
	}
	// The job fails for good: the failed views say its key too.
	b := openDB(t, db)
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"charges"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 || fmt.Sprint(rows[0].ID) != keyed {
		t.Fatalf("claim = %d jobs, %v; want job %s", len(rows), err, keyed)
	}
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "card declined"}}}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"jobs", "show", keyed}, {"failed", "show", keyed}} {
		if out, obj := show(cmd...); !keyLine.MatchString(out) || obj["key"] != "account:42" {
			t.Errorf("%v of a failed keyed job: key %v in JSON, text:\n%s", cmd, obj["key"], out)
		}
	}
}
