package backend

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// ScheduleStore is implemented by backends that keep periodic schedules
// (sqlite, postgres, redis, memory; not sync, which stores nothing). It is
// what makes a schedule's tick enqueue exactly once when every worker
// process runs the same scheduler: the store keeps, per schedule, the last
// tick enqueued, and advances it only forward, in the same transaction (or
// script) that inserts the tick's job.
//
// The runtime computes ticks from the schedule's spec; the store never
// parses a spec. Ticks are compared as instants, so processes whose clocks
// differ still agree on which tick is which.
type ScheduleStore interface {
	// ScheduleUpsert records schedule definitions so operators can list
	// them: a new name is inserted with no last tick and CreatedAt and
	// RegisteredAt set to now (backend clock); an existing one gets the
	// given spec, queue and type and RegisteredAt = now, keeping its
	// last tick. It returns the stored rows, in the order of defs. Each
	// def is validated (ValidateScheduleDef) before anything is written.
	ScheduleUpsert(ctx context.Context, defs []ScheduleDef) ([]ScheduleRow, error)

	// ScheduleTick enqueues params.Job for params.Tick if and only if the
	// schedule's stored last tick is unset or earlier than Tick: the
	// compare-and-set of the last tick and the job's insert happen in one
	// transaction, so no tick is recorded without its job nor a job
	// inserted without its tick, and of any number of concurrent callers
	// with the same or an older tick at most one enqueues. A refused tick
	// is not an error: Enqueued is false and LastTick says what the store
	// holds. A schedule that was never upserted is ErrNotFound. The job is
	// validated like JobInsertMany's items; a UniqueKey is refused
	// (ErrInvalidInput): the tick is what makes the enqueue unique.
	ScheduleTick(ctx context.Context, params ScheduleTickParams) (ScheduleTickResult, error)

	// ScheduleList returns every stored schedule, sorted by name.
	ScheduleList(ctx context.Context) ([]ScheduleRow, error)
}

// ScheduleDef is what a scheduler registers about one schedule.
type ScheduleDef struct {
	Name  string // unique across every process sharing the store
	Spec  string // the cron spec as the runtime understands it, shown by listings
	Queue string // where its jobs go
	Type  string // the job type it enqueues
}

// ScheduleRow is one stored schedule.
type ScheduleRow struct {
	Name  string
	Spec  string
	Queue string
	Type  string
	// CreatedAt is when the schedule was first registered; RegisteredAt
	// when a scheduler last registered it (at a worker's start). Both by
	// the backend's clock.
	CreatedAt    time.Time
	RegisteredAt time.Time
	// LastTick is the scheduled time of the last tick enqueued, zero when
	// none was.
	LastTick time.Time
	// LastEnqueuedAt is when that tick's job was inserted (backend clock),
	// LastJobID its ID; zero when no tick was enqueued.
	LastEnqueuedAt time.Time
	LastJobID      int64
}

// ScheduleTickParams asks to enqueue one tick of a schedule.
type ScheduleTickParams struct {
	Name string
	Tick time.Time // the tick's scheduled time; must not be zero
	Job  InsertParams
}

// ScheduleTickResult is the outcome of ScheduleTick.
type ScheduleTickResult struct {
	// Enqueued: this call recorded the tick and inserted its job, JobID.
	Enqueued bool
	JobID    int64
	// LastTick is the stored last tick: Tick when Enqueued, otherwise a
	// tick at or after it that another caller enqueued.
	LastTick time.Time
}

// MaxScheduleNameLen bounds a schedule's name (as a queue's).
const MaxScheduleNameLen = MaxQueueLen

// MaxScheduleSpecLen bounds a schedule's stored spec.
const MaxScheduleSpecLen = 512

// ValidateScheduleDef checks a definition: a name following the queue
// names' rules (1 to 128 letters, digits, '_', '-', '.' or ':'), a spec
// of 1 to 512 bytes of UTF-8 without control characters, a valid queue
// name and a type as ValidateInsert takes it.
func ValidateScheduleDef(d ScheduleDef) error {
	if err := validateScheduleName(d.Name); err != nil {
		return err
	}
	if d.Spec == "" || len(d.Spec) > MaxScheduleSpecLen {
		return &InputError{Field: "schedule spec", Reason: fmt.Sprintf("schedule %q: spec must be 1 to %d bytes", d.Name, MaxScheduleSpecLen)}
	}
	if !utf8.ValidString(d.Spec) || !printable(d.Spec) {
		return &InputError{Field: "schedule spec", Reason: fmt.Sprintf("schedule %q: spec must be UTF-8 without control characters", d.Name)}
	}
	if err := ValidateQueue(d.Queue); err != nil {
		return fmt.Errorf("schedule %q: %w", d.Name, err)
	}
	if r := typeProblem(d.Type); r != "" {
		return &InputError{Field: "schedule type", Reason: fmt.Sprintf("schedule %q: job type %s", d.Name, r)}
	}
	return nil
}

// ValidateScheduleTick checks ScheduleTick's parameters.
func ValidateScheduleTick(p ScheduleTickParams) error {
	if err := validateScheduleName(p.Name); err != nil {
		return err
	}
	if p.Tick.IsZero() {
		return &InputError{Field: "schedule tick", Reason: fmt.Sprintf("schedule %q: tick time is zero", p.Name)}
	}
	if p.Job.UniqueKey != "" {
		return &InputError{Field: "unique key", Reason: fmt.Sprintf("schedule %q: a scheduled job takes no unique key (the tick makes it unique)", p.Name)}
	}
	return ValidateInsert(p.Job)
}

// validateScheduleName applies the queue names' rules: names appear
// unquoted in command lines and admin URLs.
func validateScheduleName(name string) error {
	if !validQueue(name) {
		return &InputError{Field: "schedule name", Reason: fmt.Sprintf("%q: use 1 to %d letters, digits, '_', '-', '.' or ':', starting with a letter or digit", Shorten(name, 64), MaxScheduleNameLen)}
	}
	return nil
}
