package jobq

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpecZones(t *testing.T) {
	for _, c := range []struct{ spec, zone, want string }{
		{"0 9 * * *", "", "CRON_TZ=UTC 0 9 * * *"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "", "CRON_TZ=Europe/Paris 0 9 * * *"},
		{"TZ=Europe/Paris 0 9 * * *", "Europe/Paris", "CRON_TZ=Europe/Paris 0 9 * * *"},
		{"0 9 * * 1-5", "America/New_York", "CRON_TZ=America/New_York 0 9 * * 1-5"},
		{"  @daily ", "", "CRON_TZ=UTC @daily"},
		{"*/10 * * * * *", "", "CRON_TZ=UTC */10 * * * * *"},
		{"@every 30s", "", "@every 30s"},
		{"@every 90m", "Europe/Paris", "@every 1h30m0s"},
	} {
		_, got, err := parseSpec(c.spec, c.zone)
		if err != nil || got != c.want {
			t.Errorf("parseSpec(%q, %q) = %q, %v; want %q", c.spec, c.zone, got, err, c.want)
		}
		// The normalised spec reads back to itself (listings parse it).
		if _, again, err := parseSpec(got, ""); err != nil || again != got {
			t.Errorf("parseSpec(%q) = %q, %v; want it unchanged", got, again, err)
		}
	}
	for _, c := range []struct{ spec, zone, want string }{
		{"", "", "empty"},
		{"0 9 * *", "", "expected"},
		{"61 * * * *", "", "above maximum"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "UTC", "give one"},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", "", "Mars/Olympus"},
		{"@every soon", "", "soon"},
	} {
		if _, _, err := parseSpec(c.spec, c.zone); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseSpec(%q, %q) error = %v; want one saying %q", c.spec, c.zone, err, c.want)
		}
	}
}

// TestEveryIsAligned: @every ticks at multiples of its interval since the
// epoch, so processes started at different moments agree on every tick.
func TestEveryIsAligned(t *testing.T) {
	s, _, err := parseSpec("@every 30s", "")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, from := range []time.Duration{0, time.Millisecond, 7*time.Second + 300*time.Millisecond, 29*time.Second + 999*time.Millisecond} {
		if got, want := s.next(base.Add(from)), base.Add(30*time.Second); !got.Equal(want) {
			t.Errorf("next(%v) = %v, want %v", base.Add(from), got, want)
		}
		if got := prevTick(s, base.Add(from)); !got.Equal(base) {
			t.Errorf("prevTick(%v) = %v, want %v", base.Add(from), got, base)
		}
	}
	// Before the epoch too (floor, not truncation toward zero).
	old := time.Date(1969, 12, 31, 23, 59, 45, 0, time.UTC)
	if got, want := s.next(old), time.Unix(0, 0); !got.Equal(want) {
		t.Errorf("next(%v) = %v, want %v", old, got, want)
	}
}

func ticks(t *testing.T, spec string, from time.Time, n int) []time.Time {
	t.Helper()
	s, _, err := parseSpec(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for range n {
		from = s.next(from)
		out = append(out, from)
	}
	return out
}

func wantTicks(t *testing.T, what string, got []time.Time, want ...time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: tick %d = %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// TestDaylightSavingParis: robfig/cron skips a daily tick whose wall time
// falls in the spring-forward gap (02:30 on 2026-03-29 in Paris does not
// exist) and ticks twice when the wall time repeats in the autumn. jobq
// ticks at the end of the gap instead, and once in the autumn.
func TestDaylightSavingParis(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	at := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, paris) }
	const daily = "CRON_TZ=Europe/Paris 30 2 * * *"

	// What robfig alone does, so this test notices if a new version
	// changes it.
	raw, err := specParser.Parse(daily)
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Next(at(time.March, 28, 12, 0)); !got.Equal(at(time.March, 30, 2, 30)) {
		t.Fatalf("robfig's next after 28 March noon = %v; the test expects its known skip of 29 March", got)
	}

	spring := ticks(t, daily, at(time.March, 28, 12, 0), 2)
	// 03:00 CEST is 01:00 UTC: the first instant after the gap.
	wantTicks(t, "daily 02:30 across the spring gap", spring,
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), at(time.March, 30, 2, 30))

	autumn := ticks(t, daily, at(time.October, 24, 12, 0), 2)
	wantTicks(t, "daily 02:30 across the autumn repeat", autumn,
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST, the first one
		at(time.October, 26, 2, 30))

	// Several wall times in the gap tick once, at its end.
	multi := ticks(t, "CRON_TZ=Europe/Paris 0,15,45 2 * * *", at(time.March, 29, 0, 0), 2)
	wantTicks(t, "three ticks in the gap", multi,
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), at(time.March, 30, 2, 0))

	// A tick right at the end of the gap is not doubled.
	edge := ticks(t, "CRON_TZ=Europe/Paris 30 2,3 * * *", at(time.March, 29, 0, 0), 3)
	wantTicks(t, "02:30 and 03:30", edge,
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), at(time.March, 29, 3, 30), at(time.March, 30, 2, 30))

	// An hourly schedule follows real time across both transitions.
	hourly := ticks(t, "CRON_TZ=Europe/Paris 30 * * * *", at(time.March, 29, 0, 0), 3)
	wantTicks(t, "hourly across the gap", hourly,
		time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC), time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC))
	hourlyAutumn := ticks(t, "CRON_TZ=Europe/Paris 30 * * * *", at(time.October, 25, 1, 45), 3)
	wantTicks(t, "hourly across the repeat", hourlyAutumn,
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC))

	// prevTick agrees with next across the gap.
	s, _, _ := parseSpec(daily, "")
	if got := prevTick(s, at(time.March, 29, 12, 0)); !got.Equal(spring[0]) {
		t.Errorf("prevTick(29 March noon) = %v, want %v", got, spring[0])
	}
}

// TestPrevTick: the latest tick at or before now, for specs dense and
// sparse.
func TestPrevTick(t *testing.T) {
	now := time.Date(2026, 7, 15, 14, 7, 30, 500, time.UTC)
	for _, c := range []struct {
		spec string
		want time.Time
	}{
		{"@every 1s", time.Date(2026, 7, 15, 14, 7, 30, 0, time.UTC)},
		{"* * * * *", time.Date(2026, 7, 15, 14, 7, 0, 0, time.UTC)},
		{"* 9 * * *", time.Date(2026, 7, 15, 9, 59, 0, 0, time.UTC)},
		{"0 9 * * *", time.Date(2026, 7, 15, 9, 0, 0, 0, time.UTC)},
		{"0 0 1 1 *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
	} {
		s, _, err := parseSpec(c.spec, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := prevTick(s, now); !got.Equal(c.want) {
			t.Errorf("prevTick(%q, %v) = %v, want %v", c.spec, now, got, c.want)
		}
	}
}
