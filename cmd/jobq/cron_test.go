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

func TestCronList(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	if r := run(t, "--db", db, "migrate"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := run(t, "--db", db, "cron", "list"); r.err != nil || !strings.Contains(r.out, "no schedules") {
		t.Fatalf("cron list on an empty store: %q, %v", r.out, r.err)
	}
	store := openDB(t, db).(backend.ScheduleStore)
	_, err := store.ScheduleUpsert(t.Context(), []backend.ScheduleDef{
		{Name: "report", Spec: "CRON_TZ=Europe/Paris 0 9 * * *", Queue: "reports", Type: "report.build"},
		{Name: "cleanup", Spec: "@every 30s", Queue: "default", Type: "cleanup"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	res, err := store.ScheduleTick(t.Context(), backend.ScheduleTickParams{Name: "report", Tick: tick,
		Job: backend.InsertParams{Queue: "reports", Type: "report.build", Payload: []byte("{}"), MaxAttempts: 3}})
	if err != nil || !res.Enqueued {
		t.Fatalf("tick: %+v, %v", res, err)
	}
	r := run(t, "--db", db, "cron", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "cleanup ") || !strings.HasPrefix(lines[2], "report ") {
		t.Fatalf("cron list:\n%s\nwant a header and cleanup, report", r.out)
	}
	if !strings.Contains(lines[1], "@every 30s") || !strings.Contains(lines[1], "never") {
		t.Errorf("cleanup line %q: want its spec and last run never", lines[1])
	}
	for _, want := range []string{"CRON_TZ=Europe/Paris 0 9 * * *", "reports", "report.build", "2026-11-30T08:00:00Z", " " + strconv.FormatInt(res.JobID, 10)} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("report line %q: want %q", lines[2], want)
		}
	}

	r = run(t, "--db", db, "cron", "list", "--json")
	var got []scheduleJSON
	if r.err != nil || json.Unmarshal([]byte(r.out), &got) != nil || len(got) != 2 {
		t.Fatalf("cron list --json: %q, %v", r.out, r.err)
	}
	rep := got[1]
	if rep.Name != "report" || rep.LastTick == nil || !rep.LastTick.Equal(tick) || rep.LastJobID != res.JobID || rep.Next == nil {
		t.Fatalf("report as JSON: %+v", rep)
	}
	// The next 09:00 in Paris, after now.
	if h := rep.Next.In(mustZone(t, "Europe/Paris")).Hour(); h != 9 || !rep.Next.After(time.Now()) {
		t.Errorf("next run %v: want a future 09:00 Paris time", rep.Next)
	}
	if got[0].LastTick != nil || got[0].LastJobID != 0 {
		t.Errorf("cleanup as JSON: %+v, want no last tick", got[0])
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	return loc
}

// TestCronListReadOnly: listing never creates a store, and bad command
// lines are one-line usage errors.
func TestCronListReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.db")
	r := run(t, "--db", "sqlite:"+path, "cron", "list")
	if r.code() != 1 || !strings.Contains(r.err.Error(), "jobq migrate") {
		t.Fatalf("cron list on a missing file: exit %d, %v; want 1 naming jobq migrate", r.code(), r.err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("cron list created %s (%v)", path, err)
	}
	for _, args := range [][]string{{"cron"}, {"cron", "list", "extra"}, {"cron", "bogus"}, {"--db", "memory:", "cron", "list"}} {
		r := run(t, args...)
		if r.code() != 2 || strings.Count(r.err.Error(), "\n") > 0 {
			t.Errorf("jobq %v: exit %d, %v; want 2 with one line", args, r.code(), r.err)
		}
	}
}
