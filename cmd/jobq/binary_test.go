package main

// Tests of the command line as a new user meets it: each runs the built
// binary (see jobqBinary) and checks what it printed, its exit code and what
// it left behind in the store.

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/postgres/pgtest"
)

// The secrets the redaction tests put in URLs: a password that needs
// %-encoding and a password-like query parameter.
const (
	testPassword    = "pa:ss@w0rd/x"
	testSSLPassword = "sslsecret123"
)

// withSecrets returns raw (a postgres URL) with testPassword as the user's
// password and sslpassword=testSSLPassword added to its query.
func withSecrets(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	user := "postgres"
	if u.User != nil {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, testPassword)
	q := u.Query()
	q.Set("sslpassword", testSSLPassword)
	u.RawQuery = q.Encode()
	return u.String()
}

// checkNoSecret fails when text holds any form of the test secrets.
func checkNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{testPassword, url.QueryEscape(testPassword), url.PathEscape(testPassword), "w0rd", testSSLPassword} {
		if strings.Contains(text, s) {
			t.Errorf("%s printed the secret %q:\n%s", what, s, text)
		}
	}
}

func TestBinaryNeverPrintsSecrets(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	down := withSecrets(t, "postgres://user@127.0.0.1:1/x") // nothing listens on port 1
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(`{"type":"t"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"stats"}, {"stats", "--json"}, {"failed", "list"}, {"failed", "show", "1"},
		{"failed", "retry", "1"}, {"failed", "purge", "--all"}, {"migrate"},
		{"enqueue", "http", `{"url":"http://example.com"}`}, {"enqueue", "--file", file},
		{"worker"}, {"demo"}, {"bench", "--workload", "enqueue-single", "--jobs", "1"},
	} {
		what := "jobq --db URL " + strings.Join(args, " ")
		r := runBinary(t, "", nil, append([]string{"--db", down}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
			t.Errorf("%s: exit %d, stderr %q; want a failure naming the server", what, r.code, r.stderr)
		}
		checkNoSecret(t, what, r.stdout+r.stderr)
	}
	// The same URL from the environment, and the help that shows it as the
	// default of --db even when --db overrides it.
	env := []string{"JOBQ_DB=" + down}
	r := runBinary(t, "", env, "stats")
	if r.code == 0 {
		t.Errorf("JOBQ_DB=URL jobq stats: exit 0 against a server that is down")
	}
	checkNoSecret(t, "JOBQ_DB=URL jobq stats", r.stdout+r.stderr)
	r = runBinary(t, "", env, "--db", "sqlite:x.db", "stats", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "user:***@127.0.0.1:1") {
		t.Errorf("--help: exit %d, want the redacted default:\n%s", r.code, r.stdout)
	}
	checkNoSecret(t, "JOBQ_DB=URL jobq stats --help", r.stdout+r.stderr)
}

// TestBinaryWorkerLogsRedactedURL starts a worker on Postgres with a
// password URL (the test server trusts local connections, so the password
// is never checked) and reads its start-up log line.
func TestBinaryWorkerLogsRedactedURL(t *testing.T) {
	bin := jobqBinary(t)
	base := pgtest.URL(t)
	t.Parallel()
	db := withSecrets(t, base)
	db += "&" + url.Values{"jobq_schema": {pgtest.Schema(t, base)}}.Encode()

	log := &lineWatch{want: `msg="jobq worker"`, seen: make(chan struct{})}
	worker := startProcess(t, bin, log, "--db", db, "worker", "--poll", "50ms")
	await(t, log.seen, "the worker's start-up line", log)
	if err := worker.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := worker.wait(t, log); code != 0 {
		t.Fatalf("worker exited %d after SIGTERM; log:\n%s", code, log)
	}
	if !strings.Contains(log.String(), "postgres:***@") || !strings.Contains(log.String(), "sslpassword=***") {
		t.Errorf("start-up line lacks the redacted URL:\n%s", log)
	}
	checkNoSecret(t, "jobq worker", log.String())
}

func TestBinaryReadOnlyCommandsCreateNothing(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	dir := t.TempDir()
	typo := "sqlite:" + filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"stats"}, {"stats", "--json"}, {"failed", "list"}, {"failed", "show", "1"},
		{"failed", "retry", "--all"}, {"failed", "purge", "--all"},
	} {
		what := "jobq --db " + typo + " " + strings.Join(args, " ")
		r := runBinary(t, "", nil, append([]string{"--db", typo}, args...)...)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no jobq schema") ||
			strings.Count(r.stderr, "jobq migrate --db "+typo) != 1 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and one line naming 'jobq migrate --db %s'", what, r.code, r.stdout, r.stderr, typo)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("%s left %v behind", what, left)
		}
	}

	// A directory says it is one.
	r := runBinary(t, "", nil, "--db", "sqlite:"+dir, "stats")
	if r.code == 0 || !strings.Contains(r.stderr, "is a directory") {
		t.Errorf("--db DIR stats: exit %d, %q", r.code, r.stderr)
	}

	// Stores that end with the process are refused by commands that exit.
	for _, db := range []string{"memory:", "sync:"} {
		for _, args := range [][]string{
			{"enqueue", "t", "{}"}, {"enqueue", "--file", "-"}, {"stats"}, {"failed", "list"},
			{"failed", "retry", "--all"}, {"migrate"},
		} {
			r := runBinary(t, `{"type":"t"}`, nil, append([]string{"--db", db}, args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, "vanish when this command exits") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("--db %s %v: exit %d, %q; want exit 2 and one line saying why", db, args, r.code, r.stderr)
			}
		}
	}
}

// TestBinaryReadOnlyCommandsCreateNoSchema: on Postgres, stats and failed
// with a mistyped jobq_schema leave no schema behind.
func TestBinaryReadOnlyCommandsCreateNoSchema(t *testing.T) {
	jobqBinary(t)
	base := pgtest.URL(t)
	t.Parallel()
	schema := pgtest.Schema(t, base) // a fresh name, dropped at the end should it be created
	db := base + "?" + url.Values{"jobq_schema": {schema}}.Encode()
	if strings.Contains(base, "?") {
		db = base + "&" + url.Values{"jobq_schema": {schema}}.Encode()
	}
	for _, args := range [][]string{{"stats"}, {"failed", "list"}, {"failed", "purge", "--all"}} {
		r := runBinary(t, "", nil, append([]string{"--db", db}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no jobq schema") || !strings.Contains(r.stderr, "jobq migrate") {
			t.Errorf("%v: exit %d, %q; want exit 1 naming 'jobq migrate'", args, r.code, r.stderr)
		}
	}
	conn, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("read-only commands created schema %s", schema)
	}
}

// jobsFileLine is line i (from 1) of the file TestBinaryEnqueueFile
// enqueues: queues q0..q2 by default; every 1000th delayed an hour; line 7
// with its own options and line 8 its duplicate by unique key.
func jobsFileLine(i int) string {
	switch {
	case i == 7 || i == 8:
		return `{"type":"t","payload":{"n":7},"priority":-5,"metadata":{"tenant":"acme"},"unique_key":"k7"}`
	case i%1000 == 0:
		return fmt.Sprintf(`{"type":"report","payload":{"n":%d},"queue":"q%d","delay":"1h"}`, i, i%3)
	}
	return fmt.Sprintf(`{"type":"t","payload":{"n":%d},"queue":"q%d"}`, i, i%3)
}

// writeJobsFile writes n lines made by line, plus one blank line after the
// third, and returns the file's path.
func writeJobsFile(t *testing.T, n int, line func(int) string) string {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(line(i) + "\n")
		if i == 3 {
			b.WriteString("\n")
		}
	}
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkEnqueueFile enqueues 10,000 jobs from a file into db with flags as
// defaults and checks every row, the ids printed and the duplicate.
func checkEnqueueFile(t *testing.T, db string) {
	const n = 10000
	path := writeJobsFile(t, n, jobsFileLine)
	r := runBinary(t, "", nil, "--db", db, "enqueue", "--file", path, "--queue", "bulk", "--priority", "7", "--max-attempts", "4", "--metadata", "team=ops")
	if r.code != 0 {
		t.Fatalf("enqueue --file: exit %d: %s", r.code, r.stderr)
	}
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(out) != n {
		t.Fatalf("printed %d lines for %d jobs", len(out), n)
	}
	if want := out[6] + "\tduplicate"; out[7] != want {
		t.Fatalf("line 8 printed %q, want %q", out[7], want)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("enqueued %d jobs from %s", n-1, path)) || !strings.Contains(r.stderr, "1 duplicates") {
		t.Errorf("summary: %q", r.stderr)
	}

	b := openDB(t, db)
	stats, err := b.QueueStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tot := jobq.Totals(stats); tot.Pending != n-1-n/1000 || tot.Scheduled != n/1000 {
		t.Fatalf("stats %+v, want %d pending and %d scheduled", tot, n-1-n/1000, n/1000)
	}
	ids := make([]int64, n)
	for i, line := range out {
		id, err := strconv.ParseInt(strings.TrimSuffix(line, "\tduplicate"), 10, 64)
		if err != nil {
			t.Fatalf("line %d printed %q", i+1, line)
		}
		ids[i] = id
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != n-1 {
		t.Fatalf("ids are not distinct but for the duplicate")
	}
	own, err := b.JobGet(t.Context(), ids[6])
	if err != nil {
		t.Fatal(err)
	}
	if own.Queue != "bulk" || own.Priority != -5 || own.MaxAttempts != 4 || own.UniqueKey != "k7" ||
		own.Metadata["tenant"] != "acme" || own.Metadata["team"] != "ops" || len(own.Metadata) != 2 {
		t.Errorf("line 7 stored as %+v; want the flags as defaults under its own fields", own)
	}
	def, err := b.JobGet(t.Context(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if def.Queue != "q2" || def.Priority != 7 || def.Type != "t" || string(def.Payload) != `{"n":2}` || def.Metadata["team"] != "ops" {
		t.Errorf("line 2 stored as %+v", def)
	}
}

func TestBinaryEnqueueFileSQLite(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	checkEnqueueFile(t, tempDB(t))
}

func TestBinaryEnqueueFilePostgres(t *testing.T) {
	jobqBinary(t)
	base := pgtest.URL(t)
	t.Parallel()
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	checkEnqueueFile(t, base+sep+url.Values{"jobq_schema": {pgtest.Schema(t, base)}}.Encode())
}

// TestBinaryEnqueueFileBadLine: a bad line stops the command naming it;
// the batches before it are stored, its own batch is not.
func TestBinaryEnqueueFileBadLine(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	db := tempDB(t)
	path := writeJobsFile(t, 2500, func(i int) string {
		if i == 2100 {
			return `{"type":"t","priority":5000}`
		}
		return fmt.Sprintf(`{"type":"t","payload":{"n":%d}}`, i)
	})
	r := runBinary(t, "", nil, "--db", db, "enqueue", "--file", path)
	// The blank line after line 3 shifts the lines: jobs 1-1000 are lines
	// 1-1001 and jobs 1001-2000 lines 1002-2001.
	want := path + " line 2101: invalid priority: 5000 is outside -1000..1000; the 2000 jobs before line 2002 were enqueued: resume from line 2002\n"
	if r.code != 2 || r.stderr != "jobq: "+want || strings.Count(r.stdout, "\n") != 2000 {
		t.Fatalf("exit %d, %d ids, stderr %q; want exit 2, 2000 ids and %q", r.code, strings.Count(r.stdout, "\n"), r.stderr, want)
	}
	stats, err := openDB(t, db).QueueStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tot := jobq.Totals(stats); tot.Pending != 2000 {
		t.Fatalf("%d jobs stored, want the 2000 of the first two batches", tot.Pending)
	}
}

// TestBinaryErrorsReadOnce: each layer of an error adds its words once.
func TestBinaryErrorsReadOnce(t *testing.T) {
	jobqBinary(t)
	t.Parallel()
	db := tempDB(t)
	if r := runBinary(t, "", nil, "--db", db, "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "jobq.db")
	long := strings.Repeat("q", 100000)
	cases := []struct {
		args []string
		want string
		once []string // words that must appear exactly once
	}{
		{[]string{"--db", db, "failed", "retry", "999999"}, "not found", []string{"replay failed jobs", "999999"}},
		{[]string{"--db", db, "failed", "show", "999999"}, "not found", []string{"999999"}},
		{[]string{"--db", "sqlite:" + missing, "enqueue", "t", "{}"}, "directory", []string{missing, "sqlite"}},
		{[]string{"--db", db, "enqueue", "t", "{nope"}, "payload is not valid JSON (invalid character", nil},
		{[]string{"--db", db, "enqueue", "t", "{}", "--queue", long}, "invalid queue", []string{"invalid queue"}},
		{[]string{"--db", db, "worker", "--queues", long}, "invalid queue", []string{"invalid queue"}},
		{[]string{"--db", db, "failed", "list", "--queue", long}, "invalid queue", nil},
	}
	for _, c := range cases {
		r := runBinary(t, "", nil, c.args...)
		what := strings.Join(c.args, " ")
		if len(what) > 120 {
			what = what[:120] + "…"
		}
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || len(r.stderr) > 400 {
			t.Errorf("%s: exit %d, stderr %q; want one short line containing %q", what, r.code, r.stderr, c.want)
		}
		for _, w := range c.once {
			if n := strings.Count(r.stderr, w); n != 1 {
				t.Errorf("%s: %q appears %d times in %q", what, w, n, r.stderr)
			}
		}
	}
}
