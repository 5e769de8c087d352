package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// seedFailed puts one job per queue/type pair into failed_jobs through the
// backend's own lifecycle (insert, claim, fail) and returns their job IDs,
// which name them, in the order given. A job is done first, so that the
// failed rows' own IDs (from 1) are not their jobs' (from 2): a command
// taking one for the other fails the tests.
func seedFailed(t *testing.T, b backend.Backend, jobs ...[2]string) []int64 {
	t.Helper()
	ctx := t.Context()
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "done", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"done"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i, qt := range jobs {
		payload := fmt.Sprintf(`{"n":%d}`, i)
		if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: qt[0], Type: qt[1], Payload: []byte(payload), MaxAttempts: 3}}); err != nil {
			t.Fatal(err)
		}
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{qt[0]}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v, %d rows", err, len(rows))
		}
		out := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: fmt.Sprintf("boom %d\nsecond line", i)}
		if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
			t.Fatal(err)
		}
		page, err := b.FailedList(ctx, backend.FailedListParams{Limit: 1})
		if err != nil || len(page) != 1 || page[0].ID == page[0].JobID {
			t.Fatalf("list: %+v, %v; want a failed row whose own ID is not its job's", page, err)
		}
		ids = append(ids, page[0].JobID)
	}
	return ids
}

// failedIDs lists failed job IDs through the command line.
func failedIDs(t *testing.T, db string, args ...string) []int64 {
	t.Helper()
	r := run(t, append([]string{"--db", db, "failed", "list", "--json"}, args...)...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var jobs []jobview.Failed
	if err := json.Unmarshal([]byte(r.out), &jobs); err != nil {
		t.Fatalf("failed list --json printed %q: %v", r.out, err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func TestFailedListAndShow(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	ids := seedFailed(t, openDB(t, db), [2]string{"mail", "welcome"}, [2]string{"mail", "charge"}, [2]string{"default", "welcome"})

	if got := failedIDs(t, db); fmt.Sprint(got) != fmt.Sprint([]int64{ids[2], ids[1], ids[0]}) {
		t.Fatalf("list = %v, want newest first of %v", got, ids)
	}
	if got := failedIDs(t, db, "--queue", "mail", "--type", "welcome"); fmt.Sprint(got) != fmt.Sprint(ids[:1]) {
		t.Fatalf("filtered list = %v, want %v", got, ids[:1])
	}
	// A full page prints the cursor of the next, which is not a job ID.
	for _, format := range [][]string{nil, {"--json"}} {
		r := run(t, append([]string{"--db", db, "failed", "list", "--limit", "1"}, format...)...)
		m := regexp.MustCompile(`more may follow: jobq failed list --before (\d+)\n`).FindStringSubmatch(r.errOut)
		if r.err != nil || m == nil {
			t.Fatalf("list --limit 1 %v: %v, no cursor in %q", format, r.err, r.errOut)
		}
		if got := failedIDs(t, db, "--limit", "1", "--before", m[1]); fmt.Sprint(got) != fmt.Sprint(ids[1:2]) {
			t.Fatalf("page after cursor %s = %v, want %v", m[1], got, ids[1:2])
		}
	}

	r := run(t, "--db", db, "failed", "list")
	if !strings.Contains(r.out, "FAILED AT") || !strings.Contains(r.out, "boom 0 …") || strings.Contains(r.out, "second line") {
		t.Fatalf("table:\n%s", r.out)
	}
	// The ID column is the jobs', and no other column holds an ID.
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if head := strings.Fields(lines[0]); head[0] != "ID" || head[1] != "QUEUE" {
		t.Fatalf("table head %q, want ID then QUEUE", lines[0])
	}
	for i, l := range lines[1:] {
		if f := strings.Fields(l); f[0] != fmt.Sprint(ids[2-i]) {
			t.Fatalf("table row %d shows ID %s, want job %d:\n%s", i, f[0], ids[2-i], r.out)
		}
	}

	r = run(t, "--db", db, "failed", "show", fmt.Sprint(ids[1]))
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^ID: +%d$`, ids[1])).MatchString(r.out) || strings.Contains(r.out, "Job ID") {
		t.Errorf("show names the job otherwise than by its ID %d:\n%s", ids[1], r.out)
	}
	for _, want := range []string{"Type:", "charge", "Attempts:", "1 of 3", "\"n\": 1", "boom 1\nsecond line"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("show lacks %q:\n%s", want, r.out)
		}
	}
	r = run(t, "--db", db, "failed", "show", "999")
	if r.code() != 1 || !strings.Contains(r.err.Error(), "failed job 999 not found") {
		t.Fatalf("show unknown: exit %d, %v", r.code(), r.err)
	}
}

// TestFailedShowMasks: the failed commands show a payload's secret keys and
// an error's URL password as ***, as the admin surface does; the stored job
// keeps them, so a retry runs with them.
func TestFailedShowMasks(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	ctx := t.Context()
	payload := `{"to":"ada@example.com","smtp":{"Password":"pw-9731"},"hook":"https://bot:pw-4402@h.example/x?token=tk-5120"}`
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "q", Type: "mail", Payload: []byte(payload), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	out := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "dial smtp://ada:pw-6628@mail.example:587: refused"}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{out}}); err != nil {
		t.Fatal(err)
	}
	page, err := b.FailedList(ctx, backend.FailedListParams{Limit: 1})
	if err != nil || len(page) != 1 || string(page[0].Payload) != payload {
		t.Fatalf("stored failed job %v, %v; want the payload as written", page, err)
	}
	for _, args := range [][]string{{"failed", "show", fmt.Sprint(page[0].JobID)}, {"failed", "list"}, {"failed", "list", "--json"}} {
		r := run(t, append([]string{"--db", db}, args...)...)
		if r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
		for _, secret := range []string{"pw-9731", "pw-4402", "tk-5120", "pw-6628"} {
			if strings.Contains(r.out, secret) {
				t.Errorf("%v shows %s:\n%s", args, secret, r.out)
			}
		}
		if !strings.Contains(r.out, "mail.example") || !strings.Contains(r.out, "***") {
			t.Errorf("%v lacks the masked error:\n%s", args, r.out)
		}
	}
}

func TestFailedRetry(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	ids := seedFailed(t, b, [2]string{"a", "x"}, [2]string{"b", "x"}, [2]string{"b", "y"}, [2]string{"c", "x"})

	r := run(t, "--db", db, "failed", "retry", fmt.Sprint(ids[0]))
	if r.err != nil || r.out != "replayed 1, skipped 0\n" {
		t.Fatalf("retry one: %q, %v", r.out, r.err)
	}
	r = run(t, "--db", db, "failed", "retry", "--all", "--queue", "b")
	if r.err != nil || r.out != "replayed 2, skipped 0\n" {
		t.Fatalf("retry queue b: %q, %v", r.out, r.err)
	}
	if got := failedIDs(t, db); fmt.Sprint(got) != fmt.Sprint(ids[3:]) {
		t.Fatalf("left failed = %v, want %v", got, ids[3:])
	}
	stats, err := b.QueueStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var pending int64
	for _, s := range stats {
		pending += s.Pending
	}
	if pending != 3 {
		t.Fatalf("pending after replay = %d, want 3 (%+v)", pending, stats)
	}
	r = run(t, "--db", db, "failed", "retry", "424242")
	if r.code() != 1 || !strings.Contains(r.err.Error(), "nothing was replayed") {
		t.Fatalf("retry unknown: exit %d, %v", r.code(), r.err)
	}
}

func TestFailedPurge(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	ids := seedFailed(t, openDB(t, db), [2]string{"a", "x"}, [2]string{"a", "y"}, [2]string{"b", "x"}, [2]string{"b", "y"})

	steps := []struct {
		args []string
		want string
		left []int64
	}{
		{[]string{fmt.Sprint(ids[0])}, "purged 1\n", []int64{ids[3], ids[2], ids[1]}},
		{[]string{"--type", "x"}, "purged 1\n", []int64{ids[3], ids[1]}},
		{[]string{"--older-than", "1h"}, "purged 0\n", []int64{ids[3], ids[1]}},
		{[]string{"--all", "--queue", "b"}, "purged 1\n", []int64{ids[1]}},
		{[]string{"--all"}, "purged 1\n", []int64{}},
	}
	for _, s := range steps {
		r := run(t, append([]string{"--db", db, "failed", "purge"}, s.args...)...)
		if r.err != nil || r.out != s.want {
			t.Fatalf("purge %v: %q, %v; want %q", s.args, r.out, r.err, s.want)
		}
		if got := failedIDs(t, db); fmt.Sprint(got) != fmt.Sprint(s.left) {
			t.Fatalf("after purge %v: left %v, want %v", s.args, got, s.left)
		}
	}
}

// TestFailedPurgeNeedsASelection: with neither IDs nor a filter nor --all,
// purge refuses with one line naming --all and a filter, exits 2 and
// deletes nothing; IDs delete exactly those; --all alone deletes the rest.
func TestFailedPurgeNeedsASelection(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	ids := seedFailed(t, openDB(t, db), [2]string{"a", "x"}, [2]string{"b", "y"}, [2]string{"c", "x"}, [2]string{"a", "y"})

	for _, args := range [][]string{{}, {"--queue", ""}, {"--type", ""}, {"--all=false"}} {
		r := run(t, append([]string{"--db", db, "failed", "purge"}, args...)...)
		if r.code() != 2 || r.out != "" {
			t.Fatalf("purge %v: exit %d, out %q, err %v; want exit 2 and nothing printed", args, r.code(), r.out, r.err)
		}
		if msg := r.err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--all") || !strings.Contains(msg, "filter") {
			t.Fatalf("purge %v: error %q, want one line naming --all and a filter", args, msg)
		}
		if got := failedIDs(t, db); len(got) != len(ids) {
			t.Fatalf("refused purge %v left %v, want all %d", args, got, len(ids))
		}
	}

	steps := []struct {
		args []string
		want string
		left []int64
	}{
		{[]string{fmt.Sprint(ids[0]), fmt.Sprint(ids[2])}, "purged 2\n", []int64{ids[3], ids[1]}},
		{[]string{"--all"}, "purged 2\n", []int64{}},
	}
	for _, s := range steps {
		r := run(t, append([]string{"--db", db, "failed", "purge"}, s.args...)...)
		if r.err != nil || r.out != s.want {
			t.Fatalf("purge %v: %q, %v; want %q", s.args, r.out, r.err, s.want)
		}
		if got := failedIDs(t, db); fmt.Sprint(got) != fmt.Sprint(s.left) {
			t.Fatalf("after purge %v: left %v, want %v", s.args, got, s.left)
		}
	}
}

func TestFailedPurgeKeep(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	ids := seedFailed(t, openDB(t, db),
		[2]string{"a", "x"}, [2]string{"b", "x"}, [2]string{"a", "y"}, [2]string{"a", "x"}, [2]string{"b", "x"}, [2]string{"a", "x"})

	// Refused before anything is opened or deleted: one-line usage errors.
	for _, args := range [][]string{
		{"--keep", "0"},
		{"--keep", "-3"},
		{"--keep", "2", fmt.Sprint(ids[0])},
		{"--keep", "2", "--all"},
		{"--keep", "2", "--older-than", "1h"},
		{"--keep", "2", "--all", "--queue", "a"},
	} {
		r := run(t, append([]string{"--db", db, "failed", "purge"}, args...)...)
		if r.code() != 2 || strings.Contains(r.err.Error(), "\n") {
			t.Errorf("purge %v: exit %d, err %v; want a one-line usage error", args, r.code(), r.err)
		}
	}
	if got := failedIDs(t, db); len(got) != len(ids) {
		t.Fatalf("refused purges left %v, want all %d", got, len(ids))
	}

	steps := []struct {
		args []string
		want string
		left []int64
	}{
		// Queue a: 0 2 3 5; only its two oldest go, b is untouched.
		{[]string{"--keep", "2", "--queue", "a"}, "purged 2\n", []int64{ids[5], ids[4], ids[3], ids[1]}},
		{[]string{"--keep", "1", "--queue", "b", "--type", "x"}, "purged 1\n", []int64{ids[5], ids[4], ids[3]}},
		{[]string{"--keep", "3"}, "purged 0\n", []int64{ids[5], ids[4], ids[3]}},
		{[]string{"--keep", "1"}, "purged 2\n", []int64{ids[5]}},
	}
	for _, s := range steps {
		r := run(t, append([]string{"--db", db, "failed", "purge"}, s.args...)...)
		if r.err != nil || r.out != s.want {
			t.Fatalf("purge %v: %q, %v; want %q", s.args, r.out, r.err, s.want)
		}
		if got := failedIDs(t, db); fmt.Sprint(got) != fmt.Sprint(s.left) {
			t.Fatalf("after purge %v: left %v, want %v", s.args, got, s.left)
		}
	}
}

// TestJobsListMasks: 'jobq jobs list --json' prints a job's payload,
// metadata and last error masked as 'jobq failed' does, and --mask-keys
// on either command replaces the masked keys.
func TestJobsListMasks(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	ctx := t.Context()
	payload := `{"to":"ada@example.com","smtp":{"Password":"pw-1187"},"ssn":"ssn-5521"}`
	md := map[string]string{"access_token": "tk-3304", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if _, err := b.JobInsertMany(ctx, []backend.InsertParams{{Queue: "q", Type: "mail", Payload: []byte(payload), MaxAttempts: 3, Metadata: md}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	retry := backend.Outcome{Ref: rows[0].Ref(), Kind: backend.OutcomeRetry, Error: "dial smtp://ada:pw-7719@mail.example:587: refused"}
	if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{retry}}); err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) string {
		t.Helper()
		r := run(t, append([]string{"--db", db, "jobs", "list", "--state", "pending", "--json"}, args...)...)
		if r.err != nil {
			t.Fatalf("jobs list %v: %v", args, r.err)
		}
		if !strings.Contains(r.out, "mail.example") || !strings.Contains(r.out, "traceparent") {
			t.Fatalf("jobs list %v lacks the job:\n%s", args, r.out)
		}
		return r.out
	}
	out := list()
	for _, secret := range []string{"pw-1187", "tk-3304", "pw-7719"} {
		if strings.Contains(out, secret) {
			t.Errorf("jobs list --json shows %s:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "ssn-5521") {
		t.Errorf("ssn is not a default masked key, yet it is hidden:\n%s", out)
	}
	if out := list("--mask-keys", "ssn"); strings.Contains(out, "ssn-5521") || !strings.Contains(out, "pw-1187") {
		t.Errorf("--mask-keys ssn: want ssn masked and the defaults replaced:\n%s", out)
	}
}

// TestFailedKeepsItsJobID: one ID names a job through its whole life on
// the command line: the failed commands take the ID its job had, a retry
// brings the job back under it, and once it fails again the same ID shows
// and purges it.
func TestFailedKeepsItsJobID(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	b := openDB(t, db)
	id := seedFailed(t, b, [2]string{"q", "mail"})[0]
	sid := fmt.Sprint(id)

	if r := run(t, "--db", db, "failed", "show", sid); r.err != nil || !strings.Contains(r.out, "mail") {
		t.Fatalf("failed show %d: %v\n%s", id, r.err, r.out)
	}
	if r := run(t, "--db", db, "failed", "retry", sid); r.err != nil || r.out != "replayed 1, skipped 0\n" {
		t.Fatalf("failed retry %d: %q, %v", id, r.out, r.err)
	}
	r := run(t, "--db", db, "jobs", "list", "--state", "pending", "--json")
	var live []jobview.Job
	if err := json.Unmarshal([]byte(r.out), &live); err != nil || len(live) != 1 || live[0].ID != id {
		t.Fatalf("pending after the retry: %v %s; want job %d", err, r.out, id)
	}

	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("claim: %v, %+v", err, rows)
	}
	if _, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeFail, Error: "again"}}}); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "--db", db, "failed", "show", sid); r.err != nil || !strings.Contains(r.out, "again") {
		t.Fatalf("failed show %d after it failed again: %v\n%s", id, r.err, r.out)
	}
	if r := run(t, "--db", db, "failed", "purge", sid); r.err != nil || r.out != "purged 1\n" {
		t.Fatalf("failed purge %d: %q, %v", id, r.out, r.err)
	}
	if r := run(t, "--db", db, "failed", "show", sid); r.code() != 1 || !strings.Contains(r.err.Error(), "failed job "+sid+" not found") {
		t.Fatalf("failed show %d after the purge: exit %d, %v", id, r.code(), r.err)
	}
}
