package jobq

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// specParser reads schedules: five fields (minute hour day-of-month month
// day-of-week), or six with seconds first, or a descriptor (@hourly,
// @daily, @every 30s…), optionally prefixed with CRON_TZ=Zone.
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// tickSchedule is a parsed spec: the ticks after a time.
type tickSchedule interface {
	// next returns the first tick strictly after t, zero when there is
	// none within five years.
	next(t time.Time) time.Time
}

// parseSpec parses a schedule's spec. A spec without CRON_TZ= (or TZ=)
// runs in zone (UTC when empty); one with both a prefix and a different
// zone is refused. It returns the schedule and the normalised spec, which
// always names its zone ("CRON_TZ=UTC 0 9 * * *"), so every process and
// listing reads it alike; @every specs carry no zone.
func parseSpec(spec, zone string) (tickSchedule, string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, "", fmt.Errorf("spec is empty: give a cron expression (\"0 9 * * *\") or an interval (\"@every 30s\")")
	}
	if tz, rest, ok := cutZone(spec); ok {
		if zone != "" && zone != tz {
			return nil, "", fmt.Errorf("spec %q names time zone %s but TimeZone is %s: give one", spec, tz, zone)
		}
		zone, spec = tz, strings.TrimSpace(rest)
	}
	if zone == "" {
		zone = "UTC"
	}
	if strings.HasPrefix(spec, "@every ") {
		s, err := specParser.Parse(spec)
		if err != nil {
			return nil, "", fmt.Errorf("spec %q: %w", spec, err)
		}
		d := s.(cron.ConstantDelaySchedule).Delay
		return every{d: d}, "@every " + d.String(), nil
	}
	s, err := specParser.Parse("CRON_TZ=" + zone + " " + spec)
	if err != nil {
		return nil, "", fmt.Errorf("spec %q: %w", spec, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, "", fmt.Errorf("spec %q: unsupported schedule %T", spec, s)
	}
	return zoned{s: ss}, "CRON_TZ=" + zone + " " + spec, nil
}

// cutZone splits a CRON_TZ= or TZ= prefix off spec.
func cutZone(spec string) (zone, rest string, ok bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if after, found := strings.CutPrefix(spec, p); found {
			zone, rest, _ = strings.Cut(after, " ")
			return zone, rest, true
		}
	}
	return "", spec, false
}

// every ticks at the multiples of d since the Unix epoch, so every process
// computes the same ticks whenever it started (robfig's own @every counts
// from the moment it is asked, which differs per process). @every 1h ticks
// on the hour UTC, @every 30s at :00 and :30.
type every struct{ d time.Duration }

func (e every) next(t time.Time) time.Time {
	ns, d := t.UnixNano(), e.d.Nanoseconds()
	k := ns / d
	if ns < 0 && ns%d != 0 {
		k-- // floor division before the epoch
	}
	return time.Unix(0, (k+1)*d).In(t.Location())
}

// zoned is a cron expression in a time zone: robfig's schedule, with the
// daylight-saving transitions handled the way cron does for schedules
// that name their hours (not every hour):
//
//   - a tick whose wall time falls in a spring-forward gap (02:30 when
//     clocks jump from 02:00 to 03:00) does not exist; robfig skips it for
//     that day, and zoned ticks instead at the first instant after the gap
//     (03:00), once however many of its wall times the gap swallowed;
//   - a tick whose wall time repeats when clocks fall back (02:30 twice)
//     ticks at its first occurrence only; robfig ticks at both.
//
// Schedules that run every hour (hour field '*') keep robfig's behaviour,
// which follows real time: an hourly job at :30 runs one hour after the
// last, across either transition.
type zoned struct{ s *cron.SpecSchedule }

// allHours is the Hour bitmask of '*'.
const allHours = 1<<24 - 1

func (z zoned) next(t time.Time) time.Time {
	r := z.s.Next(t)
	if z.s.Hour&allHours == allHours || z.s.Location == time.UTC {
		return r
	}
	for i := 0; !r.IsZero() && z.repeated(r) && i < 100; i++ {
		r = z.s.Next(r)
	}
	if g := z.gapTick(t, r); !g.IsZero() {
		return g
	}
	return r
}

// repeated reports whether r's wall time already occurred earlier, before
// clocks fell back.
func (z zoned) repeated(r time.Time) bool {
	r = r.In(z.s.Location)
	start, _ := r.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, cur := r.Zone()
	_, prev := start.Add(-time.Second).Zone()
	drop := time.Duration(prev-cur) * time.Second
	return drop > 0 && r.Sub(start) < drop
}

// gapTick returns the first instant after a spring-forward gap in (t,
// limit] that swallowed a wall time the spec matches, zero when none
// (limit zero: five years on).
func (z zoned) gapTick(t, limit time.Time) time.Time {
	if limit.IsZero() {
		limit = t.AddDate(5, 0, 0)
	}
	cur := t.In(z.s.Location)
	for range 20 {
		_, end := cur.ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return time.Time{}
		}
		_, before := cur.Zone()
		_, after := end.Zone()
		if gap := after - before; gap > 0 && end.After(t) {
			// Wall times [end in the old offset, + gap) never existed.
			wall := end.In(time.FixedZone("", before))
			for s := 0; s < gap; s++ {
				if z.matches(wall.Add(time.Duration(s) * time.Second)) {
					return end.In(t.Location())
				}
			}
		}
		cur = end
	}
	return time.Time{}
}

// matches reports whether the wall time of w fits every field of the spec.
func (z zoned) matches(w time.Time) bool {
	s := z.s
	bit := func(mask uint64, v int) bool { return mask&(1<<uint(v)) != 0 }
	if !bit(s.Second, w.Second()) || !bit(s.Minute, w.Minute()) || !bit(s.Hour, w.Hour()) || !bit(s.Month, int(w.Month())) {
		return false
	}
	// As robfig's dayMatches: with a '*' in either day field both must
	// match, otherwise either.
	const star = 1 << 63
	dom, dow := bit(s.Dom, w.Day()), bit(s.Dow, int(w.Weekday()))
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

// prevTick returns the latest tick at or before now, zero when there was
// none in the last eight years. It searches back from now in doubling steps,
// then forward, so it costs a few dozen next calls, not one per missed tick.
func prevTick(s tickSchedule, now time.Time) time.Time {
	for back := time.Second; back <= 9*366*24*time.Hour; back *= 2 {
		t := s.next(now.Add(-back))
		if t.IsZero() || t.After(now) {
			continue
		}
		for {
			n := s.next(t)
			if n.IsZero() || n.After(now) {
				return t
			}
			t = n
		}
	}
	return time.Time{}
}

// NextTick returns the first tick of spec after t, for listings and tests:
// spec as a Schedule takes it (CRON_TZ= prefix optional, UTC by default).
// It fails on a spec the scheduler would refuse, and returns the zero time
// for one that never fires within five years.
func NextTick(spec string, t time.Time) (time.Time, error) {
	s, _, err := parseSpec(spec, "")
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	return s.next(t), nil
}
