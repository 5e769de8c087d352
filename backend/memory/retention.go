package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/backend"
)

// pruneTurn is who prunes finished jobs, until when.
type pruneTurn struct {
	holder string
	until  time.Time
}

// FinishedList implements backend.Retainer.
func (b *Backend) FinishedList(ctx context.Context, params backend.FinishedListParams) ([]*backend.FinishedJob, error) {
	const op = "list finished jobs"
	limit, err := backend.ValidateFinishedList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []*backend.FinishedJob
	for _, f := range b.finished {
		if f.State == params.State && (params.BeforeID == 0 || f.ID < params.BeforeID) &&
			matchJob(params.Filter, f.Queue, f.Type, f.Key, f.FinishedAt) {
			c := *f
			c.Payload = append([]byte(nil), f.Payload...)
			c.Metadata = cloneMetadata(f.Metadata)
			c.Result = nil
			if params.Results {
				c.Result = bytes.Clone(f.Result)
			}
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(x, y *backend.FinishedJob) int { return cmp.Compare(y.ID, x.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// FinishedPrune implements backend.Retainer.
func (b *Backend) FinishedPrune(ctx context.Context, params backend.FinishedPruneParams) (int, error) {
	const op = "prune finished jobs"
	if err := backend.ValidatePrune(params); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := b.now()
	n := 0
	for id, f := range b.finished {
		if f.State != params.State {
			continue
		}
		if age := backend.PruneAgeOf(params, f.Type); age > 0 && f.FinishedAt.Before(now.Add(-age)) {
			delete(b.finished, id)
			if f.UniqueKey != "" && b.unique[f.UniqueKey] == id {
				delete(b.unique, f.UniqueKey)
				delete(b.uniqueStates, id)
			}
			n++
		}
	}
	return n, nil
}

// JobList implements backend.Retainer.
func (b *Backend) JobList(ctx context.Context, params backend.JobListParams) ([]*backend.JobRow, error) {
	const op = "list jobs"
	limit, err := backend.ValidateJobList(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var out []*backend.JobRow
	for _, j := range b.jobs {
		if params.BeforeID > 0 && j.ID >= params.BeforeID {
			continue
		}
		var at time.Time
		switch params.State {
		case backend.StatePending:
			if j.Status != backend.StatePending || j.AvailableAt.After(now) {
				continue
			}
			at = j.AvailableAt
		case backend.StateScheduled:
			if j.Status != backend.StatePending || !j.AvailableAt.After(now) {
				continue
			}
			at = j.AvailableAt
		case backend.StateReserved:
			if j.Status == backend.StatePending {
				continue
			}
			at = j.ReservedAt
		}
		if matchJob(params.Filter, j.Queue, j.Type, j.Key, at) {
			out = append(out, cloneJob(j))
		}
	}
	slices.SortFunc(out, func(x, y *backend.JobRow) int { return cmp.Compare(y.ID, x.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// matchJob applies a JobFilter to a job's queue, type, key and listed
// time.
func matchJob(f backend.JobFilter, queue, typ, key string, at time.Time) bool {
	return (f.Queue == "" || f.Queue == queue) && (f.Type == "" || f.Type == typ) && (f.Key == "" || f.Key == key) &&
		(f.Since.IsZero() || !at.Before(f.Since)) && (f.Until.IsZero() || at.Before(f.Until))
}

// PruneTurn implements backend.Retainer; in one process the turn only
// matters between workers sharing the backend.
func (b *Backend) PruneTurn(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	if err := backend.ValidatePruneTurn(holder, ttl); err != nil {
		return false, fmt.Errorf("take prune turn: %w", err)
	}
	if err := b.lock(ctx, "take prune turn"); err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	now := b.now()
	t := &b.pruneTurn
	if t.holder != "" && t.holder != holder && now.Before(t.until) {
		return false, nil
	}
	t.holder, t.until = holder, now.Add(ttl)
	return true, nil
}
