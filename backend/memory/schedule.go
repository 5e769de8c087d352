package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jobq/jobq/backend"
)

var _ backend.ScheduleStore = (*Backend)(nil)

// ScheduleUpsert implements backend.ScheduleStore.
func (b *Backend) ScheduleUpsert(ctx context.Context, defs []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	const op = "register schedules"
	for _, d := range defs {
		if err := backend.ValidateScheduleDef(d); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if b.schedules == nil {
		b.schedules = map[string]*backend.ScheduleRow{}
	}
	now := b.now()
	out := make([]backend.ScheduleRow, len(defs))
	for i, d := range defs {
		s, ok := b.schedules[d.Name]
		if !ok {
			s = &backend.ScheduleRow{Name: d.Name, CreatedAt: now}
			b.schedules[d.Name] = s
		}
		s.Spec, s.Queue, s.Type, s.RegisteredAt = d.Spec, d.Queue, d.Type, now
		out[i] = *s
	}
	return out, nil
}

// ScheduleTick implements backend.ScheduleStore: the check, the insert and
// the advance happen under the backend's one mutex.
func (b *Backend) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	op := fmt.Sprintf("enqueue tick of schedule %s", p.Name)
	if err := backend.ValidateScheduleTick(p); err != nil {
		return backend.ScheduleTickResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return backend.ScheduleTickResult{}, err
	}
	defer b.mu.Unlock()
	s, ok := b.schedules[p.Name]
	if !ok {
		return backend.ScheduleTickResult{}, fmt.Errorf("%s: %w (a scheduler registers it first)", op, backend.ErrNotFound)
	}
	if !s.LastTick.IsZero() && !s.LastTick.Before(p.Tick) {
		return backend.ScheduleTickResult{LastTick: s.LastTick}, nil
	}
	now := b.now()
	j := p.Job
	b.lastJobID++
	row := &backend.JobRow{
		ID:          b.lastJobID,
		Queue:       j.Queue,
		Type:        j.Type,
		Payload:     append([]byte(nil), j.Payload...),
		MaxAttempts: j.MaxAttempts,
		Priority:    j.Priority,
		Status:      backend.StatePending,
		AvailableAt: j.AvailableAt(now),
		CreatedAt:   now,
		Metadata:    cloneMetadata(j.Metadata),
		Key:         j.Key,
	}
	b.addPending(row, now)
	s.LastTick, s.LastEnqueuedAt, s.LastJobID = p.Tick, now, row.ID
	b.wake(map[string]bool{j.Queue: true})
	return backend.ScheduleTickResult{Enqueued: true, JobID: row.ID, LastTick: p.Tick}, nil
}

// ScheduleList implements backend.ScheduleStore.
func (b *Backend) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	if err := b.lock(ctx, "list schedules"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	out := make([]backend.ScheduleRow, 0, len(b.schedules))
	for _, s := range b.schedules {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y backend.ScheduleRow) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
