package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jobq/jobq/backend"
)

// JobComplete implements backend.Backend. The outcomes are checked first
// (kind, delay), so a malformed batch applies none of them; their error
// texts are normalised (backend.PrepareOutcomes) like every backend's.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	outcomes, err := backend.PrepareOutcomes(params.Outcomes)
	if err != nil {
		return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w", err)
	}
	if err := b.lock(ctx, "complete jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var res backend.CompleteResult
	woken := map[string]bool{}
	for _, o := range outcomes {
		j := b.held(o.Ref)
		if j == nil {
			if c := b.cancelled(o.Ref); c != nil {
				b.finishReserved(c, backend.StateCancelled, now)
				res.Cancelled = append(res.Cancelled, o.Ref)
				continue
			}
			res.Stale = append(res.Stale, o.Ref)
			continue
		}
		switch o.Kind {
		case backend.OutcomeDone:
			if o.Keep {
				holds := b.holdsCompleted(j)
				b.finishReserved(j, backend.StateCompleted, now)
				if holds {
					b.unique[j.UniqueKey] = j.ID
					b.uniqueStates[j.ID] = backend.UniqueCompleted
				}
				// Kept in this critical section, behind the fence above:
				// a stale holder never gets here.
				b.finished[j.ID].Result = bytes.Clone(o.Result)
			} else {
				b.removeLive(j)
			}
			// A task's job that is done ends its task with its result
			// (failed and cancelled ends are hooked in toFailed and keep).
			b.taskJobEnded(j.ID, backend.TaskSucceeded, "", o.Result, now)
		case backend.OutcomeRetry, backend.OutcomeDefer:
			if o.Kind == backend.OutcomeDefer {
				j.Attempts--
			} else {
				recordError(j, o.Error, o.Duration, o.Worker, now)
			}
			b.unreserve(j, now.Add(o.RetryDelay), now)
			if o.RetryDelay <= 0 {
				woken[j.Queue] = true
			}
		case backend.OutcomeFail:
			recordError(j, o.Error, o.Duration, o.Worker, now)
			b.toFailed(j, o.Error, now)
		}
	}
	b.wake(woken)
	if backend.Finishes(outcomes) || len(res.Cancelled) > 0 {
		b.wakeFinished()
	}
	return res, nil
}

// JobExtendLease implements backend.Backend.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	if err := backend.ValidateExtendLease(params); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	if err := b.lock(ctx, "extend leases"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	until := b.now().Add(params.Lease)
	var lost []backend.JobRef
	for _, ref := range params.Refs {
		j := b.held(ref)
		if j == nil {
			lost = append(lost, ref)
			continue
		}
		j.LeaseUntil = until
	}
	return lost, nil
}

// JobRelease implements backend.Backend: the first MaxFreeReleases
// releases of a job un-count its attempt, later ones count it (see the
// interface).
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	if err := b.lock(ctx, "release jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var res backend.CompleteResult
	woken := map[string]bool{}
	failed := false
	for _, ref := range refs {
		j := b.held(ref)
		if j == nil {
			if c := b.cancelled(ref); c != nil {
				b.finishReserved(c, backend.StateCancelled, now)
				res.Cancelled = append(res.Cancelled, ref)
			} else {
				res.Stale = append(res.Stale, ref)
			}
			continue
		}
		j.Releases++
		switch {
		case j.Releases <= backend.MaxFreeReleases:
			j.Attempts--
		case j.Attempts < j.MaxAttempts:
			recordError(j, backend.ReleasedError, 0, "", now)
		default:
			recordError(j, backend.ReleasedError, 0, "", now)
			b.toFailed(j, backend.ReleasedError, now)
			failed = true
			continue
		}
		b.unreserve(j, now, now)
		woken[j.Queue] = true
	}
	b.wake(woken)
	if failed || len(res.Cancelled) > 0 {
		b.wakeFinished()
	}
	return res, nil
}

// LeaseSweep implements backend.Backend. It scans the reserved jobs, which
// are bounded by the workers' concurrency, and handles the longest-expired
// first.
func (b *Backend) LeaseSweep(ctx context.Context, params backend.SweepParams) (backend.SweepResult, error) {
	limit, err := backend.PageLimit(params.Limit, backend.DefaultSweepLimit)
	if err != nil {
		return backend.SweepResult{}, fmt.Errorf("sweep leases: %w", err)
	}
	if err := b.lock(ctx, "sweep leases"); err != nil {
		return backend.SweepResult{}, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var expired []*backend.JobRow
	for _, j := range b.reserved {
		if j.LeaseUntil.Before(now) {
			expired = append(expired, j)
		}
	}
	slices.SortFunc(expired, func(x, y *backend.JobRow) int {
		if c := x.LeaseUntil.Compare(y.LeaseUntil); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	if len(expired) > limit {
		expired = expired[:limit]
	}
	var res backend.SweepResult
	woken := map[string]bool{}
	for _, j := range expired {
		if j.Status == backend.StateCancelling {
			b.finishReserved(j, backend.StateCancelled, now)
			res.Cancelled++
			continue
		}
		spent := j.Attempts >= j.MaxAttempts
		res.Jobs = append(res.Jobs, backend.SweptJob{Ref: j.Ref(), Queue: j.Queue, Type: j.Type, Failed: spent})
		recordError(j, backend.LeaseExpiredError, 0, "", now)
		if spent {
			b.toFailed(j, backend.LeaseExpiredError, now)
			res.Failed++
			continue
		}
		b.unreserve(j, now, now)
		woken[j.Queue] = true
		res.Rescued++
	}
	b.sweepDeadlines(&res, limit, now)
	b.wake(woken)
	if res.Failed+res.Cancelled+res.Expired > 0 {
		b.wakeFinished()
	}
	return res, nil
}
