package redis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
)

var _ backend.Canceller = (*Backend)(nil)

// JobCancel implements backend.Canceller with one script call per queue
// (see "cancel" in scripts.lua), pipelined; the unique keys of the
// cancelled pending jobs are freed after.
func (b *Backend) JobCancel(ctx context.Context, ids []int64) ([]backend.CancelResult, error) {
	if err := b.begin("cancel jobs"); err != nil {
		return nil, err
	}
	if err := backend.ValidateCancelIDs(ids); err != nil {
		return nil, fmt.Errorf("cancel jobs: %w", err)
	}
	res, err := b.cancel(ctx, ids)
	return res, b.fail("cancel jobs", err)
}

func (b *Backend) cancel(ctx context.Context, ids []int64) ([]backend.CancelResult, error) {
	out := make([]backend.CancelResult, len(ids))
	for i, id := range ids {
		out[i] = backend.CancelResult{ID: id, Outcome: backend.CancelNotFound}
	}
	groups, _, err := b.groupRefs(ctx, ids)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return out, nil
	}
	calls := make([]*evalCall, len(groups))
	for gi, g := range groups {
		q := g.q
		args := make([]any, 0, 2+len(g.items))
		args = append(args, q.channel, b.origin)
		for _, i := range g.items {
			args = append(args, tsHex(ids[i]))
		}
		calls[gi] = scriptCancel.on(q, args)
	}
	callErr := b.c.evalAll(ctx, calls, false)
	var held []uniqueHeld
	var first error
	for gi, call := range calls {
		if call.err != nil {
			continue
		}
		g := groups[gi]
		v, err := asSlice(call.res)
		if err != nil || len(v) != 4 {
			first = cmpErr(first, fmt.Errorf("cancel %s: unexpected reply", g.q.name))
			continue
		}
		// Tasks released by a cancelled task's end (DepContinue).
		w := fields{v: v}
		b.notifier.local(g.q.name, w.int(2) == 1, w.int64(3))
		res, err := asSlice(v[0])
		if err != nil || len(res) != 2*len(g.items) {
			first = cmpErr(first, fmt.Errorf("cancel %s: unexpected reply", g.q.name))
			continue
		}
		f := fields{v: res}
		for j, i := range g.items {
			out[i].Outcome = backend.CancelOutcome(f.int(2 * j))
			out[i].Attempt = f.int(2*j + 1)
		}
		first = cmpErr(first, f.err)
		h, err := readHeld(v[1], g.idx)
		first = cmpErr(first, err)
		held = append(held, h...)
	}
	b.releaseUnique(ctx, held)
	if callErr != nil {
		return nil, callErr
	}
	if first != nil {
		return nil, first
	}
	for _, r := range out {
		// Already: a request before this one may have died before its
		// INCR; raising the counter again costs nothing.
		if r.Outcome == backend.CancelRequested || r.Outcome == backend.CancelAlready {
			if err := b.c.incr(ctx, b.keys.cancels); err != nil {
				return nil, fmt.Errorf("tell workers of the cancel requests (asking again does): %w", err)
			}
			break
		}
	}
	b.finished()
	return out, nil
}

// cancelScanEvery bounds how long JobCancelling trusts the counter
// P:cancels: a request whose INCR never came (its caller died between the
// script and the INCR, or runs a build without the counter) is seen at
// the next scan at the latest.
const cancelScanEvery = 10 * time.Second

// cancelPoll is what the last scan of the cancelling sets saw (none yet
// while at is zero).
type cancelPoll struct {
	mu    sync.Mutex
	gen   string        // P:cancels when it started
	empty bool          // it found no cancelling job
	at    time.Time     // when it started
	every time.Duration // cancelScanEvery when 0; tests shorten it
}

// JobCancelling implements backend.Canceller: one script call per queue,
// pipelined, each reading that queue's (small) cancelling set. Only a
// cancel request adds to those sets, and every one raises P:cancels after
// it, so when the last scan found them all empty and the counter has not
// moved since, they still are: the answer is then one GET, not a script
// per queue (every worker holding jobs asks four times a second).
func (b *Backend) JobCancelling(ctx context.Context) ([]backend.JobRef, error) {
	if err := b.begin("list cancelling"); err != nil {
		return nil, err
	}
	refs, err := b.cancelling(ctx)
	return refs, b.fail("list cancelling", err)
}

func (b *Backend) cancelling(ctx context.Context) ([]backend.JobRef, error) {
	gen, _, err := b.c.get(ctx, b.keys.cancels)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p := &b.cancelPoll
	p.mu.Lock()
	every := p.every
	if every == 0 {
		every = cancelScanEvery
	}
	unchanged := !p.at.IsZero() && p.empty && p.gen == gen && start.Sub(p.at) < every
	p.mu.Unlock()
	if unchanged {
		return nil, nil
	}
	refs, err := b.scanCancelling(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.gen, p.empty, p.at = gen, len(refs) == 0, start
	p.mu.Unlock()
	return refs, nil
}

// scanCancelling reads every queue's cancelling set.
func (b *Backend) scanCancelling(ctx context.Context) ([]backend.JobRef, error) {
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	calls := make([]*evalCall, len(queues))
	for i, name := range queues {
		q := b.keys.queue(name)
		calls[i] = scriptCancelling.on(q, nil)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	var refs []backend.JobRef
	for i, call := range calls {
		v, err := asSlice(call.res)
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			continue
		}
		idx, ok, err := b.reg.lookup(ctx, queues[i])
		if err != nil || !ok {
			return nil, fmt.Errorf("list cancelling %s: queue index: %v", queues[i], err)
		}
		f := fields{v: v}
		for j := 0; j+2 < len(v); j += 3 {
			refs = append(refs, backend.JobRef{ID: f.id(j, idx), Attempt: f.int(j + 1), Token: f.int64(j + 2)})
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	return refs, nil
}
