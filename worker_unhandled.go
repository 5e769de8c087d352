package jobq

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/runner"
)

// A job whose type this worker has no handler for is never run here: in a
// rolling deploy the producers may know a type before some workers do, and
// a worker that failed such jobs (as jobq did once) burned their attempts
// and parked them in the failed jobs within seconds. The worker gives the
// job back untouched instead (backend.OutcomeDefer: the attempt
// un-counted, the last error kept), due again after unhandledDelay, so a
// worker with the handler takes it.

// The bounds of the delay before a job given back is due again.
const (
	minUnhandledDelay = time.Second
	maxUnhandledDelay = time.Minute
)

// unhandledDelay is how long a job given back for want of a handler waits
// before it is due again: a tenth of its age, between a second and a
// minute, plus up to a fifth more at random. A young job (a deploy in
// progress) returns soon, to a worker that may have the handler by then;
// one that has waited long costs the workers without it a claim a minute,
// however many of them run.
//
// The random part keeps the job's due time out of step with the polls of
// the worker that gave it back. Without it, a job given back for exactly a
// second (fifty 20 ms polls) came due just before that worker's next poll,
// every time, and on SQLite a worker with the handler in another process
// lost the job to it for a minute on end (TestProcessRollingDeploy).
func unhandledDelay(age time.Duration) time.Duration {
	d := min(max(age/10, minUnhandledDelay), maxUnhandledDelay)
	return d + rand.N(d/5+1)
}

// unhandledAge is how long the job has existed, by the backend's clock
// (both times are the backend's).
func unhandledAge(row *backend.JobRow) time.Duration {
	if row.ReservedAt.IsZero() || row.CreatedAt.IsZero() {
		return 0
	}
	return max(0, row.ReservedAt.Sub(row.CreatedAt))
}

// deferUnhandled gives back a claimed job whose type has no handler here
// (see above): no handler starts, so Claimed, Started and Finished do not
// fire; the holder writes the defer and Written reports EventDeferred.
func (w *Worker) deferUnhandled(ctx context.Context, row *backend.JobRow, job *Job, h attemptHolder) (Event, error) {
	ref := row.Ref()
	h.handlerReturned(ref)
	age := unhandledAge(row)
	err := errNoHandler{typ: row.Type}
	ev := Event{Kind: EventDeferred, Job: job, Err: err, RetryDelay: unhandledDelay(age)}
	item := runner.Item{
		Outcome: backend.Outcome{Ref: ref, Kind: backend.OutcomeDefer, RetryDelay: ev.RetryDelay},
		Queue:   row.Queue, Type: row.Type, Job: job, Err: err,
	}
	w.unhandled.note(w.log, row, age, w.cfg.NoHandlerAlertAfter)
	kind, werr := h.write(ctx, item, EventDeferred)
	ev.Kind = kind
	return ev, werr
}

// unhandledLog paces the worker's lines about jobs it gave back: one per
// queue and type a minute, counting the jobs since the last one, so a
// queue full of them does not flood the log.
type unhandledLog struct {
	mu   sync.Mutex
	seen map[[2]string]*unhandledSeen
}

type unhandledSeen struct {
	logged time.Time
	jobs   int // given back since logged
}

// unhandledLogEvery is the least time between two lines about one queue
// and type.
const unhandledLogEvery = time.Minute

// unhandledLogKeys is how many queues and types unhandledLog tracks
// before it forgets those it has not logged for a minute.
const unhandledLogKeys = 1024

// note counts one job given back and logs, at most once a minute for its
// queue and type: at warn level, or at error level when the job is older
// than alertAfter, since no worker has taken it in all that time.
func (l *unhandledLog) note(log *slog.Logger, row *backend.JobRow, age, alertAfter time.Duration) {
	k := [2]string{row.Queue, row.Type}
	now := time.Now()
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[[2]string]*unhandledSeen{}
	}
	s := l.seen[k]
	if s == nil {
		// Types without a handler are whatever producers enqueue, so
		// the map is bounded: past unhandledLogKeys, entries whose last
		// line is over a minute old go (they would log again at once).
		if len(l.seen) >= unhandledLogKeys {
			for key, old := range l.seen {
				if now.Sub(old.logged) >= unhandledLogEvery {
					delete(l.seen, key)
				}
			}
		}
		s = &unhandledSeen{}
		l.seen[k] = s
	}
	s.jobs++
	if !s.logged.IsZero() && now.Sub(s.logged) < unhandledLogEvery {
		l.mu.Unlock()
		return
	}
	jobs := s.jobs
	s.logged, s.jobs = now, 0
	l.mu.Unlock()
	// given_back counts this job and those of the same queue and type
	// given back since the last line; jobq_jobs_deferred_total counts all.
	attrs := []any{"queue", row.Queue, "type", row.Type, "job_id", row.ID, "age", age.Round(time.Second), "given_back", jobs}
	if age > alertAfter {
		log.Error("no worker seems able to run this job type: its jobs wait, given back untouched by every worker without its handler; deploy a worker that registers it, or cancel the jobs", attrs...)
		return
	}
	log.Warn("jobs of a type this worker has no handler for were given back untouched (no attempt counted), for a worker that has it", attrs...)
}
