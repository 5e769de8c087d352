package memory

import (
	"time"

	"github.com/jobq/jobq/backend"
)

// expireReady moves the jobs at the top of q's ready heap whose deadline
// has passed to failed jobs, so the claim never returns them, and keeps
// them for the next sweep to report. A deadline is never on a keyed job
// (ValidateInsert), so the ready heap is the only place to look.
// Called with b.mu held.
func (b *Backend) expireReady(q *queue, now time.Time) {
	for q.ready.len() > 0 && backend.Expired(q.ready.peek().Deadline, now) {
		j := q.ready.pop()
		b.expirePending(j, now)
		b.expired = append(b.expired, backend.SweptJob{Ref: j.Ref(), Queue: j.Queue, Type: j.Type, Failed: true, Expired: true})
	}
}

// expirePending moves pending job j, already out of its queue's heaps,
// to failed jobs with its deadline's error, attempts and errors as they
// were. Called with b.mu held.
func (b *Backend) expirePending(j *backend.JobRow, now time.Time) {
	delete(b.jobs, j.ID)
	delete(b.deadlined, j.ID)
	if j.UniqueKey != "" && b.unique[j.UniqueKey] == j.ID {
		delete(b.unique, j.UniqueKey)
	}
	b.addFailed(j, backend.DeadlineError(j.Deadline), now)
}

// sweepDeadlines moves up to limit pending jobs whose deadline has passed
// to failed jobs (those a claim moved first), adding them to res.
// Called with b.mu held.
func (b *Backend) sweepDeadlines(res *backend.SweepResult, limit int, now time.Time) {
	n := min(limit, len(b.expired))
	res.Jobs = append(res.Jobs, b.expired[:n]...)
	res.Expired += n
	b.expired = b.expired[n:]
	if len(b.expired) == 0 {
		b.expired = nil
	}
	for id, j := range b.deadlined {
		if res.Expired >= limit {
			return
		}
		if b.jobs[id] != j {
			delete(b.deadlined, id) // ended meanwhile (cancelled, finished)
			continue
		}
		if j.Status != backend.StatePending || !backend.Expired(j.Deadline, now) {
			continue
		}
		q := b.queue(j.Queue)
		same := func(x *backend.JobRow) bool { return x.ID == j.ID }
		if !q.ready.remove(same) {
			q.scheduled.remove(same)
		}
		b.expirePending(j, now)
		res.Jobs = append(res.Jobs, backend.SweptJob{Ref: j.Ref(), Queue: j.Queue, Type: j.Type, Failed: true, Expired: true})
		res.Expired++
	}
}
