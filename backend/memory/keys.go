package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// keyState indexes the live jobs of one key of one queue. A keyed job that
// is due waits in its key's ready heap, not in the queue's, so a claim
// sees each key once, whatever its backlog. The heaps of live jobs are
// lazy: an entry is the job's row as it was pushed, valid while b.jobs
// still holds that row (a replay makes a new row), so leaving needs no
// search.
type keyState struct {
	ready    minHeap[*backend.JobRow] // due pending jobs: claim order, or ID order when ordered
	live     int                      // pending and reserved jobs
	reserved int                      // reserved and cancelling jobs
	failed   int                      // jobs in failed_jobs
	byID     minHeap[*backend.JobRow] // live jobs, lowest ID first (lazy)
	byTurn   minHeap[*backend.JobRow] // live jobs, highest turn first (lazy)
}

func idBefore(a, b *backend.JobRow) bool { return a.ID < b.ID }

func newKeyState(ordered bool) *keyState {
	k := &keyState{
		byID:   minHeap[*backend.JobRow]{less: idBefore},
		byTurn: minHeap[*backend.JobRow]{less: func(a, b *backend.JobRow) bool { return a.Turn > b.Turn }},
	}
	k.ready.less = claimsBefore
	if ordered {
		k.ready.less = idBefore
	}
	return k
}

// top returns the first valid entry of a lazy heap, nil when none.
func (b *Backend) top(h *minHeap[*backend.JobRow]) *backend.JobRow {
	for h.len() > 0 {
		if j := h.peek(); b.jobs[j.ID] == j {
			return j
		}
		h.pop()
	}
	return nil
}

// rules returns the key rules of queue (zero when none).
func (b *Backend) rules(queue string) backend.KeyRules {
	if c, ok := b.control[queue]; ok {
		return c.keys
	}
	return backend.KeyRules{}
}

// keyOf returns the state of j's key, creating it.
func (b *Backend) keyOf(j *backend.JobRow) *keyState {
	q := b.queue(j.Queue)
	k, ok := q.keys[j.Key]
	if !ok {
		k = newKeyState(b.rules(j.Queue).Ordered)
		q.keys[j.Key] = k
	}
	return k
}

// dropKeyIfEmpty forgets a key with no live and no failed job.
func (b *Backend) dropKeyIfEmpty(queue, key string) {
	q, ok := b.queues[queue]
	if !ok {
		return
	}
	if k, ok := q.keys[key]; ok && k.live == 0 && k.failed == 0 {
		delete(q.keys, key)
	}
}

// keyJoined files a keyed job that became live (inserted or replayed),
// giving a new one its turn.
func (b *Backend) keyJoined(j *backend.JobRow) {
	q := b.queue(j.Queue)
	k := b.keyOf(j)
	if j.Turn == 0 {
		var last, front int64
		if t := b.top(&k.byTurn); t != nil {
			last = t.Turn
		}
		if f := b.pendingFront(q); f != nil {
			front = f.Turn
		}
		j.Turn = max(last, front) + 1
	}
	k.live++
	k.byID.push(j)
	k.byTurn.push(j)
}

// pendingFront returns the pending keyed job of q with the lowest turn.
func (b *Backend) pendingFront(q *queue) *backend.JobRow {
	for q.turns.len() > 0 {
		if j := q.turns.peek(); b.jobs[j.ID] == j && j.Status == backend.StatePending {
			return j
		}
		q.turns.pop()
	}
	return nil
}

// keyLeft unfiles a keyed job that is no longer live: an ordered key's
// next job may now be its head.
func (b *Backend) keyLeft(j *backend.JobRow) {
	q := b.queue(j.Queue)
	if k, ok := q.keys[j.Key]; ok {
		k.live--
		q.touch(k)
		b.dropKeyIfEmpty(j.Queue, j.Key)
	}
}

// keyReleased counts a keyed job's reservation ended, and wakes the
// queue when its rules were holding a job back for it.
func (b *Backend) keyReleased(j *backend.JobRow) {
	q := b.queue(j.Queue)
	if k, ok := q.keys[j.Key]; ok {
		k.reserved--
		q.touch(k)
	}
	if r := b.rules(j.Queue); r.Limit > 0 || r.Ordered {
		b.wakeOne(j.Queue)
	}
}

// keyEntry files a key in its queue's keyHeap under the job it would
// give next. The heap is lazy: an entry is valid while top is still its
// key's first ready job, and a key is filed again whenever that changes
// or something that blocked it ends (touch), so a claim looks at the keys
// in claim order without visiting the blocked ones each time.
type keyEntry struct {
	k   *keyState
	top *backend.JobRow
}

func entryBefore(a, b keyEntry) bool { return claimsBefore(a.top, b.top) }

// touch files k under its first ready job, if it has one.
func (q *queue) touch(k *keyState) {
	if k.ready.len() > 0 {
		q.keyHeap.push(keyEntry{k: k, top: k.ready.peek()})
	}
}

// claimable reports whether k may give its first ready job under rules.
func (b *Backend) claimable(k *keyState, rules backend.KeyRules) bool {
	if rules.Limit > 0 && k.reserved >= rules.Limit {
		return false
	}
	if !rules.Ordered {
		return true
	}
	held := rules.Policy() == backend.KeyHold && k.failed > 0
	return k.reserved == 0 && !held && b.top(&k.byID) == k.ready.peek()
}

// peekKeyed returns the keyed job of q a claim would take next, nil when
// no key may give one, dropping the invalid and blocked entries it meets
// (what unblocks a key files it again). Called with b.mu held.
func (b *Backend) peekKeyed(q *queue, rules backend.KeyRules) *backend.JobRow {
	for q.keyHeap.len() > 0 {
		e := q.keyHeap.peek()
		if e.k.ready.len() > 0 && e.k.ready.peek() == e.top && b.claimable(e.k, rules) {
			return e.top
		}
		q.keyHeap.pop()
	}
	return nil
}

// takeKeyed removes and returns the job peekKeyed returned.
func (q *queue) takeKeyed() *backend.JobRow {
	k := q.keyHeap.pop().k
	j := k.ready.pop()
	k.reserved++
	q.keyedReady--
	q.touch(k)
	return j
}

// keyEnded applies an ordered key's halt policy to j, a job of it that
// just failed for good or ended cancelled and is no longer live: when no
// live job of its key is older, the key's pending jobs after it end
// cancelled. Called with b.mu held.
func (b *Backend) keyEnded(j *backend.JobRow, now time.Time) {
	if j.Key == "" || b.rules(j.Queue).Policy() != backend.KeyHalt {
		return
	}
	k, ok := b.queue(j.Queue).keys[j.Key]
	if !ok {
		return
	}
	if head := b.top(&k.byID); head != nil && head.ID < j.ID {
		return
	}
	var rest []*backend.JobRow
	for _, x := range k.byID.items {
		if b.jobs[x.ID] == x && x.Status == backend.StatePending && x.ID > j.ID && !slices.Contains(rest, x) {
			rest = append(rest, x)
		}
	}
	reason := backend.HaltedError(j.Key, j.ID)
	for _, x := range rest {
		x.LastError = reason
		b.removePending(x)
		b.keep(x, backend.StateCancelled, now)
	}
}

// QueueSetKeys implements backend.KeyController.
func (b *Backend) QueueSetKeys(ctx context.Context, queue string, rules backend.KeyRules) error {
	op := "set key rules of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateKeyRules(rules); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := b.lock(ctx, op); err != nil {
		return err
	}
	defer b.mu.Unlock()
	before := b.rules(queue)
	b.controlOf(queue).keys = rules
	b.pruneControl(queue)
	// Ordered keys keep their ready jobs in ID order, the others in claim
	// order: a change of ordering re-sorts them.
	if q, ok := b.queues[queue]; ok {
		for _, k := range q.keys {
			if before.Ordered != rules.Ordered {
				fresh := newKeyState(rules.Ordered).ready
				for _, j := range k.ready.items {
					fresh.push(j)
				}
				k.ready = fresh
			}
			q.touch(k) // looser rules may unblock it
		}
	}
	b.wakeOne(queue)
	return nil
}

// KeyList implements backend.KeyController.
func (b *Backend) KeyList(ctx context.Context, params backend.KeyListParams) ([]backend.KeyInfo, error) {
	limit, err := backend.PageLimit(params.Limit, backend.DefaultListLimit)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	if err := b.lock(ctx, "list keys"); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []backend.KeyInfo
	for name, q := range b.queues {
		if params.Queue != "" && name != params.Queue {
			continue
		}
		hold := b.rules(name).Policy() == backend.KeyHold
		for key, k := range q.keys {
			info := backend.KeyInfo{
				Queue: name, Key: key,
				Pending:  int64(k.live - k.reserved),
				Reserved: int64(k.reserved),
				Failed:   int64(k.failed),
				Held:     hold && k.failed > 0,
			}
			if params.Held && !info.Held {
				continue
			}
			if info.Held {
				for _, f := range b.failed {
					if f.Queue == name && f.Key == key && (info.HeadID == 0 || f.JobID < info.HeadID) {
						info.HeadID, info.HeldSince = f.JobID, f.FailedAt
					}
				}
			}
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(x, y backend.KeyInfo) int {
		if c := cmp.Compare(y.Pending+y.Reserved, x.Pending+x.Reserved); c != 0 {
			return c
		}
		if c := strings.Compare(x.Queue, y.Queue); c != 0 {
			return c
		}
		return strings.Compare(x.Key, y.Key)
	})
	return out[:min(len(out), limit)], nil
}
