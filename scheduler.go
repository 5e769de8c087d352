package jobq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// Scheduler timing.
const (
	// schedulerMaxSleep bounds one sleep, so a wall-clock jump (NTP step,
	// suspended machine) is noticed within it.
	schedulerMaxSleep = time.Minute
	// schedulerRetryMin and schedulerRetryMax bound the backoff after a
	// failed registration or tick.
	schedulerRetryMin = time.Second
	schedulerRetryMax = 30 * time.Second
	// missedCountLimit bounds the count of skipped ticks a log line reports.
	missedCountLimit = 1000
	// maxCatchUp is the most ticks a running scheduler that fell behind
	// enqueues one by one; further behind, it enqueues only the latest.
	maxCatchUp = 100
)

// scheduler is the worker's periodic-jobs component: one loop that
// registers the worker's schedules in the backend, then at each tick asks
// the backend to enqueue it (backend.ScheduleStore.ScheduleTick). Every
// worker process runs one; the backend's compare-and-set of each
// schedule's last tick makes each tick enqueue once across all of them,
// so no leader is needed.
//
// Ticks come from this process's clock; they are compared in the store as
// instants, so processes whose clocks differ still agree on which tick is
// which (a process whose clock runs ahead just enqueues a tick early).
//
// Missed ticks: ticks due before this scheduler started (no worker ran
// through them) collapse into the latest, enqueued once, and the skipped
// ones are logged. A running scheduler that falls behind (a slow store, a
// paused machine) enqueues each tick it is late for, oldest first, up to
// maxCatchUp; further behind, it too enqueues only the latest. A schedule
// registered for the first time starts with the first tick after its
// registration.
type scheduler struct {
	store   backend.ScheduleStore
	entries []*cronEntry
	log     *slog.Logger
	// floor is, per entry, the latest tick known to be enqueued (by any
	// process) or, before any, the schedule's creation: only ticks after
	// it are due.
	floor []time.Time
	// retryAt is, per entry, when a failed tick is tried again.
	retryAt []time.Time
	backoff []time.Duration
	// started is when the registration succeeded: ticks at or before it
	// were missed while no scheduler ran.
	started time.Time
	onTick  func(name string, tick time.Time, res backend.ScheduleTickResult) // tests
}

func newScheduler(store backend.ScheduleStore, entries []*cronEntry, log *slog.Logger) *scheduler {
	n := len(entries)
	return &scheduler{store: store, entries: entries, log: log,
		floor: make([]time.Time, n), retryAt: make([]time.Time, n), backoff: make([]time.Duration, n)}
}

// Run registers the schedules, then enqueues their ticks until ctx ends.
func (s *scheduler) Run(ctx context.Context) {
	if !s.register(ctx) {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wake := s.pass(ctx, time.Now())
		timer.Reset(min(max(time.Until(wake), 0), schedulerMaxSleep))
	}
}

// register stores the definitions, retrying with backoff until it works
// or ctx ends (false).
func (s *scheduler) register(ctx context.Context) bool {
	defs := make([]backend.ScheduleDef, len(s.entries))
	for i, e := range s.entries {
		defs[i] = e.def
	}
	wait := schedulerRetryMin
	for {
		rows, err := s.store.ScheduleUpsert(ctx, defs)
		if err == nil {
			for i, r := range rows {
				s.floor[i] = r.CreatedAt
				if !r.LastTick.IsZero() {
					s.floor[i] = r.LastTick
				}
			}
			s.started = time.Now()
			s.log.Info("schedules registered", "schedules", len(defs))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Error("register schedules; retrying", "err", err, "in", wait)
		if !ticker.Sleep(ctx, wait) {
			return false
		}
		wait = min(2*wait, schedulerRetryMax)
	}
}

// pass enqueues every schedule's due tick and returns when the next is
// due.
func (s *scheduler) pass(ctx context.Context, now time.Time) time.Time {
	wake := now.Add(schedulerMaxSleep)
	for i, e := range s.entries {
		if now.Before(s.retryAt[i]) {
			wake = earliest(wake, s.retryAt[i])
			continue
		}
		if !s.catchUp(ctx, i, now) {
			wake = earliest(wake, s.retryAt[i])
			continue
		}
		if n := e.sched.next(now); !n.IsZero() {
			wake = earliest(wake, n)
		}
	}
	return wake
}

// catchUp enqueues entry i's ticks due by now: each in turn, or only the
// latest when they were missed before the scheduler started or are more
// than maxCatchUp. It returns false when a tick failed (retry at retryAt).
func (s *scheduler) catchUp(ctx context.Context, i int, now time.Time) bool {
	e := s.entries[i]
	for {
		t := e.sched.next(s.floor[i])
		if t.IsZero() || t.After(now) || ctx.Err() != nil {
			return true
		}
		if !t.After(s.started) || countTicks(e.sched, s.floor[i], now) >= maxCatchUp {
			if t = prevTick(e.sched, now); t.IsZero() {
				return true
			}
		}
		if !s.tick(ctx, i, t) {
			return false
		}
	}
}

// tick asks the store to enqueue entry i's tick; false when it failed and
// is to be retried at retryAt.
func (s *scheduler) tick(ctx context.Context, i int, tick time.Time) bool {
	e := s.entries[i]
	res, err := s.store.ScheduleTick(ctx, backend.ScheduleTickParams{Name: e.def.Name, Tick: tick, Job: e.tickJob(tick)})
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		s.backoff[i] = min(max(2*s.backoff[i], schedulerRetryMin), schedulerRetryMax)
		s.retryAt[i] = time.Now().Add(s.backoff[i])
		if errors.Is(err, backend.ErrNotFound) {
			// The store lost the schedule (a restored database, a
			// flushed Redis): register it again, or no retry could ever
			// succeed. Its last tick starts afresh from the store's.
			if _, uerr := s.store.ScheduleUpsert(ctx, []backend.ScheduleDef{e.def}); uerr == nil {
				s.log.Warn("schedule missing from the store; registered it again", "schedule", e.def.Name, "tick", tick)
				return false
			}
		}
		level := slog.LevelWarn
		if errors.Is(err, backend.ErrInvalidInput) || errors.Is(err, backend.ErrNotFound) {
			level = slog.LevelError
		}
		s.log.Log(ctx, level, "enqueue scheduled job; retrying", "schedule", e.def.Name, "tick", tick, "err", err, "in", s.backoff[i])
		return false
	}
	s.backoff[i], s.retryAt[i] = 0, time.Time{}
	if res.Enqueued {
		if skipped := countTicks(e.sched, s.floor[i], tick); skipped > 0 {
			s.log.Warn("missed ticks skipped: enqueued only the latest", "schedule", e.def.Name, "tick", tick,
				"skipped", skipped, "since", s.floor[i])
		}
		// Debug: a one-second schedule would log 86,400 lines a day.
		s.log.Debug("scheduled job enqueued", "schedule", e.def.Name, "tick", tick, "job_id", res.JobID, "queue", e.def.Queue, "type", e.def.Type)
	} else {
		s.log.Debug("scheduled tick already enqueued", "schedule", e.def.Name, "tick", tick, "last_tick", res.LastTick)
	}
	s.floor[i] = tick
	if res.LastTick.After(tick) {
		s.floor[i] = res.LastTick
	}
	if s.onTick != nil {
		s.onTick(e.def.Name, tick, res)
	}
	return true
}

// countTicks counts the ticks strictly between from and to, up to
// missedCountLimit.
func countTicks(s tickSchedule, from, to time.Time) int {
	n := 0
	for t := s.next(from); !t.IsZero() && t.Before(to) && n < missedCountLimit; t = s.next(t) {
		n++
	}
	return n
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
