package redis

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestDeadlineText: the error text the scripts give an expired job is
// backend.DeadlineError of its deadline, to the byte, for deadlines of
// any year a job may have (leap days, centuries, the last µs of a second
// and of 9999), and its prefix is the Go constant.
func TestDeadlineText(t *testing.T) {
	want := "local DEADLINE_PREFIX = '" + backend.DeadlineErrorPrefix + "'"
	if !strings.Contains(scriptsSource, want) {
		t.Fatalf("scripts.lua does not define %q", want)
	}
	b := openTest(t, Options{})
	s := newScript("deadlinetext", withHelpers(`
local out = {}
for i = 1, #ARGV do out[i] = deadline_text(ARGV[i]) end
return out`))
	times := []time.Time{
		time.Unix(0, 0),
		time.Unix(1, 999999000),
		time.Date(2000, 2, 29, 23, 59, 59, 999999000, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 12, 31, 12, 0, 0, 500000, time.UTC),
		time.Date(2255, 6, 1, 1, 2, 3, 4000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		times = append(times, time.UnixMicro(rng.Int64N(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro())))
	}
	args := make([]any, len(times))
	for i, tm := range times {
		args[i] = micro(tm)
	}
	res, err := b.c.eval(t.Context(), s, []string{b.keys.queue("q").lastTS}, args)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := res.([]any)
	for i, tm := range times {
		if want := backend.DeadlineError(tm); i >= len(got) || got[i] != want {
			t.Errorf("deadline_text(%s) in Lua = %v, want %q", args[i], got[i], want)
		}
	}
}
