package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jobq/jobq/backend"
)

// matcher is a failed-jobs filter resolved against the backend's clock.
type matcher struct {
	filter backend.FailedFilter
	cutoff time.Time // the earlier of FailedBefore and now - OlderThan; zero: none
	// hold tells the queues whose keys are ordered under KeyHold, for
	// KeepHeld.
	hold func(queue string) bool
}

// matcher resolves filter's time bound now, on the backend's clock
// (Options.Now). The caller validated filter (backend.ValidateFilter).
func (b *Backend) matcher(filter backend.FailedFilter) matcher {
	return matcher{filter: filter, cutoff: filter.Cutoff(b.now()), hold: func(queue string) bool {
		return b.rules(queue).Policy() == backend.KeyHold
	}}
}

// matches reports whether f passes the filter; zero fields match everything.
func (m matcher) matches(f *backend.FailedJob) bool {
	return (m.filter.Queue == "" || f.Queue == m.filter.Queue) &&
		(m.filter.Type == "" || f.Type == m.filter.Type) &&
		(m.filter.Key == "" || f.Key == m.filter.Key) &&
		(m.cutoff.IsZero() || f.FailedAt.Before(m.cutoff)) &&
		!(m.filter.KeepHeld && f.Key != "" && m.hold(f.Queue))
}

// FailedList implements backend.Backend.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err == nil {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	if err := b.lock(ctx, "list failed jobs"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	m := b.matcher(params.Filter)
	end := len(b.failed)
	if params.BeforeID > 0 {
		end = sort.Search(len(b.failed), func(i int) bool { return b.failed[i].ID >= params.BeforeID })
	}
	var out []*backend.FailedJob
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		if f := b.failed[i]; m.matches(f) {
			out = append(out, cloneFailed(f))
		}
	}
	return out, nil
}

// FailedGet implements backend.Backend: jobID is the job's ID.
func (b *Backend) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	if err := b.lock(ctx, fmt.Sprintf("get failed job %d", jobID)); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	f, ok := b.failedByJob[jobID]
	if !ok {
		return nil, fmt.Errorf("get failed job %d: %w", jobID, backend.ErrNotFound)
	}
	return cloneFailed(f), nil
}

// selectFailed returns the failed jobs whose job IDs are ids, or matching
// filter when ids is empty, in the order they failed. An unknown ID is
// ErrNotFound. Called with b.mu held.
func (b *Backend) selectFailed(ids []int64, filter backend.FailedFilter, op string) ([]*backend.FailedJob, error) {
	if len(ids) == 0 {
		m := b.matcher(filter)
		var out []*backend.FailedJob
		for _, f := range b.failed {
			if m.matches(f) {
				out = append(out, f)
			}
		}
		return out, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]*backend.FailedJob, 0, len(ids))
	for _, id := range ids {
		f, ok := b.failedByJob[id]
		if !ok {
			return nil, fmt.Errorf("%s %d: %w", op, id, backend.ErrNotFound)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(x, y *backend.FailedJob) int { return cmp.Compare(x.ID, y.ID) })
	return out, nil
}

// removeFailed deletes rows from failed_jobs.
func (b *Backend) removeFailed(rows []*backend.FailedJob) {
	if len(rows) == 0 {
		return
	}
	gone := make(map[int64]bool, len(rows))
	for _, f := range rows {
		gone[f.ID] = true
		delete(b.failedByJob, f.JobID)
		// A failed task of a cancelled workflow is never replayed (and
		// a pruned workflow with failed rows left was cancelled): once its
		// failed row is gone, so is the last use of its task entry (see
		// WorkflowPrune), whether the workflow was pruned yet or not.
		if t := b.wf.byJob[f.JobID]; t != nil && t.wf.state == backend.WorkflowCancelled {
			delete(b.wf.byJob, f.JobID)
		}
		b.queue(f.Queue).failed--
		if f.Key != "" {
			// A held key goes on once its failed head is gone.
			if k, ok := b.queue(f.Queue).keys[f.Key]; ok {
				k.failed--
				b.queue(f.Queue).touch(k)
				b.dropKeyIfEmpty(f.Queue, f.Key)
			}
			b.wakeOne(f.Queue)
		}
		b.dropIfEmpty(f.Queue)
	}
	b.failed = slices.DeleteFunc(b.failed, func(f *backend.FailedJob) bool { return gone[f.ID] })
	if c := cap(b.failed); c > 64 && len(b.failed) < c/4 {
		b.failed = slices.Clip(slices.Clone(b.failed))
	}
}

// FailedReplay implements backend.Backend. Job IDs not among the failed
// jobs fail the whole call before anything moves.
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	if err := backend.ValidateFilter(params.Filter); err != nil {
		return backend.ReplayResult{}, fmt.Errorf("replay failed jobs: %w", err)
	}
	if err := b.lock(ctx, "replay failed jobs"); err != nil {
		return backend.ReplayResult{}, err
	}
	defer b.mu.Unlock()
	rows, err := b.selectFailed(params.IDs, params.Filter, "replay failed job")
	if err != nil {
		return backend.ReplayResult{}, err
	}
	now := b.now()
	var res backend.ReplayResult
	var moved []*backend.FailedJob
	woken := map[string]bool{}
	byType := map[backend.TypeCount]int{}
	for _, f := range rows {
		if h, held := b.unique[f.UniqueKey]; f.UniqueKey != "" && held && b.keeps(h, &backend.InsertParams{}, now) {
			res.Skipped++
			continue
		}
		// A task of a workflow a user cancelled stays failed for good.
		if b.taskReplayRefused(f.JobID) {
			res.Skipped++
			continue
		}
		j := &backend.JobRow{
			ID:          f.JobID,
			Queue:       f.Queue,
			Type:        f.Type,
			Payload:     f.Payload,
			MaxAttempts: f.MaxAttempts,
			Priority:    f.Priority,
			Status:      backend.StatePending,
			AvailableAt: now,
			CreatedAt:   f.CreatedAt,
			LastError:   f.Error,
			Errors:      f.Errors,
			UniqueKey:   f.UniqueKey,
			Metadata:    f.Metadata,
			Key:         f.Key,
			Turn:        f.Turn,
		}
		if t := b.wf.byJob[f.JobID]; t != nil {
			j.WorkflowID, j.Task = t.wf.id, t.name
		}
		b.addPending(j, now)
		// A task's job back to live reopens its task and its workflow in
		// the same critical section (a no-op for a plain job).
		b.taskReplayed(f.JobID, now)
		moved = append(moved, f)
		woken[f.Queue] = true
		byType[backend.TypeCount{Queue: f.Queue, Type: f.Type}]++
		res.Replayed++
	}
	for k, n := range byType {
		k.Count = n
		res.ByType = append(res.ByType, k)
	}
	b.removeFailed(moved)
	b.wake(woken)
	return res, nil
}

// FailedPurge implements backend.Backend. Job IDs not among the failed
// jobs are not counted.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	err := backend.ValidatePurge(params)
	if err == nil {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return 0, fmt.Errorf("purge failed jobs: %w", err)
	}
	if err := b.lock(ctx, "purge failed jobs"); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	var rows []*backend.FailedJob
	if len(params.IDs) > 0 {
		ids := slices.Clone(params.IDs)
		slices.Sort(ids)
		for _, id := range slices.Compact(ids) {
			if f, ok := b.failedByJob[id]; ok {
				rows = append(rows, f)
			}
		}
	} else {
		rows, _ = b.selectFailed(nil, params.Filter, "purge failed job")
		// rows are in ascending ID order: the newest are at the end.
		rows = rows[:max(0, len(rows)-params.KeepNewest)]
	}
	b.removeFailed(rows)
	return len(rows), nil
}
