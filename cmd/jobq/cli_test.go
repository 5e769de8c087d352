package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

func TestEnqueueThenStats(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	for _, args := range [][]string{
		{"enqueue", "http", `{"url":"http://example.com"}`},
		{"enqueue", "http", `{"url":"http://example.com"}`, "--queue", "mail", "--priority", "5"},
		{"enqueue", "http", `{"url":"http://example.com"}`, "--queue", "mail", "--delay", "1h"},
		{"enqueue", "http", `{"url":"http://example.com"}`, "--run-at", "2999-01-02T15:04:05Z"},
	} {
		r := run(t, append([]string{"--db", db}, args...)...)
		if r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(r.out), 10, 64); err != nil {
			t.Fatalf("%v printed %q, want a job id", args, r.out)
		}
	}

	r := run(t, "--db", db, "stats", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got statsJSON
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("stats --json printed %q: %v", r.out, err)
	}
	want := []queueJSON{
		{Queue: "default", Pending: 1, Scheduled: 1},
		{Queue: "mail", Pending: 1, Scheduled: 1},
	}
	if len(got.Queues) != 2 || got.Queues[0] != want[0] || got.Queues[1] != want[1] {
		t.Fatalf("queues = %+v, want %+v", got.Queues, want)
	}
	if got.Total != (queueJSON{Pending: 2, Scheduled: 2}) {
		t.Fatalf("total = %+v", got.Total)
	}

	r = run(t, "--db", db, "stats")
	for _, line := range []string{"default  1", "mail     1", "TOTAL    2"} {
		if !strings.Contains(r.out, line) {
			t.Errorf("stats table lacks %q:\n%s", line, r.out)
		}
	}
}

func TestEnqueuePayloadFromStdin(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	r := runCtx(t.Context(), `{"url":"http://example.com","body":{"n":1}}`, "--db", db, "enqueue", "http", "-")
	if r.err != nil {
		t.Fatal(r.err)
	}
	id, _ := strconv.ParseInt(strings.TrimSpace(r.out), 10, 64)
	job, err := openDB(t, db).JobGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(job.Payload) != `{"url":"http://example.com","body":{"n":1}}` || job.MaxAttempts != 3 {
		t.Fatalf("stored job = %+v", job)
	}
}

func TestEnqueueUniqueDuplicate(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	args := []string{"--db", db, "enqueue", "http", `{"url":"http://example.com"}`, "--unique", "order-7"}
	first := run(t, args...)
	second := run(t, args...)
	if first.err != nil || second.err != nil {
		t.Fatalf("errors: %v, %v", first.err, second.err)
	}
	if first.out != second.out {
		t.Fatalf("duplicate printed id %q, want the first job's %q", second.out, first.out)
	}
	id := strings.TrimSpace(first.out)
	if !strings.Contains(second.errOut, "duplicate of job "+id) {
		t.Fatalf("duplicate note missing: %q", second.errOut)
	}
	if s := run(t, "--db", db, "stats", "--json").out; !strings.Contains(s, `"total":{"pending":1,`) {
		t.Fatalf("stats after duplicate: %s", s)
	}
}

// TestEnqueueUniqueBy: --unique-by args makes the same payload in
// another key order a duplicate, and a --file line's "unique" does the
// same for its job; another payload is a new job.
func TestEnqueueUniqueBy(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	first := run(t, "--db", db, "enqueue", "mail", `{"to":"a@x","n":1}`, "--unique-by", "type,args")
	second := run(t, "--db", db, "enqueue", "mail", `{"n":1, "to":"a@x"}`, "--unique-by", "args")
	other := run(t, "--db", db, "enqueue", "mail", `{"n":2,"to":"a@x"}`, "--unique-by", "args")
	if first.err != nil || second.err != nil || other.err != nil {
		t.Fatalf("errors: %v, %v, %v", first.err, second.err, other.err)
	}
	if first.out != second.out || !strings.Contains(second.errOut, "duplicate of job "+strings.TrimSpace(first.out)) {
		t.Fatalf("same args reordered printed %q (%q), want the first job's %q and a duplicate note", second.out, second.errOut, first.out)
	}
	if other.out == first.out {
		t.Fatalf("other args printed the first job's id %q", other.out)
	}
	lines := `{"type":"mail","payload":{"to":"a@x","n":1},"unique":{"args":true}}` + "\n" +
		`{"type":"mail","payload":{"to":"b@x"},"unique":{"args":true,"period":"1h"}}` + "\n"
	file := runCtx(t.Context(), lines, "--db", db, "enqueue", "--file", "-")
	if file.err != nil {
		t.Fatal(file.err)
	}
	if want := strings.TrimSpace(first.out) + "\tduplicate\n"; !strings.HasPrefix(file.out, want) {
		t.Fatalf("--file printed %q, want it to start with %q", file.out, want)
	}
	if s := run(t, "--db", db, "stats", "--json").out; !strings.Contains(s, `"total":{"pending":3,`) {
		t.Fatalf("stats after the duplicates: %s", s)
	}
	// --on-conflict replace gives the waiting job the new payload.
	rep := run(t, "--db", db, "enqueue", "mail", `{"to":"a@x","n":1}`, "--unique", "m-1", "--on-conflict", "replace")
	rep2 := run(t, "--db", db, "enqueue", "mail", `{"to":"a@x","n":9}`, "--unique", "m-1", "--on-conflict", "replace")
	if rep.err != nil || rep2.err != nil || rep.out != rep2.out {
		t.Fatalf("replace: %q %v, %q %v; want one job", rep.out, rep.err, rep2.out, rep2.err)
	}
	if show := run(t, "--db", db, "jobs", "show", strings.TrimSpace(rep.out)).out; !strings.Contains(show, `"n": 9`) || !strings.Contains(rep2.errOut, "took this payload") {
		t.Fatalf("the replaced job shows %s (note %q), want the second payload", show, rep2.errOut)
	}
}

// TestEnqueueDeadline: --deadline takes a time or a duration from now,
// and jobs show gives the live job's deadline; a passed one is refused.
func TestEnqueueDeadline(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	byTime := run(t, "--db", db, "enqueue", "quote", `{}`, "--deadline", at.Format(time.RFC3339))
	byDur := run(t, "--db", db, "enqueue", "quote", `{}`, "--deadline", "10m")
	if byTime.err != nil || byDur.err != nil {
		t.Fatalf("enqueue --deadline: %v, %v", byTime.err, byDur.err)
	}
	show := run(t, "--db", db, "jobs", "show", strings.TrimSpace(byTime.out), "--json")
	if !strings.Contains(show.out, `"deadline":"`+at.Format(time.RFC3339)) && !strings.Contains(show.out, `"deadline": "`+at.Format(time.RFC3339)) {
		t.Fatalf("jobs show: %s %v, want deadline %s", show.out, show.err, at.Format(time.RFC3339))
	}
	if r := run(t, "--db", db, "enqueue", "quote", `{}`, "--deadline", "2020-01-01T00:00:00Z"); r.err == nil || !strings.Contains(r.errOut+r.err.Error(), "deadline") {
		t.Fatalf("a passed deadline: %q %v, want it refused", r.errOut, r.err)
	}
}

// TestBadInput checks that each usage mistake is one line, exits 2 and
// writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	big := `{"s":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not json", []string{"enqueue", "http", "{url:"}, "not valid JSON"},
		{"too big", []string{"enqueue", "http", big}, "1 MiB"},
		{"bad queue", []string{"enqueue", "http", "{}", "--queue", "no spaces"}, "invalid queue"},
		{"empty type", []string{"enqueue", "", "{}"}, "invalid type"},
		{"priority", []string{"enqueue", "x", "{}", "--priority", "5000"}, "priority"},
		{"max attempts", []string{"enqueue", "x", "{}", "--max-attempts", "0"}, "max attempts"},
		{"negative delay", []string{"enqueue", "x", "{}", "--delay", "-1s"}, "--delay"},
		{"delay and run-at", []string{"enqueue", "x", "{}", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, "not both"},
		{"bad run-at", []string{"enqueue", "x", "{}", "--run-at", "tomorrow"}, "RFC 3339"},
		{"bad duration", []string{"enqueue", "x", "{}", "--delay", "5"}, "--delay"},
		{"http payload", []string{"enqueue", "http", `{"url":"ftp://x"}`}, "scheme must be http or https"},
		{"http method typo", []string{"enqueue", "http", `{"url":"http://x","method":"POTS"}`}, `method "POTS" is not one of GET, HEAD, POST`},
		{"http connect", []string{"enqueue", "http", `{"url":"http://x","method":"connect"}`}, "CONNECT"},
		{"http field type", []string{"enqueue", "http", `{"url":"http://x","timeout":10}`}, `"timeout" is a JSON number, want a string`},
		{"file and args", []string{"enqueue", "x", "{}", "--file", "-"}, "not both"},
		{"file and unique", []string{"enqueue", "--file", "-", "--unique", "k"}, "unique_key"},
		{"unique-by part", []string{"enqueue", "x", "{}", "--unique-by", "args,payload"}, `--unique-by "payload"`},
		{"unique-period", []string{"enqueue", "x", "{}", "--unique-period", "10ms"}, "at least 1s"},
		{"unique-states", []string{"enqueue", "x", "{}", "--unique-by", "args", "--unique-states", "pending,done"}, `"done" is not one of pending, scheduled, running, retrying`},
		{"on-conflict", []string{"enqueue", "x", "{}", "--unique", "k", "--on-conflict", "merge"}, `--on-conflict "merge"`},
		{"debounce", []string{"enqueue", "x", "{}", "--unique", "k", "--on-conflict", "debounce", "--debounce", "1m"}, "--debounce-max"},
		{"keep-last for skip", []string{"enqueue", "x", "{}", "--unique", "k", "--keep-last"}, "--keep-last is for --on-conflict replace"},
		{"debounce for skip", []string{"enqueue", "x", "{}", "--debounce", "1m"}, "are for --on-conflict debounce"},
		{"bad deadline", []string{"enqueue", "x", "{}", "--deadline", "soon"}, "--deadline \"soon\""},
		{"negative deadline", []string{"enqueue", "x", "{}", "--deadline", "-5m"}, "positive duration"},
		{"missing file", []string{"enqueue", "--file", "/nonexistent/jobs.jsonl"}, "no such file"},
		{"metadata", []string{"enqueue", "x", "{}", "--metadata", "=v"}, "metadata"},
		{"arg count", []string{"enqueue", "x"}, "TYPE and PAYLOAD"},
		{"wait ID", []string{"jobs", "wait", "0"}, "job ID"},
		{"wait timeout", []string{"jobs", "wait", "1", "--timeout", "soon"}, "--timeout"},
		{"unknown command", []string{"nope"}, `unknown command "nope"`},
		{"unknown subcommand", []string{"failed", "nope"}, "list, purge, retry, show"},
		{"missing subcommand", []string{"failed"}, "needs a subcommand"},
		{"unknown flag", []string{"stats", "--nope"}, "unknown flag"},
		{"bad id", []string{"failed", "show", "abc"}, "not a failed job's ID"},
		{"purge everything", []string{"failed", "purge"}, "--all"},
		{"ids and all", []string{"failed", "retry", "1", "--all"}, "not both"},
		{"limit", []string{"failed", "list", "--limit", "0"}, "--limit"},
		{"concurrency", []string{"worker", "--concurrency", "0"}, "--concurrency"},
		{"worker queue", []string{"worker", "--queues", "a b"}, "--queues"},
		{"lease", []string{"worker", "--lease", "0s"}, "--lease"},
		{"interval", []string{"stats", "--watch", "--interval", "0s"}, "--interval"},
		{"bad scheme", []string{"--db", "mysql://x", "stats"}, "use one of " + strings.Join(backend.Schemes(), ":, ") + ":"},
		{"no scheme", []string{"--db", "jobq.db", "stats"}, "sqlite:jobq.db"},
	}
	for _, c := range cases {
		args := c.args
		if args[0] != "--db" {
			args = append([]string{"--db", db}, args...)
		}
		r := run(t, args...)
		if r.code() != 2 {
			t.Errorf("%s: exit %d (err %v), want 2", c.name, r.code(), r.err)
			continue
		}
		msg := r.err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want one line containing %q", c.name, msg, c.want)
		}
		if strings.Contains(r.out+r.errOut, "goroutine ") {
			t.Errorf("%s: printed a stack", c.name)
		}
	}
	// Bad input is refused before the database is opened: no file appears.
	if _, err := os.Stat(strings.TrimPrefix(db, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("bad input created the database file: %v", err)
	}
}

func TestCorruptSQLiteFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--db", "sqlite:"+path, "stats")
	if r.err == nil {
		t.Fatal("stats on a corrupt file succeeded")
	}
	msg := r.err.Error()
	if r.code() != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, path) || !strings.Contains(msg, "not a valid sqlite database") {
		t.Fatalf("exit %d, error %q: want one line naming the file", r.code(), msg)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	r := run(t, "--db", tempDB(t), "migrate")
	if r.err != nil || !strings.HasPrefix(r.out, "schema version ") {
		t.Fatalf("migrate: %q, %v", r.out, r.err)
	}
	r = run(t, "--db", "memory:", "migrate")
	if r.code() != 2 || !strings.Contains(r.err.Error(), "vanish") {
		t.Fatalf("migrate memory: exit %d, %v; want it refused", r.code(), r.err)
	}
}
