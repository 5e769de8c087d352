package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// JobCancel implements backend.Canceller.
func (b *Backend) JobCancel(ctx context.Context, ids []int64) ([]backend.CancelResult, error) {
	if err := backend.ValidateCancelIDs(ids); err != nil {
		return nil, fmt.Errorf("cancel jobs: %w", err)
	}
	if err := b.lock(ctx, "cancel jobs"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	out := make([]backend.CancelResult, len(ids))
	for i, id := range ids {
		out[i] = b.cancelOne(id, now)
	}
	b.wakeFinished()
	return out, nil
}

func (b *Backend) cancelOne(id int64, now time.Time) backend.CancelResult {
	r := backend.CancelResult{ID: id}
	if j, ok := b.jobs[id]; ok {
		r.Attempt = j.Attempts
		switch j.Status {
		case backend.StatePending:
			b.removePending(j)
			b.keep(j, backend.StateCancelled, now)
			b.keyEnded(j, now)
			r.Outcome = backend.CancelCancelled
		case backend.StateReserved:
			j.Status = backend.StateCancelling
			r.Outcome = backend.CancelRequested
		default:
			r.Outcome = backend.CancelAlready
		}
		return r
	}
	if f, ok := b.finished[id]; ok {
		r.Attempt = f.Attempts
		r.Outcome = backend.CancelCompleted
		if f.State == backend.StateCancelled {
			r.Outcome = backend.CancelAlready
		}
		return r
	}
	if _, ok := b.failedByJob[id]; ok {
		r.Outcome = backend.CancelFailed
		return r
	}
	r.Outcome = backend.CancelNotFound
	return r
}

// JobCancelling implements backend.Canceller.
func (b *Backend) JobCancelling(ctx context.Context) ([]backend.JobRef, error) {
	if err := b.lock(ctx, "list cancelling jobs"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var refs []backend.JobRef
	for _, j := range b.reserved {
		if j.Status == backend.StateCancelling {
			refs = append(refs, j.Ref())
		}
	}
	return refs, nil
}

// cancelled returns the cancelling job that ref names, nil when there is
// none: the holder's writes for it end the job cancelled.
func (b *Backend) cancelled(ref backend.JobRef) *backend.JobRow {
	j := b.reserved[ref.ID]
	if j == nil || j.Token != ref.Token || j.Status != backend.StateCancelling {
		return nil
	}
	return j
}

// removePending forgets a pending job, freeing its unique key.
func (b *Backend) removePending(j *backend.JobRow) {
	delete(b.jobs, j.ID)
	if j.UniqueKey != "" && b.unique[j.UniqueKey] == j.ID {
		delete(b.unique, j.UniqueKey)
	}
	delete(b.uniqueStates, j.ID)
	q := b.queue(j.Queue)
	same := func(x *backend.JobRow) bool { return x.ID == j.ID }
	switch {
	case j.Key == "":
		if !q.ready.remove(same) {
			q.scheduled.remove(same)
		}
	case q.keys[j.Key].ready.remove(same):
		q.keyedReady--
		q.touch(q.keys[j.Key])
	default:
		q.scheduled.remove(same)
	}
	if j.Key != "" {
		b.keyLeft(j)
		if b.rules(j.Queue).Ordered {
			b.wakeOne(j.Queue) // the key may have a new head
		}
	}
	b.dropIfEmpty(j.Queue)
}

// finishReserved ends a reserved (or cancelling) job in state, keeping it.
func (b *Backend) finishReserved(j *backend.JobRow, state backend.JobState, now time.Time) {
	b.removeLive(j)
	b.keep(j, state, now)
	if state == backend.StateCancelled {
		b.keyEnded(j, now)
	}
}

// keep records j among the finished jobs.
func (b *Backend) keep(j *backend.JobRow, state backend.JobState, now time.Time) {
	b.finished[j.ID] = &backend.FinishedJob{
		ID:          j.ID,
		Queue:       j.Queue,
		Type:        j.Type,
		Payload:     j.Payload,
		State:       state,
		Attempts:    j.Attempts,
		MaxAttempts: j.MaxAttempts,
		Priority:    j.Priority,
		LastError:   j.LastError,
		UniqueKey:   j.UniqueKey,
		Metadata:    j.Metadata,
		CreatedAt:   j.CreatedAt,
		FinishedAt:  now,
		Key:         j.Key,
	}
	// Every job that ends cancelled passes here (JobCancel of a pending
	// job, a cancelling job's holder reporting, the sweep): a task's job
	// ends its task in the same critical section.
	if state == backend.StateCancelled {
		b.taskJobEnded(j.ID, backend.TaskCancelled, jobCancelledReason, nil, now)
	}
}
