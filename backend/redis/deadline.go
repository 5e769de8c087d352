package redis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
)

// Deadlines (backend.InsertParams.Deadline). A job with one keeps it in
// its hash (field dl, µs) and, while it waits, in its queue's deadlines
// set, scored by it (P:{Q}:e; see repend and expire in scripts.lua). The
// Redis clock decides, as for every other time: the insert checks the
// deadlines against the clock of the server holding each queue (script
// "now"), a claim moves the jobs whose deadline passed to the failed set
// before it takes any, so none is claimed, and a lease sweep moves the
// others, those of queues nobody claims from. The sweep reports what it
// moved; what a claim moved, this process's next sweep reports (see
// expiredLog), as SQLite's do.

// checkDeadlines refuses a batch holding a deadline that has passed, or
// comes before its job's due time, by the clock of the server that holds
// the job's queue (backend.CheckDeadlines): one pipelined round, only for
// a batch with a deadline. A deadline that passes between this check and
// the insert leaves a job that expires unrun, as one that passes just
// after the insert would.
func (b *Backend) checkDeadlines(ctx context.Context, params []backend.InsertParams) error {
	var queues []string
	for _, p := range params {
		if !p.Deadline.IsZero() && !slices.Contains(queues, p.Queue) {
			queues = append(queues, p.Queue)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	calls := make([]*evalCall, len(queues))
	for i, q := range queues {
		calls[i] = scriptNow.on(b.keys.queue(q), nil)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return err
	}
	// Each queue's items against its server's clock, numbered within the
	// whole batch: the others' deadlines are hidden from the check.
	only := make([]backend.InsertParams, len(params))
	for i, q := range queues {
		us, err := asInt(calls[i].res)
		if err != nil {
			return fmt.Errorf("read the clock of queue %s: %w", q, err)
		}
		for j, p := range params {
			if p.Queue != q {
				p.Deadline = time.Time{}
			}
			only[j] = p
		}
		if err := backend.CheckDeadlines(only, time.UnixMicro(us)); err != nil {
			return err
		}
	}
	return nil
}

// maxExpiredLog bounds the jobs a process's claims expired that wait for
// its next sweep to report them: a process that claims but never sweeps
// would otherwise keep them all. Those past it go unreported (the jobs
// are failed all the same).
const maxExpiredLog = 10 * backend.DefaultSweepLimit

// expiredLog holds the jobs this process's claims moved to the failed set
// for their deadline, which its next LeaseSweep reports with its own.
type expiredLog struct {
	mu   sync.Mutex
	jobs []backend.SweptJob
}

// add keeps jobs for the next sweep.
func (l *expiredLog) add(jobs []backend.SweptJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(jobs), maxExpiredLog-len(l.jobs))
	l.jobs = append(l.jobs, jobs[:max(n, 0)]...)
}

// take removes and returns up to limit of the jobs kept, oldest first.
func (l *expiredLog) take(limit int) []backend.SweptJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(l.jobs), max(limit, 0))
	out := slices.Clone(l.jobs[:n])
	l.jobs = slices.Delete(l.jobs, 0, n)
	return out
}

// readExpired reads a script's list of jobs moved to the failed set for
// their deadline, {ID, attempts, token, type, ...}, of queue q (index
// idx).
func readExpired(v any, q string, idx int) ([]backend.SweptJob, error) {
	s, err := asSlice(v)
	if err != nil || len(s)%4 != 0 {
		return nil, fmt.Errorf("expired jobs of %s: unexpected reply %v", q, v)
	}
	f := fields{v: s}
	out := make([]backend.SweptJob, 0, len(s)/4)
	for i := 0; i+3 < len(s); i += 4 {
		out = append(out, backend.SweptJob{
			Ref:     backend.JobRef{ID: f.id(i, idx), Attempt: f.int(i + 1), Token: f.int64(i + 2)},
			Queue:   q,
			Type:    f.str(i + 3),
			Failed:  true,
			Expired: true,
		})
	}
	return out, f.err
}

// claimExpired takes in what a claim of queue q (index idx) moved to the
// failed set for a deadline: the jobs, kept for the next sweep to report,
// and the unique keys they held, freed now.
func (b *Backend) claimExpired(ctx context.Context, q string, idx int, expired, held any) error {
	jobs, err := readExpired(expired, q, idx)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		return nil
	}
	h, err := readHeld(held, idx)
	b.releaseUnique(context.WithoutCancel(ctx), h)
	b.expired.add(jobs)
	b.finished()
	return err
}
