package redis

import (
	"context"
	"slices"
	"sync"

	"github.com/jobq/jobq/backend"
)

// maxMerged bounds the jobs one merged insert writes.
const maxMerged = 1000

// inserter merges plain inserts (one queue, no unique keys) that callers
// make at the same time into one script call (group commit): while an
// insert into a queue is in flight, later ones wait, then go together in
// one round trip and one script, each getting its own IDs. A lone insert
// goes at once; many producers share the round trips and Redis runs one
// script for many jobs. The merged jobs are written all or none, like
// each caller's. No goroutine of its own: the caller at the head of the
// waiters leads the next call.
type inserter struct {
	b      *Backend
	mu     sync.Mutex
	queues map[string]*queueInserts
}

// queueInserts is the state of one queue's inserts.
type queueInserts struct {
	busy    bool // a call is in flight
	waiting []*insertReq
}

// insertReq is one waiting caller's insert.
type insertReq struct {
	params []backend.InsertParams
	first  int64 // the time part of its first ID, once done
	err    error
	done   chan struct{}     // closed once first or err is set
	lead   chan []*insertReq // the batch this caller is to run
}

func newInserter(b *Backend) *inserter {
	return &inserter{b: b, queues: map[string]*queueInserts{}}
}

// insert writes params, all of queue q, and returns the time part of the
// first ID (the others follow it one by one).
func (in *inserter) insert(ctx context.Context, q *queueKeys, params []backend.InsertParams) (int64, error) {
	in.mu.Lock()
	qi := in.queues[q.name]
	if qi == nil {
		qi = &queueInserts{}
		in.queues[q.name] = qi
	}
	if !qi.busy {
		// Nobody else is inserting: go at once, without the machinery of
		// waiting (the case of a lone producer).
		qi.busy = true
		in.mu.Unlock()
		first, err := in.b.runInsert(ctx, q, params)
		in.next(q, qi)
		return first, err
	}
	req := &insertReq{params: params, done: make(chan struct{}), lead: make(chan []*insertReq, 1)}
	qi.waiting = append(qi.waiting, req)
	in.mu.Unlock()
	select {
	case batch := <-req.lead:
		in.run(ctx, q, qi, batch)
	case <-req.done:
	case <-ctx.Done():
		in.mu.Lock()
		if i := slices.Index(qi.waiting, req); i >= 0 {
			qi.waiting = slices.Delete(qi.waiting, i, i+1)
			in.mu.Unlock()
			return 0, context.Cause(ctx)
		}
		in.mu.Unlock()
		// Already taken into a batch: its outcome is ours.
		select {
		case batch := <-req.lead:
			in.run(ctx, q, qi, batch)
		case <-req.done:
		}
	}
	<-req.done
	return req.first, req.err
}

// run writes a batch of waiters in one script call, then hands the queue
// on.
func (in *inserter) run(ctx context.Context, q *queueKeys, qi *queueInserts, batch []*insertReq) {
	params := batch[0].params
	if len(batch) > 1 {
		// The call serves other callers too: the leader's cancellation
		// must not fail theirs (the call timeout still bounds it).
		ctx = context.WithoutCancel(ctx)
		params = nil
		for _, r := range batch {
			params = append(params, r.params...)
		}
	}
	first, err := in.b.runInsert(ctx, q, params)
	for _, r := range batch {
		r.first, r.err = first, err
		first += int64(len(r.params))
		close(r.done)
	}
	in.next(q, qi)
}

// next hands the queue to the next waiters, at most maxMerged jobs of
// them, or marks it idle. The queue's entry stays: one per queue name,
// and queues are bounded (MaxQueues per prefix).
func (in *inserter) next(q *queueKeys, qi *queueInserts) {
	in.mu.Lock()
	if len(qi.waiting) == 0 {
		qi.busy = false
		in.mu.Unlock()
		return
	}
	n, jobs := 0, 0
	for n < len(qi.waiting) && (n == 0 || jobs+len(qi.waiting[n].params) <= maxMerged) {
		jobs += len(qi.waiting[n].params)
		n++
	}
	next := slices.Clone(qi.waiting[:n])
	qi.waiting = slices.Delete(qi.waiting, 0, n)
	in.mu.Unlock()
	next[0].lead <- next
}
