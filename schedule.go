package jobq

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jobq/jobq/backend"
)

// Schedule enqueues a job periodically: at every tick of Spec, one job of
// Type with Payload, whatever the number of worker processes running it
// (see WorkerConfig.Schedules).
type Schedule struct {
	// Name identifies the schedule across every process sharing the
	// backend: processes registering the same name share its ticks, each
	// enqueued once. Rules as for queue names.
	Name string
	// Spec is a cron expression of five fields (minute hour day-of-month
	// month day-of-week, e.g. "0 9 * * 1-5"), or six with seconds first,
	// or a descriptor: @yearly, @monthly, @weekly, @daily, @hourly, or
	// @every with a duration of at least one second ("@every 30s"). A
	// "CRON_TZ=Europe/Paris " prefix sets the time zone (as TimeZone does).
	// @every ticks at multiples of its interval since the Unix epoch, so
	// @every 1h ticks on the hour.
	Spec string
	// TimeZone is the IANA zone the expression's times are in. Defaults
	// to UTC (never the machine's local zone, which may differ between
	// workers).
	TimeZone string
	// Type and Payload are the job's, as for Client.Enqueue. The payload
	// is marshalled once, when the worker is created.
	Type    string
	Payload any
	// Options set the job's Queue, Priority, MaxAttempts and Metadata.
	// UniqueKey and RunAt are refused: the tick makes the job unique and
	// decides when it runs. Delay is allowed.
	Options []EnqueueOption
}

// Metadata keys the scheduler adds to every job it enqueues, so a handler
// can tell which schedule and tick it serves.
const (
	MetadataSchedule = "jobq-schedule" // the schedule's name
	MetadataTick     = "jobq-tick"     // the tick's time, RFC 3339 in UTC
)

// cronEntry is one checked schedule, ready to tick.
type cronEntry struct {
	def   backend.ScheduleDef
	sched tickSchedule
	job   backend.InsertParams // the template; metadata is copied per tick
}

// checkSchedules validates and prepares schedules for a worker on b with
// registry reg. It returns nil entries for none.
func checkSchedules(b backend.Backend, reg *Registry, schedules []Schedule) ([]*cronEntry, error) {
	if len(schedules) == 0 {
		return nil, nil
	}
	if _, ok := backend.As[backend.ScheduleStore](b); !ok {
		return nil, fmt.Errorf("WorkerConfig.Schedules: %T keeps no schedules: %w", b, ErrNotSupported)
	}
	// The client that checks each schedule's job as Enqueue would, with
	// its defaults.
	c, err := NewClient(b, ClientConfig{Registry: reg})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := make([]*cronEntry, 0, len(schedules))
	for i, s := range schedules {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: WorkerConfig.Schedules[%d] (%q): %s", ErrInvalidInput, i, s.Name, fmt.Sprintf(format, args...))
		}
		if seen[s.Name] {
			return nil, bad("the name is used twice")
		}
		seen[s.Name] = true
		if s.TimeZone != "" {
			if _, err := time.LoadLocation(s.TimeZone); err != nil {
				return nil, bad("time zone: %v", err)
			}
		}
		sched, spec, err := parseSpec(s.Spec, s.TimeZone)
		if err != nil {
			return nil, bad("%v", err)
		}
		if sched.next(time.Now()).IsZero() {
			return nil, bad("spec %q never fires", s.Spec)
		}
		_, p, err := c.param(context.Background(), JobSpec{Type: s.Type, Payload: s.Payload, Options: s.Options})
		if err != nil {
			return nil, fmt.Errorf("WorkerConfig.Schedules[%d] (%q): %w", i, s.Name, err)
		}
		if p.UniqueKey != "" || !p.RunAt.IsZero() {
			return nil, bad("UniqueKey and RunAt do not apply to a scheduled job (the tick makes it unique and decides when it runs)")
		}
		def := backend.ScheduleDef{Name: s.Name, Spec: spec, Queue: p.Queue, Type: p.Type}
		if err := backend.ValidateScheduleDef(def); err != nil {
			return nil, fmt.Errorf("WorkerConfig.Schedules[%d]: %w", i, err)
		}
		out = append(out, &cronEntry{def: def, sched: sched, job: p})
	}
	return out, nil
}

// tickJob is the entry's job for one tick.
func (e *cronEntry) tickJob(tick time.Time) backend.InsertParams {
	p := e.job
	p.Metadata = make(map[string]string, len(e.job.Metadata)+2)
	maps.Copy(p.Metadata, e.job.Metadata)
	p.Metadata[MetadataSchedule] = e.def.Name
	p.Metadata[MetadataTick] = tick.UTC().Format(time.RFC3339)
	return p
}
