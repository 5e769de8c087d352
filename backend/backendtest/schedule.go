package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testSchedule specifies backend.ScheduleStore: the per-schedule
// compare-and-set of the last tick that makes every tick of a periodic
// schedule enqueue exactly once, however many schedulers call it.
func testSchedule(t *testing.T, h Harness) {
	parallel(t, h, "UpsertAndList", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		start := time.Now()
		rows := upsert(t, s, def("b-report", "0 9 * * *"), def("a-cleanup", "@every 30s"))
		if len(rows) != 2 || rows[0].Name != "b-report" || rows[1].Name != "a-cleanup" {
			t.Fatalf("ScheduleUpsert rows = %+v, want b-report then a-cleanup (the order of defs)", rows)
		}
		for _, r := range rows {
			if !r.LastTick.IsZero() || r.LastJobID != 0 || !r.LastEnqueuedAt.IsZero() {
				t.Errorf("new schedule %s has a last tick: %+v", r.Name, r)
			}
			near(t, r.Name+" CreatedAt", r.CreatedAt, start, skew)
			near(t, r.Name+" RegisteredAt", r.RegisteredAt, start, skew)
		}
		list := scheduleList(t, s)
		if len(list) != 2 || list[0].Name != "a-cleanup" || list[1].Name != "b-report" {
			t.Fatalf("ScheduleList = %+v, want a-cleanup, b-report (by name)", list)
		}
		if got := list[1]; got.Spec != "0 9 * * *" || got.Queue != "cron" || got.Type != "b-report.job" {
			t.Fatalf("ScheduleList[1] = %+v, want the definition given", got)
		}

		// A re-registration changes the definition, keeps the creation
		// time and the last tick.
		tick := time.Now().Truncate(time.Second)
		if r := tickOnce(t, s, "b-report", tick); !r.Enqueued {
			t.Fatalf("first tick not enqueued: %+v", r)
		}
		time.Sleep(5 * time.Millisecond)
		changed := def("b-report", "0 10 * * *")
		changed.Queue = "other"
		again := upsert(t, s, changed)[0]
		if again.Spec != "0 10 * * *" || again.Queue != "other" {
			t.Errorf("re-registered schedule = %+v, want the new spec and queue", again)
		}
		if !again.CreatedAt.Equal(rows[0].CreatedAt) {
			t.Errorf("re-registration moved CreatedAt from %v to %v", rows[0].CreatedAt, again.CreatedAt)
		}
		if !again.LastTick.Equal(tick) || again.LastJobID == 0 {
			t.Errorf("re-registration lost the last tick: %+v, want LastTick %v", again, tick)
		}
		if again.RegisteredAt.Before(rows[0].RegisteredAt) {
			t.Errorf("RegisteredAt went back from %v to %v", rows[0].RegisteredAt, again.RegisteredAt)
		}
		if list := scheduleList(t, s); len(list) != 2 {
			t.Errorf("ScheduleList after re-registration = %+v, want still 2 schedules", list)
		}
		// The tick taken before the queue changed stays taken.
		moved := tickParams("b-report", tick)
		moved.Job.Queue = "other"
		if r, err := s.ScheduleTick(t.Context(), moved); err != nil || r.Enqueued {
			t.Fatalf("the last tick again, after the queue changed: %+v, %v; want refused", r, err)
		}
		wantStats(t, b, backend.QueueStats{Queue: "cron", Pending: 1})
		wantStats(t, b, backend.QueueStats{Queue: "other"})
	})

	parallel(t, h, "EmptyList", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		if list := scheduleList(t, s); len(list) != 0 {
			t.Fatalf("ScheduleList on a new store = %+v, want none", list)
		}
		if rows, err := s.ScheduleUpsert(t.Context(), nil); err != nil || len(rows) != 0 {
			t.Fatalf("ScheduleUpsert(nil) = %v, %v; want nothing", rows, err)
		}
	})

	parallel(t, h, "TickEnqueuesJob", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		upsert(t, s, def("nightly", "0 3 * * *"))
		tick := time.Now().Add(-time.Minute).Truncate(time.Second)
		p := tickParams("nightly", tick)
		p.Job.Priority = 7
		p.Job.MaxAttempts = 5
		p.Job.Metadata = map[string]string{"jobq-schedule": "nightly"}
		before := time.Now()
		res, err := s.ScheduleTick(t.Context(), p)
		if err != nil {
			t.Fatalf("ScheduleTick: %v", err)
		}
		if !res.Enqueued || res.JobID == 0 || !res.LastTick.Equal(tick) {
			t.Fatalf("ScheduleTick = %+v, want enqueued with LastTick %v", res, tick)
		}
		// The tick's job exists, as given, and is due now.
		j := get(t, b, res.JobID)
		if j.Queue != "cron" || j.Type != "nightly.job" || !jsonEqual(j.Payload, p.Job.Payload) ||
			j.Priority != 7 || j.MaxAttempts != 5 || j.Status != backend.StatePending || j.Metadata["jobq-schedule"] != "nightly" {
			t.Fatalf("tick's job = %+v, want the params given", j)
		}
		near(t, "job AvailableAt", j.AvailableAt, before, skew)
		// The tick is recorded with its job.
		r := scheduleRow(t, s, "nightly")
		if !r.LastTick.Equal(tick) || r.LastJobID != res.JobID {
			t.Fatalf("schedule after tick = %+v, want LastTick %v and LastJobID %d", r, tick, res.JobID)
		}
		near(t, "LastEnqueuedAt", r.LastEnqueuedAt, before, skew)
		if got := claimOne(t, b, "cron"); got.ID != res.JobID {
			t.Fatalf("claimed job %d, want the tick's %d", got.ID, res.JobID)
		}
	})

	parallel(t, h, "OlderOrEqualRefused", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		upsert(t, s, def("hourly", "0 * * * *"))
		t1 := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
		first := tickOnce(t, s, "hourly", t1)
		if !first.Enqueued {
			t.Fatalf("first tick refused: %+v", first)
		}
		for _, tick := range []time.Time{t1, t1.Add(-time.Hour), t1.Add(-time.Microsecond), t1.In(time.FixedZone("X", 3600))} {
			r := tickOnce(t, s, "hourly", tick)
			if r.Enqueued || r.JobID != 0 {
				t.Fatalf("tick %v after %v: %+v, want refused", tick, t1, r)
			}
			if !r.LastTick.Equal(t1) {
				t.Fatalf("refused tick %v: LastTick %v, want %v", tick, r.LastTick, t1)
			}
		}
		wantStats(t, b, backend.QueueStats{Queue: "cron", Pending: 1})
		if r := scheduleRow(t, s, "hourly"); !r.LastTick.Equal(t1) || r.LastJobID != first.JobID {
			t.Fatalf("schedule after refused ticks = %+v, want LastTick %v, job %d", r, t1, first.JobID)
		}
		// A later tick goes in after an earlier one.
		t2 := t1.Add(time.Hour)
		second := tickOnce(t, s, "hourly", t2)
		if !second.Enqueued || second.JobID == first.JobID || !second.LastTick.Equal(t2) {
			t.Fatalf("later tick: %+v, want enqueued", second)
		}
		wantStats(t, b, backend.QueueStats{Queue: "cron", Pending: 2})
		if r := scheduleRow(t, s, "hourly"); !r.LastTick.Equal(t2) || r.LastJobID != second.JobID {
			t.Fatalf("schedule after later tick = %+v, want LastTick %v, job %d", r, t2, second.JobID)
		}
	})

	parallel(t, h, "TickStaysTakenAfterJobEnds", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		upsert(t, s, def("daily", "@daily"))
		tick := time.Date(2030, 5, 6, 0, 0, 0, 0, time.UTC)
		if r := tickOnce(t, s, "daily", tick); !r.Enqueued {
			t.Fatalf("tick refused: %+v", r)
		}
		j := claimOne(t, b, "cron")
		completeFresh(t, b, done(j.Ref()))
		gone(t, b, j.ID)
		if r := tickOnce(t, s, "daily", tick); r.Enqueued {
			t.Fatalf("the same tick was enqueued again after its job finished: %+v", r)
		}
		wantNoStats(t, b)
	})

	parallel(t, h, "ConcurrentCallersOnce", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		upsert(t, s, def("every-second", "@every 1s"), def("other", "@every 1s"))
		const callers, ticks = 8, 5
		base := time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)
		var (
			mu       sync.Mutex
			enqueued = map[string][]int64{} // "name tick" -> job IDs
			errs     []error
			wg       sync.WaitGroup
		)
		for c := range callers {
			wg.Go(func() {
				for k := range ticks {
					for _, name := range []string{"every-second", "other"} {
						tick := base.Add(time.Duration(k) * time.Second)
						// Half the callers see the clock of a zone:
						// ticks are instants, not wall times.
						if c%2 == 1 {
							tick = tick.In(time.FixedZone("Y", -5*3600))
						}
						r, err := s.ScheduleTick(t.Context(), tickParams(name, tick))
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						} else if r.Enqueued {
							key := fmt.Sprintf("%s %d", name, k)
							enqueued[key] = append(enqueued[key], r.JobID)
						}
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent ScheduleTick: %v", err)
		}
		for _, name := range []string{"every-second", "other"} {
			for k := range ticks {
				key := fmt.Sprintf("%s %d", name, k)
				if got := enqueued[key]; len(got) != 1 {
					t.Errorf("tick %s enqueued by %d callers (jobs %v), want exactly 1", key, len(got), got)
				}
			}
		}
		wantStats(t, b, backend.QueueStats{Queue: "cron", Pending: 2 * ticks})
		last := base.Add((ticks - 1) * time.Second)
		for _, r := range scheduleList(t, s) {
			if !r.LastTick.Equal(last) {
				t.Errorf("schedule %s LastTick = %v, want %v", r.Name, r.LastTick, last)
			}
			if ids := enqueued[fmt.Sprintf("%s %d", r.Name, ticks-1)]; len(ids) == 1 && r.LastJobID != ids[0] {
				t.Errorf("schedule %s LastJobID = %d, want %d (the last tick's job)", r.Name, r.LastJobID, ids[0])
			}
		}
	})

	parallel(t, h, "RefusedWritesNothing", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		// An unknown schedule: ErrNotFound, and no job without its tick.
		_, err := s.ScheduleTick(t.Context(), tickParams("never-registered", time.Now()))
		if !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("tick of an unknown schedule: %v, want ErrNotFound", err)
		}
		wantNoStats(t, b)
		if list := scheduleList(t, s); len(list) != 0 {
			t.Fatalf("a refused tick created a schedule: %+v", list)
		}

		upsert(t, s, def("bad-jobs", "@hourly"))
		tick := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		// A job the store refuses: no tick recorded without its job.
		keyed := tickParams("bad-jobs", tick)
		keyed.Job.UniqueKey = "k"
		_, err = s.ScheduleTick(t.Context(), keyed)
		wantInvalid(t, err, "unique key")
		badQueue := tickParams("bad-jobs", tick)
		badQueue.Job.Queue = "no spaces allowed"
		_, err = s.ScheduleTick(t.Context(), badQueue)
		wantInvalid(t, err, "queue")
		_, err = s.ScheduleTick(t.Context(), tickParams("bad-jobs", time.Time{}))
		wantInvalid(t, err, "schedule tick")
		if r := scheduleRow(t, s, "bad-jobs"); !r.LastTick.IsZero() || r.LastJobID != 0 {
			t.Fatalf("refused ticks recorded a tick: %+v", r)
		}
		wantNoStats(t, b)
		// The tick is still free for a valid job.
		if r := tickOnce(t, s, "bad-jobs", tick); !r.Enqueued {
			t.Fatalf("valid tick after refused ones: %+v, want enqueued", r)
		}
	})

	parallel(t, h, "InvalidDefinition", func(t *testing.T, b backend.Backend) {
		s := scheduleStore(t, b)
		for _, d := range []struct {
			def   backend.ScheduleDef
			field string
		}{
			{backend.ScheduleDef{Name: "", Spec: "@daily", Queue: "q", Type: "t"}, "schedule name"},
			{backend.ScheduleDef{Name: "has space", Spec: "@daily", Queue: "q", Type: "t"}, "schedule name"},
			{backend.ScheduleDef{Name: "ok", Spec: "", Queue: "q", Type: "t"}, "schedule spec"},
			{backend.ScheduleDef{Name: "ok", Spec: "@daily", Queue: "", Type: "t"}, "queue"},
			{backend.ScheduleDef{Name: "ok", Spec: "@daily", Queue: "q", Type: ""}, "schedule type"},
			{backend.ScheduleDef{Name: "ok", Spec: "@daily", Queue: "q", Type: "t\xff"}, "schedule type"},
			{backend.ScheduleDef{Name: "ok", Spec: "@daily\xff", Queue: "q", Type: "t"}, "schedule spec"},
			{backend.ScheduleDef{Name: "ok", Spec: "@daily\x00", Queue: "q", Type: "t"}, "schedule spec"},
		} {
			// A bad definition among good ones registers none of them.
			_, err := s.ScheduleUpsert(t.Context(), []backend.ScheduleDef{def("good", "@daily"), d.def})
			wantInvalid(t, err, d.field)
		}
		if list := scheduleList(t, s); len(list) != 0 {
			t.Fatalf("refused definitions were stored: %+v", list)
		}
	})
}

// scheduleStore returns b's ScheduleStore; every durable backend and the
// memory backend have one.
func scheduleStore(t *testing.T, b backend.Backend) backend.ScheduleStore {
	t.Helper()
	s, ok := b.(backend.ScheduleStore)
	if !ok {
		t.Fatalf("%T does not implement backend.ScheduleStore", b)
	}
	return s
}

// def is a valid definition named name with spec, enqueueing "NAME.job"
// jobs on queue "cron".
func def(name, spec string) backend.ScheduleDef {
	return backend.ScheduleDef{Name: name, Spec: spec, Queue: "cron", Type: name + ".job"}
}

// tickParams asks to enqueue tick of schedule name with a job on "cron".
func tickParams(name string, tick time.Time) backend.ScheduleTickParams {
	return backend.ScheduleTickParams{Name: name, Tick: tick, Job: job("cron", name+".job")}
}

func upsert(t *testing.T, s backend.ScheduleStore, defs ...backend.ScheduleDef) []backend.ScheduleRow {
	t.Helper()
	rows, err := s.ScheduleUpsert(t.Context(), defs)
	if err != nil {
		t.Fatalf("ScheduleUpsert: %v", err)
	}
	if len(rows) != len(defs) {
		t.Fatalf("ScheduleUpsert returned %d rows for %d defs", len(rows), len(defs))
	}
	return rows
}

func tickOnce(t *testing.T, s backend.ScheduleStore, name string, tick time.Time) backend.ScheduleTickResult {
	t.Helper()
	r, err := s.ScheduleTick(t.Context(), tickParams(name, tick))
	if err != nil {
		t.Fatalf("ScheduleTick(%s, %v): %v", name, tick, err)
	}
	return r
}

func scheduleList(t *testing.T, s backend.ScheduleStore) []backend.ScheduleRow {
	t.Helper()
	list, err := s.ScheduleList(t.Context())
	if err != nil {
		t.Fatalf("ScheduleList: %v", err)
	}
	return list
}

func scheduleRow(t *testing.T, s backend.ScheduleStore, name string) backend.ScheduleRow {
	t.Helper()
	for _, r := range scheduleList(t, s) {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("schedule %s is not listed", name)
	return backend.ScheduleRow{}
}
