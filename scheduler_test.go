package jobq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	gosync "sync"
)

// everySecond is a schedule enqueueing "tick" jobs on queue "cron", which
// the tests' workers do not serve, so the jobs stay to be counted.
func everySecond(name string) jobq.Schedule {
	return jobq.Schedule{Name: name, Spec: "@every 1s", Type: "tick", Payload: map[string]int{"n": 1},
		Options: []jobq.EnqueueOption{jobq.Queue("cron"), jobq.Priority(5), jobq.MaxAttempts(2)}}
}

func cronConfig(schedules ...jobq.Schedule) jobq.WorkerConfig {
	cfg := fastConfig()
	cfg.Queues = []string{"work"}
	cfg.Schedules = schedules
	return cfg
}

// claimTicks claims every job on queue "cron" and returns their ticks (the
// jobq-tick metadata), sorted.
func claimTicks(t *testing.T, b backend.Backend) []string {
	t.Helper()
	rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"cron"}, Max: 1000, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.Type != "tick" || r.Priority != 5 || r.MaxAttempts != 2 || string(r.Payload) != `{"n":1}` {
			t.Errorf("scheduled job %+v: want type tick, priority 5, 2 attempts, payload {\"n\":1}", r)
		}
		out = append(out, r.Metadata[jobq.MetadataTick])
	}
	slices.Sort(out)
	return out
}

// TestSchedulerTicksOnceAcrossWorkers: three workers on one backend with
// the same schedule enqueue each tick once.
func TestSchedulerTicksOnceAcrossWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		start := time.Now() // the bubble's clock: 2000-01-01 00:00:00 UTC
		for range 3 {
			startWorker(t, b, reg, cronConfig(everySecond("s")))
		}
		time.Sleep(10*time.Second + 500*time.Millisecond)
		synctest.Wait()
		got := claimTicks(t, b)
		var want []string
		for k := 1; k <= 10; k++ {
			want = append(want, start.Add(time.Duration(k)*time.Second).UTC().Format(time.RFC3339))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ticks enqueued = %v, want each of %v once", got, want)
		}
		info, err := jobq.NewInspector(b).Schedule(context.Background(), "s")
		if err != nil {
			t.Fatal(err)
		}
		if !info.LastTick.Equal(start.Add(10*time.Second)) || !info.Next.Equal(start.Add(11*time.Second)) || info.Spec != "@every 1s" {
			t.Fatalf("schedule = %+v, want last tick +10s, next +11s", info)
		}
	})
}

// TestSchedulerMissedTicksLatestOnce: a schedule whose last tick is an
// hour old gets only the latest missed tick when a worker starts, then
// its ticks as usual.
func TestSchedulerMissedTicksLatestOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		store := b.(backend.ScheduleStore)
		start := time.Now()
		// A previous run of the worker enqueued the tick of an hour ago.
		if _, err := store.ScheduleUpsert(context.Background(), []backend.ScheduleDef{{Name: "m", Spec: "CRON_TZ=UTC * * * * *", Queue: "cron", Type: "tick"}}); err != nil {
			t.Fatal(err)
		}
		old := backend.ScheduleTickParams{Name: "m", Tick: start.Add(-time.Hour), Job: backend.InsertParams{Queue: "old", Type: "tick", Payload: []byte("{}"), MaxAttempts: 1}}
		if _, err := store.ScheduleTick(context.Background(), old); err != nil {
			t.Fatal(err)
		}
		log := &logBuffer{}
		cfg := cronConfig(jobq.Schedule{Name: "m", Spec: "* * * * *", Type: "tick", Payload: map[string]int{"n": 1},
			Options: []jobq.EnqueueOption{jobq.Queue("cron"), jobq.Priority(5), jobq.MaxAttempts(2)}})
		cfg.Logger = log.logger()
		startWorker(t, b, jobq.NewRegistry(), cfg)
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := claimTicks(t, b), []string{start.UTC().Format(time.RFC3339)}; !slices.Equal(got, want) {
			t.Fatalf("after a restart an hour late: ticks %v, want only the latest missed one %v", got, want)
		}
		if !strings.Contains(log.String(), "skipped=59") {
			t.Errorf("log does not report the 59 skipped ticks:\n%s", log.String())
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := claimTicks(t, b), []string{start.Add(time.Minute).UTC().Format(time.RFC3339)}; !slices.Equal(got, want) {
			t.Fatalf("a minute later: ticks %v, want %v", got, want)
		}
	})
}

// TestSchedulerNewScheduleStartsAfterRegistration: a schedule seen for the
// first time does not enqueue the tick before it existed.
func TestSchedulerNewScheduleStartsAfterRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		time.Sleep(30 * time.Second) // 00:00:30: the 00:00:00 tick is past
		startWorker(t, b, jobq.NewRegistry(), cronConfig(jobq.Schedule{Name: "daily", Spec: "* * * * *", Type: "tick", Payload: map[string]int{"n": 1},
			Options: []jobq.EnqueueOption{jobq.Queue("cron"), jobq.Priority(5), jobq.MaxAttempts(2)}}))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := claimTicks(t, b); len(got) != 0 {
			t.Fatalf("ticks %v enqueued before the first one after registration", got)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := claimTicks(t, b); len(got) != 1 || got[0] != "2000-01-01T00:01:00Z" {
			t.Fatalf("ticks %v, want the 00:01:00 one", got)
		}
	})
}

// countingStore counts the schedule-store calls that reach the backend.
type countingStore struct {
	backend.Backend
	calls int
}

func (c *countingStore) ScheduleUpsert(ctx context.Context, d []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	c.calls++
	return c.Backend.(backend.ScheduleStore).ScheduleUpsert(ctx, d)
}

func (c *countingStore) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	c.calls++
	return c.Backend.(backend.ScheduleStore).ScheduleTick(ctx, p)
}

func (c *countingStore) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	c.calls++
	return c.Backend.(backend.ScheduleStore).ScheduleList(ctx)
}

// TestNoSchedulesNoScheduler: without schedules the worker starts no
// scheduler goroutine and never calls the schedule store; with one it
// runs exactly one.
func TestNoSchedulesNoScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		schedulers := func() int {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			return strings.Count(buf.String(), "jobq.(*scheduler).Run")
		}
		b := &countingStore{Backend: newMemory(t, nil)}
		stop := startWorker(t, b, jobq.NewRegistry(), cronConfig())
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := schedulers(); n != 0 || b.calls != 0 {
			t.Fatalf("without schedules: %d scheduler goroutines, %d schedule-store calls; want none", n, b.calls)
		}
		stop()
		stop = startWorker(t, b, jobq.NewRegistry(), cronConfig(everySecond("one")))
		time.Sleep(time.Second)
		synctest.Wait()
		if n := schedulers(); n != 1 {
			t.Fatalf("with a schedule: %d scheduler goroutines, want 1", n)
		}
		stop()
		if n := schedulers(); n != 0 {
			t.Fatalf("after Run returned: %d scheduler goroutines, want 0", n)
		}
	})
}

// noStore is a backend without a schedule store.
type noStore struct{ backend.Backend }

func TestNewWorkerRefusesBadSchedules(t *testing.T) {
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	good := everySecond("ok")
	for _, c := range []struct {
		name string
		s    []jobq.Schedule
		want string
	}{
		{"duplicate name", []jobq.Schedule{good, good}, "used twice"},
		{"bad name", []jobq.Schedule{{Name: "a b", Spec: "@daily", Type: "t"}}, "schedule name"},
		{"bad spec", []jobq.Schedule{{Name: "x", Spec: "0 25 * * *", Type: "t"}}, "above maximum"},
		{"never fires", []jobq.Schedule{{Name: "x", Spec: "0 0 30 2 *", Type: "t"}}, "never fires"},
		{"bad zone", []jobq.Schedule{{Name: "x", Spec: "@daily", TimeZone: "Nowhere/Town", Type: "t"}}, "Nowhere/Town"},
		{"two zones", []jobq.Schedule{{Name: "x", Spec: "CRON_TZ=Asia/Tokyo @daily", TimeZone: "UTC", Type: "t"}}, "give one"},
		{"no type", []jobq.Schedule{{Name: "x", Spec: "@daily"}}, "type"},
		{"bad payload", []jobq.Schedule{{Name: "x", Spec: "@daily", Type: "t", Payload: []byte("{nope")}}, "payload"},
		{"unique key", []jobq.Schedule{{Name: "x", Spec: "@daily", Type: "t", Options: []jobq.EnqueueOption{jobq.UniqueKey("k")}}}, "UniqueKey"},
		{"run at", []jobq.Schedule{{Name: "x", Spec: "@daily", Type: "t", Options: []jobq.EnqueueOption{jobq.RunAt(time.Now())}}}, "RunAt"},
		{"bad queue", []jobq.Schedule{{Name: "x", Spec: "@daily", Type: "t", Options: []jobq.EnqueueOption{jobq.Queue("a b")}}}, "queue"},
	} {
		_, err := jobq.NewWorker(b, reg, cronConfig(c.s...))
		if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewWorker error = %v; want ErrInvalidInput saying %q", c.name, err, c.want)
		}
	}
	_, err := jobq.NewWorker(noStore{b}, reg, cronConfig(good))
	if !errors.Is(err, jobq.ErrNotSupported) {
		t.Errorf("backend without a schedule store: NewWorker error = %v; want ErrNotSupported", err)
	}
	if _, err := jobq.NewWorker(noStore{b}, reg, cronConfig()); err != nil {
		t.Errorf("no schedules on a backend without a store: %v", err)
	}
}

// TestInspectorSchedulesUnsupported: the sync backend says it keeps no
// schedules.
func TestInspectorSchedulesUnsupported(t *testing.T) {
	_, err := jobq.NewInspector(inline.New()).Schedules(context.Background())
	if !errors.Is(err, jobq.ErrNotSupported) || !strings.Contains(err.Error(), "sync backend") {
		t.Fatalf("Schedules on sync: %v; want ErrNotSupported naming the sync backend", err)
	}
	_, err = jobq.NewInspector(newMemory(t, nil)).Schedule(context.Background(), "nope")
	if !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("Schedule(unknown) = %v; want ErrNotFound", err)
	}
}

// slowStore makes one ScheduleTick call (the stall-th) take stall.
type slowStore struct {
	backend.Backend
	mu    gosync.Mutex
	calls int
	at    int
	stall time.Duration
}

func (s *slowStore) ScheduleUpsert(ctx context.Context, d []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	return s.Backend.(backend.ScheduleStore).ScheduleUpsert(ctx, d)
}

func (s *slowStore) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	s.mu.Lock()
	s.calls++
	slow := s.calls == s.at
	s.mu.Unlock()
	if slow {
		time.Sleep(s.stall)
	}
	return s.Backend.(backend.ScheduleStore).ScheduleTick(ctx, p)
}

func (s *slowStore) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	return s.Backend.(backend.ScheduleStore).ScheduleList(ctx)
}

// lossyStore forgets its schedules at the lose-th ScheduleTick (as a
// restored database or a flushed Redis would): ticks then fail with
// ErrNotFound until the schedule is upserted again.
type lossyStore struct {
	backend.Backend
	mu           gosync.Mutex
	ticks, lose  int
	lost         bool
	reregistered int
}

func (s *lossyStore) ScheduleUpsert(ctx context.Context, d []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	s.mu.Lock()
	if s.lost {
		s.lost = false
		s.reregistered++
	}
	s.mu.Unlock()
	return s.Backend.(backend.ScheduleStore).ScheduleUpsert(ctx, d)
}

func (s *lossyStore) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	s.mu.Lock()
	s.ticks++
	if s.ticks == s.lose {
		s.lost = true
	}
	lost := s.lost
	s.mu.Unlock()
	if lost {
		return backend.ScheduleTickResult{}, fmt.Errorf("enqueue tick of schedule %s: %w", p.Name, backend.ErrNotFound)
	}
	return s.Backend.(backend.ScheduleStore).ScheduleTick(ctx, p)
}

func (s *lossyStore) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	return s.Backend.(backend.ScheduleStore).ScheduleList(ctx)
}

// TestSchedulerReregistersLostSchedule: a store that lost the schedule
// answers its ticks ErrNotFound; the scheduler registers it again and its
// ticks go on, rather than retrying a tick that can never succeed.
func TestSchedulerReregistersLostSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t, nil)
		b := &lossyStore{Backend: mem, lose: 3}
		startWorker(t, b, jobq.NewRegistry(), cronConfig(everySecond("lossy")))
		time.Sleep(10*time.Second + 500*time.Millisecond)
		synctest.Wait()
		b.mu.Lock()
		re := b.reregistered
		b.mu.Unlock()
		if re != 1 {
			t.Fatalf("re-registered %d times, want 1", re)
		}
		if got := claimTicks(t, mem); len(got) < 8 {
			t.Fatalf("%d ticks enqueued in 10 s with the schedule lost once (%v), want at least 8", len(got), got)
		}
	})
}

// TestSchedulerCatchesUpWhenLate: a running scheduler whose store stalled
// for a few ticks enqueues each of them once it can; stalled for more than
// 100 ticks, it enqueues the latest only.
func TestSchedulerCatchesUpWhenLate(t *testing.T) {
	for _, c := range []struct {
		name  string
		stall time.Duration
		run   time.Duration
		want  []int // seconds after the start
	}{
		{"few", 3500 * time.Millisecond, 10*time.Second + 500*time.Millisecond, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"many", 150 * time.Second, 153*time.Second + 500*time.Millisecond, []int{1, 2, 3, 153}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := newMemory(t, nil)
				// The third tick (at +3s) returns after the stall: it
				// is enqueued then, with the ticks missed meanwhile.
				b := &slowStore{Backend: mem, at: 3, stall: c.stall}
				start := time.Now()
				startWorker(t, b, jobq.NewRegistry(), cronConfig(everySecond("late")))
				time.Sleep(c.run)
				synctest.Wait()
				var want []string
				for _, s := range c.want {
					want = append(want, start.Add(time.Duration(s)*time.Second).UTC().Format(time.RFC3339))
				}
				if got := claimTicks(t, mem); !slices.Equal(got, want) {
					t.Fatalf("ticks %v, want %v", got, want)
				}
			})
		})
	}
}
