package redis

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jobq/jobq/backend"
)

// refGroup is the refs (or outcomes) of one call that belong to one
// queue, by their index in the call.
type refGroup struct {
	q     *queueKeys
	idx   int
	items []int
}

// groupRefs splits IDs by the queue they name. IDs of no known queue are
// returned in unknown: they cannot match any job.
func (b *Backend) groupRefs(ctx context.Context, ids []int64) (groups []*refGroup, unknown []int, err error) {
	byIdx := map[int]*refGroup{}
	for i, id := range ids {
		qi := queueIndexOf(id)
		g := byIdx[qi]
		if g == nil {
			name, ok, err := b.reg.name(ctx, qi)
			if err != nil {
				return nil, nil, err
			}
			if !ok || id <= 0 {
				unknown = append(unknown, i)
				continue
			}
			g = &refGroup{q: b.keys.queue(name), idx: qi}
			byIdx[qi] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, i)
	}
	return groups, unknown, nil
}

func outcomeKind(o backend.Outcome) string {
	switch o.Kind {
	case backend.OutcomeRetry:
		return "r"
	case backend.OutcomeDefer:
		return "u"
	case backend.OutcomeFail:
		return "f"
	}
	if o.Keep {
		return "k"
	}
	return "d"
}

// outcomeKindArg is the kind argument of an outcome to the script
// complete: a retry's and a fail's carry their entry of the job's error
// log after the kind letter ("r <duration µs> <worker>"), so that the
// outcomes recording no error (done, the common one) cost no argument more.
func outcomeKindArg(o backend.Outcome) string {
	k := outcomeKind(o)
	if o.Kind != backend.OutcomeRetry && o.Kind != backend.OutcomeFail {
		return k
	}
	return k + " " + strconv.FormatInt(o.Duration.Microseconds(), 10) + " " + o.Worker
}

// outcomeText is the last argument of an outcome to the script complete:
// the error of a retry or fail, the result of a done (a task's, for its
// dependants; nothing reads a done's error), so that no outcome costs an
// argument more.
func outcomeText(o backend.Outcome) any {
	if o.Kind == backend.OutcomeDone {
		return o.Result
	}
	return o.Error
}

// JobComplete applies outcomes with one script call per queue, pipelined.
func (b *Backend) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	if err := b.begin("complete jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	outcomes, err := backend.PrepareOutcomes(params.Outcomes)
	if err != nil {
		return backend.CompleteResult{}, fmt.Errorf("complete jobs: %w", err)
	}
	res, err := b.complete(ctx, outcomes)
	if err == nil {
		b.limits.EndedOutcomes(outcomes)
		if backend.Finishes(outcomes) || len(res.Cancelled) > 0 {
			b.finished()
		}
	}
	return res, b.fail("complete jobs", err)
}

func (b *Backend) complete(ctx context.Context, outcomes []backend.Outcome) (backend.CompleteResult, error) {
	var res backend.CompleteResult
	if len(outcomes) == 0 {
		return res, nil
	}
	ids := make([]int64, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.Ref.ID
	}
	groups, unknown, err := b.groupRefs(ctx, ids)
	if err != nil {
		return res, err
	}
	stale := make([]bool, len(outcomes))
	cancelled := make([]bool, len(outcomes))
	for _, i := range unknown {
		stale[i] = true
	}
	calls := make([]*evalCall, len(groups))
	for gi, g := range groups {
		q := g.q
		keys := scriptComplete.keysFor(q, len(g.items))
		args := make([]any, 0, 4+5*len(g.items))
		args = append(args, q.channel, b.origin, len(g.items))
		for _, i := range g.items {
			o := outcomes[i]
			keys = scriptComplete.itemKeys(keys, q, o.Ref.ID)
			args = append(args, tsHex(o.Ref.ID), o.Ref.Token, outcomeKindArg(o),
				strconv.FormatInt(microsCeil(o.RetryDelay), 10), outcomeText(o))
		}
		calls[gi] = scriptComplete.call(keys, args)
	}
	if err := b.endReplies(ctx, "complete", calls, groups, stale, cancelled); err != nil {
		return res, err
	}
	return refResult(func(i int) backend.JobRef { return outcomes[i].Ref }, stale, cancelled), nil
}

// markIndexes sets into[g.items[k-1]] for each index k (counting g's refs
// from 1) in list, a script's reply of op.
func markIndexes(op string, list any, g *refGroup, into []bool, what string) error {
	nums, err := asSlice(list)
	if err != nil {
		return err
	}
	var first error
	for _, n := range nums {
		k, err := asInt(n)
		if err != nil || k < 1 || int(k) > len(g.items) {
			first = cmpErr(first, fmt.Errorf("%s %s: unexpected %s index %v", op, g.q.name, what, n))
			continue
		}
		into[g.items[k-1]] = true
	}
	return first
}

// refResult lists the refs (ref(i) is the i-th) marked stale or cancelled.
func refResult(ref func(i int) backend.JobRef, stale, cancelled []bool) backend.CompleteResult {
	var res backend.CompleteResult
	for i := range stale {
		if stale[i] {
			res.Stale = append(res.Stale, ref(i))
		}
		if cancelled[i] {
			res.Cancelled = append(res.Cancelled, ref(i))
		}
	}
	return res
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// JobExtendLease extends leases with one script call per queue.
func (b *Backend) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	if err := b.begin("extend leases"); err != nil {
		return nil, err
	}
	if err := backend.ValidateExtendLease(params); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	lost, err := b.extend(ctx, params.Refs, params.Lease)
	return lost, b.fail("extend leases", err)
}

func (b *Backend) extend(ctx context.Context, refs []backend.JobRef, lease time.Duration) ([]backend.JobRef, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	groups, unknown, err := b.refGroups(ctx, refs)
	if err != nil {
		return nil, err
	}
	lost := make([]bool, len(refs))
	for _, i := range unknown {
		lost[i] = true
	}
	calls := make([]*evalCall, len(groups))
	for gi, g := range groups {
		keys := scriptExtend.keysFor(g.q, len(g.items))
		args := []any{leaseMicros(lease)}
		for _, i := range g.items {
			keys = scriptExtend.itemKeys(keys, g.q, refs[i].ID)
			args = append(args, tsHex(refs[i].ID), refs[i].Token)
		}
		calls[gi] = scriptExtend.call(keys, args)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	for gi, call := range calls {
		nums, err := asSlice(call.res)
		if err != nil {
			return nil, err
		}
		for _, n := range nums {
			k, err := asInt(n)
			if err != nil || k < 1 || int(k) > len(groups[gi].items) {
				return nil, fmt.Errorf("extend lease %s: unexpected reply", groups[gi].q.name)
			}
			lost[groups[gi].items[k-1]] = true
		}
	}
	var out []backend.JobRef
	for i, l := range lost {
		if l {
			out = append(out, refs[i])
		}
	}
	return out, nil
}

// refGroups is groupRefs for refs.
func (b *Backend) refGroups(ctx context.Context, refs []backend.JobRef) ([]*refGroup, []int, error) {
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	return b.groupRefs(ctx, ids)
}

// JobRelease gives held jobs back with one script call per queue.
func (b *Backend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	if err := b.begin("release jobs"); err != nil {
		return backend.CompleteResult{}, err
	}
	res, err := b.release(ctx, refs)
	if err == nil {
		b.limits.Ended(refs)
	}
	return res, b.fail("release jobs", err)
}

func (b *Backend) release(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	if len(refs) == 0 {
		return backend.CompleteResult{}, nil
	}
	groups, unknown, err := b.refGroups(ctx, refs)
	if err != nil {
		return backend.CompleteResult{}, err
	}
	stale := make([]bool, len(refs))
	cancelled := make([]bool, len(refs))
	for _, i := range unknown {
		stale[i] = true
	}
	calls := make([]*evalCall, len(groups))
	for gi, g := range groups {
		q := g.q
		keys := scriptRelease.keysFor(q, len(g.items))
		args := []any{q.channel, b.origin, backend.MaxFreeReleases, backend.ReleasedError}
		for _, i := range g.items {
			keys = scriptRelease.itemKeys(keys, q, refs[i].ID)
			args = append(args, tsHex(refs[i].ID), refs[i].Token)
		}
		calls[gi] = scriptRelease.call(keys, args)
	}
	if err := b.endReplies(ctx, "release", calls, groups, stale, cancelled); err != nil {
		return backend.CompleteResult{}, err
	}
	return refResult(func(i int) backend.JobRef { return refs[i] }, stale, cancelled), nil
}

// endReplies runs the scripts of one complete or release call, one per
// queue group, and reads their replies (alike: stale refs, jobs that held
// a unique key, woke, due, cancelled refs) into stale and cancelled. It
// wakes and arms this process's subscribers and frees the unique keys of
// the jobs that ended, also when another queue's script failed.
func (b *Backend) endReplies(ctx context.Context, op string, calls []*evalCall, groups []*refGroup, stale, cancelled []bool) error {
	callErr := b.c.evalAll(ctx, calls, false)
	var held []uniqueHeld
	var first error
	for gi, call := range calls {
		if call.err != nil {
			continue
		}
		v, err := asSlice(call.res)
		if err != nil || len(v) != 5 {
			first = cmpErr(first, fmt.Errorf("%s %s: unexpected reply", op, groups[gi].q.name))
			continue
		}
		g := groups[gi]
		first = cmpErr(first, markIndexes(op, v[0], g, stale, "stale"))
		first = cmpErr(first, markIndexes(op, v[4], g, cancelled, "cancelled"))
		h, err := readHeld(v[1], g.idx)
		first = cmpErr(first, err)
		held = append(held, h...)
		f := fields{v: v}
		b.notifier.local(g.q.name, f.int(2) == 1, int64(f.int(3)))
		first = cmpErr(first, f.err)
	}
	// Freed even when a queue's call failed: the others' jobs have ended.
	b.releaseUnique(ctx, held)
	return cmp.Or(callErr, first)
}
