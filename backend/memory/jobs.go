package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// JobInsertMany implements backend.Backend. Every item is validated before
// anything is stored, so a refused batch leaves no trace.
func (b *Backend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	for i, p := range params {
		if err := backend.ValidateInsert(p); err != nil {
			return nil, fmt.Errorf("insert job %d of %d: %w", i+1, len(params), err)
		}
	}
	if err := b.lock(ctx, "insert jobs"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	if err := backend.CheckDeadlines(params, now); err != nil {
		return nil, err
	}
	out := make([]backend.InsertResult, len(params))
	params, replaced := backend.FoldConflicts(params)
	woken := map[string]bool{}
	// The keys of the jobs this call made: within one call, the items of
	// a key are one job, whatever its states.
	made := map[string]bool{}
	for i, p := range params {
		if p.UniqueKey != "" {
			// A holder out of its states loses the key to this item, and
			// so does a running one to a follow-up (KeepLast).
			if holder, ok := b.unique[p.UniqueKey]; ok && (made[p.UniqueKey] || b.keeps(holder, &p, now)) {
				out[i] = backend.InsertResult{ID: holder, Duplicate: true, Replaced: replaced != nil && replaced[i]}
				if c, asked := backend.ConflictOf(params, i, now); asked && !out[i].Replaced {
					out[i].Replaced = b.applyConflict(b.jobs[holder], c, now, woken)
				}
				continue
			}
		}
		j := b.newJob(p, now)
		if p.UniqueKey != "" {
			made[p.UniqueKey] = true
			if p.UniqueStates != 0 {
				b.uniqueStates[j.ID] = p.UniqueStates
			}
		}
		woken[p.Queue] = true
		out[i] = backend.InsertResult{ID: j.ID}
	}
	b.wake(woken)
	return out, nil
}

// applyConflict gives j, the live job holding a unique key, what c asks
// when it is waiting (pending), and reports whether it did: a running
// job is left alone, and so is a keyed or workflow job, whose place is
// fixed at insert.
// Called with b.mu held.
func (b *Backend) applyConflict(j *backend.JobRow, c backend.Conflict, now time.Time, woken map[string]bool) bool {
	if j == nil || j.Status != backend.StatePending || j.Key != "" || j.WorkflowID != 0 {
		return false
	}
	q := b.queue(j.Queue)
	same := func(x *backend.JobRow) bool { return x.ID == j.ID }
	if !q.ready.remove(same) {
		q.scheduled.remove(same)
	}
	j.Payload = append([]byte(nil), c.Payload...)
	j.AvailableAt = c.DueFor(j.CreatedAt)
	q.addPending(j, now)
	woken[j.Queue] = true
	return true
}

// newJob stores p, validated, as a new pending job with the next ID. It
// is the one insert path, shared by JobInsertMany and the release of a
// workflow task (workflow.go), so IDs, the inserted count and the queue
// index behave the same for both; the caller wakes p.Queue's subscribers.
// Called with b.mu held.
func (b *Backend) newJob(p backend.InsertParams, now time.Time) *backend.JobRow {
	b.lastJobID++
	j := &backend.JobRow{
		ID:          b.lastJobID,
		Queue:       p.Queue,
		Type:        p.Type,
		Payload:     append([]byte(nil), p.Payload...),
		MaxAttempts: p.MaxAttempts,
		Priority:    p.Priority,
		Status:      backend.StatePending,
		AvailableAt: p.AvailableAt(now),
		CreatedAt:   now,
		UniqueKey:   p.UniqueKey,
		Metadata:    cloneMetadata(p.Metadata),
		Key:         p.Key,
		Deadline:    p.Deadline,
	}
	if !j.Deadline.IsZero() {
		b.deadlined[j.ID] = j
	}
	b.addPending(j, now)
	return j
}

// JobClaim implements backend.Backend. It merges the named queues' ready
// heaps, so each claimed job costs O(log n) however many jobs wait.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if err := b.lock(ctx, "claim jobs"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var qs []*queue
	var allow []*allowance       // parallel to qs; nil: no limit
	var rules []backend.KeyRules // parallel to qs
	seen := make(map[string]bool, len(params.Queues))
	for _, name := range params.Queues {
		q, ok := b.queues[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		a, skip := b.allowance(name, q, params.Max, now)
		if skip {
			continue
		}
		q.promote(now)
		qs = append(qs, q)
		allow = append(allow, a)
		rules = append(rules, b.rules(name))
	}
	var out []*backend.JobRow
	for len(out) < params.Max {
		// The next job is the first in claim order among every queue's
		// unkeyed ready jobs and claimable keys.
		var best *backend.JobRow
		bi, fromKey := -1, false
		for i, q := range qs {
			if allow[i] != nil && allow[i].left == 0 {
				continue
			}
			b.expireReady(q, now)
			if q.ready.len() > 0 && (best == nil || claimsBefore(q.ready.peek(), best)) {
				best, bi, fromKey = q.ready.peek(), i, false
			}
			if q.keyedReady > 0 {
				if top := b.peekKeyed(q, rules[i]); top != nil && (best == nil || claimsBefore(top, best)) {
					best, bi, fromKey = top, i, true
				}
			}
		}
		if best == nil {
			break
		}
		if allow[bi] != nil {
			allow[bi].take()
		}
		q := qs[bi]
		var j *backend.JobRow
		if fromKey {
			j = q.takeKeyed()
		} else {
			j = q.ready.pop()
		}
		q.reserved++
		j.Status = backend.StateReserved
		j.Attempts++
		b.lastToken++
		j.Token = b.lastToken
		j.ReservedAt = now
		j.LeaseUntil = now.Add(params.Lease)
		b.reserved[j.ID] = j
		out = append(out, cloneJob(j))
	}
	b.limitsClaimed(allow)
	return out, nil
}

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if err := b.lock(ctx, fmt.Sprintf("get job %d", id)); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	if !ok {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	return cloneJob(j), nil
}
