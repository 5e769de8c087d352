package main

import (
	"os"
	"strings"
	"testing"
)

// TestEnqueueFileBadLines: each kind of bad line is refused in one line
// naming it, before anything is opened (no database file appears).
func TestEnqueueFileBadLines(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	big := `{"type":"t","payload":{"s":"` + strings.Repeat("x", 1<<20) + `"}}`
	huge := `{"type":"t","payload":{"s":"` + strings.Repeat("x", maxFileLine) + `"}}`
	cases := []struct{ line, want string }{
		{`{"type":"t",`, "not valid JSON (the line ends inside the object)"},
		{`{type:"t"}`, "not valid JSON (invalid character"},
		{`[1,2]`, "not a JSON object but a JSON array"},
		{`{"payload":{}}`, `"type" is missing`},
		{`{"type":"t","prority":1}`, `unknown field "prority" (the fields are type, payload,`},
		{`{"type":"t","priority":"high"}`, `"priority" is a JSON string, want a whole number`},
		{`{"type":"t","metadata":{"k":1}}`, `"metadata" holds a JSON number: its values must be strings`},
		{`{"type":"t"} {"type":"u"}`, "more than one JSON value"},
		{`{"type":"t","priority":5000}`, "invalid priority: 5000 is outside -1000..1000"},
		{`{"type":"t","max_attempts":0}`, "invalid max attempts"},
		{`{"type":"t","queue":"a b"}`, "invalid queue"},
		{`{"type":"t","delay":"5"}`, `"delay" "5": use a positive Go duration`},
		{`{"type":"t","delay":"-1s"}`, `"delay" "-1s"`},
		{`{"type":"t","run_at":"tomorrow"}`, `"run_at" "tomorrow" is not an RFC 3339 time`},
		{`{"type":"t","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, "not both"},
		{`{"type":"t","metadata":{"":"v"}}`, "invalid metadata: a key is empty"},
		{`{"type":"http","payload":{"url":"ftp://x"}}`, "http job payload: url \"ftp://x\": scheme must be http or https"},
		{`{"type":"http","payload":{"url":"http://x","method":"POTS"}}`, `http job payload: method "POTS"`},
		{big, "payload is over the 1048576-byte (1 MiB) limit"},
		{huge, "line 2: longer than"},
	}
	for _, c := range cases {
		stdin := `{"type":"t","payload":{"n":1}}` + "\n" + c.line + "\n" + `{"type":"t"}` + "\n"
		r := runCtx(t.Context(), stdin, "--db", db, "enqueue", "--file", "-")
		name := c.line
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		if r.code() != 2 {
			t.Errorf("%s: exit %d (%v), want 2", name, r.code(), r.err)
			continue
		}
		msg := r.err.Error()
		if !strings.HasPrefix(msg, "stdin line 2: ") || !strings.Contains(msg, c.want) ||
			!strings.HasSuffix(msg, "; nothing was enqueued") || strings.Contains(msg, "\n") || len(msg) > 400 {
			t.Errorf("%s: error %q, want one short line: stdin line 2: …%s…; nothing was enqueued", name, msg, c.want)
		}
		if r.out != "" {
			t.Errorf("%s: printed %q", name, r.out)
		}
	}
	if _, err := os.Stat(strings.TrimPrefix(db, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("a file bad from its first batch created the database: %v", err)
	}
}

// TestEnqueueFileSchedules: a line's delay or run_at replaces the flags'
// schedule whole; lines without one take it.
func TestEnqueueFileSchedules(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	stdin := strings.Join([]string{
		`{"type":"t"}`,                                 // the default: in an hour
		`{"type":"t","delay":"0s"}`,                    // now
		`{"type":"t","run_at":"2000-01-01T00:00:00Z"}`, // in the past: now
		`{"type":"t","run_at":"2999-01-01T00:00:00Z"}`, // far off
		"",
	}, "\n")
	r := runCtx(t.Context(), stdin, "--db", db, "enqueue", "--file", "-", "--delay", "1h")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := strings.Count(r.out, "\n"); n != 4 || !strings.Contains(r.errOut, "enqueued 4 jobs from stdin") {
		t.Fatalf("printed %d ids, summary %q", n, r.errOut)
	}
	stats := run(t, "--db", db, "stats", "--json")
	if !strings.Contains(stats.out, `"total":{"pending":2,"scheduled":2,`) {
		t.Fatalf("stats: %s", stats.out)
	}
}

func TestEnqueueFileEmpty(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	r := runCtx(t.Context(), "\n  \n", "--db", db, "enqueue", "--file", "-")
	if r.err != nil || r.out != "" || !strings.Contains(r.errOut, "stdin holds no jobs") {
		t.Fatalf("empty input: %q, %q, %v", r.out, r.errOut, r.err)
	}
	if _, err := os.Stat(strings.TrimPrefix(db, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("empty input created the database: %v", err)
	}
}
