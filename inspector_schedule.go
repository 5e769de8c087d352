package jobq

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// ScheduleRow is one stored schedule, re-exported from the backend.
type ScheduleRow = backend.ScheduleRow

// ScheduleInfo is a stored schedule with its next tick.
type ScheduleInfo struct {
	ScheduleRow
	// Next is the schedule's next tick after the time of the call, by
	// this process's clock; zero when its spec never fires again or
	// cannot be read by this build (a newer jobq registered it).
	Next time.Time
}

// Schedules lists every schedule the workers registered, by name, with
// the next and the last tick. It fails with ErrNotSupported on a backend
// that keeps no schedules (sync).
func (i *Inspector) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	store, err := i.scheduleStore("list schedules")
	if err != nil {
		return nil, err
	}
	rows, err := store.ScheduleList(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]ScheduleInfo, len(rows))
	for k, r := range rows {
		out[k] = ScheduleInfo{ScheduleRow: r}
		if s, _, err := parseSpec(r.Spec, ""); err == nil {
			out[k].Next = s.next(now)
		}
	}
	return out, nil
}

// Schedule returns one schedule by name, or ErrNotFound.
func (i *Inspector) Schedule(ctx context.Context, name string) (ScheduleInfo, error) {
	all, err := i.Schedules(ctx)
	if err != nil {
		return ScheduleInfo{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return ScheduleInfo{}, fmt.Errorf("schedule %s: %w", name, ErrNotFound)
}

// scheduleStore returns the backend's schedule store, or the error saying
// it has none.
func (i *Inspector) scheduleStore(op string) (backend.ScheduleStore, error) {
	if s, ok := backend.As[backend.ScheduleStore](i.b); ok {
		return s, nil
	}
	if _, inline := backend.As[backend.Inline](i.b); inline {
		return nil, fmt.Errorf("%s: the sync backend runs jobs inside Enqueue and keeps no schedules: %w", op, ErrNotSupported)
	}
	return nil, fmt.Errorf("%s: %T keeps no schedules: %w", op, i.b, ErrNotSupported)
}
