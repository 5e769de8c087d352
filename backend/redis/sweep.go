package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// LeaseSweep handles expired leases and passed deadlines across every
// queue of the prefix: one pipelined round counts each queue's expired
// leases and waiting jobs past their deadline, a second sweeps the queues
// that have any, sharing params.Limit between them. What is left of the
// limit reports the jobs this process's claims expired since its last
// sweep (see expiredLog).
func (b *Backend) LeaseSweep(ctx context.Context, params backend.SweepParams) (backend.SweepResult, error) {
	if err := b.begin("sweep leases"); err != nil {
		return backend.SweepResult{}, err
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultSweepLimit)
	if err != nil {
		return backend.SweepResult{}, fmt.Errorf("sweep leases: %w", err)
	}
	res, err := b.sweep(ctx, limit)
	if res.Failed+res.Cancelled+res.Expired > 0 {
		b.finished()
	}
	if err == nil {
		// Their claims told waiters already (claimExpired).
		claimed := b.expired.take(limit - len(res.Jobs))
		res.Jobs = append(res.Jobs, claimed...)
		res.Expired += len(claimed)
	}
	return res, b.fail("sweep leases", err)
}

func (b *Backend) sweep(ctx context.Context, limit int) (backend.SweepResult, error) {
	var res backend.SweepResult
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return res, err
	}
	counts := make([]*evalCall, len(queues))
	for i, q := range queues {
		counts[i] = scriptExpired.on(b.keys.queue(q), []any{adoptLimit})
	}
	if err := b.c.evalAll(ctx, counts, false); err != nil {
		return res, err
	}
	var calls []*evalCall
	var swept []string
	var idxs []int
	left := limit
	for i, q := range queues {
		n, err := asInt(counts[i].res)
		if err != nil {
			return res, err
		}
		if n == 0 || left == 0 {
			continue
		}
		take := min(int(n), left)
		left -= take
		k := b.keys.queue(q)
		idx, _, err := b.reg.lookup(ctx, q) // registered: all() listed it
		if err != nil {
			return res, err
		}
		calls = append(calls, scriptSweep.on(k, []any{k.channel, b.origin, take, backend.LeaseExpiredError}))
		swept = append(swept, q)
		idxs = append(idxs, idx)
	}
	if len(calls) == 0 {
		return res, nil
	}
	callErr := b.c.evalAll(ctx, calls, false)
	var held []uniqueHeld
	var first error
	for i, call := range calls {
		if call.err != nil {
			continue
		}
		v, err := asSlice(call.res)
		if err != nil || len(v) != 6 {
			first = cmpErr(first, fmt.Errorf("sweep %s: unexpected reply", swept[i]))
			continue
		}
		jobs, err := asSlice(v[0])
		if err != nil {
			first = cmpErr(first, err)
			continue
		}
		f := fields{v: jobs}
		for j := 0; j+4 < len(jobs); j += 5 {
			job := backend.SweptJob{
				Ref:    backend.JobRef{ID: f.id(j, idxs[i]), Attempt: f.int(j + 1), Token: f.int64(j + 2)},
				Queue:  swept[i],
				Type:   f.str(j + 3),
				Failed: f.int(j+4) == 1,
			}
			if job.Failed {
				res.Failed++
			} else {
				res.Rescued++
			}
			res.Jobs = append(res.Jobs, job)
		}
		first = cmpErr(first, f.err)
		expired, err := readExpired(v[5], swept[i], idxs[i])
		first = cmpErr(first, err)
		res.Expired += len(expired)
		res.Jobs = append(res.Jobs, expired...)
		h, err := readHeld(v[1], idxs[i])
		first = cmpErr(first, err)
		held = append(held, h...)
		w := fields{v: v}
		b.notifier.local(swept[i], w.int(2) == 1, int64(w.int(4)))
		res.Cancelled += w.int(3)
	}
	b.releaseUnique(ctx, held)
	if callErr != nil {
		return res, callErr
	}
	return res, first
}

// QueueStats counts jobs per queue and state with one script per queue,
// pipelined.
func (b *Backend) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	if err := b.begin("queue stats"); err != nil {
		return nil, err
	}
	out, err := b.stats(ctx)
	return out, b.fail("queue stats", err)
}

func (b *Backend) stats(ctx context.Context) ([]backend.QueueStats, error) {
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return []backend.QueueStats{}, err
	}
	calls := make([]*evalCall, len(queues))
	for i, q := range queues {
		k := b.keys.queue(q)
		calls[i] = scriptStats.on(k, nil)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	out := []backend.QueueStats{}
	for i, q := range queues {
		v, err := asSlice(calls[i].res)
		if err != nil || len(v) != 5 {
			return nil, fmt.Errorf("stats %s: unexpected reply", q)
		}
		f := fields{v: v}
		s := backend.QueueStats{
			Queue:     q,
			Pending:   int64(f.int(0)),
			Scheduled: int64(f.int(1)),
			Reserved:  int64(f.int(2)),
			Failed:    int64(f.int(3)),
		}
		if oldest := f.str(4); oldest != "" {
			var us float64
			if _, err := fmt.Sscan(oldest, &us); err == nil {
				s.OldestDue = time.UnixMicro(int64(us))
			}
		}
		if f.err != nil {
			return nil, f.err
		}
		if s.Pending+s.Scheduled+s.Reserved+s.Failed > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}
