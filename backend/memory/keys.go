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

// keyLeft unfiles a keyed job that is no longer live.
func (b *Backend) keyLeft(j *backend.JobRow) {
	if k, ok := b.queue(j.Queue).keys[j.Key]; ok {
		k.live--
		b.dropKeyIfEmpty(j.Queue, j.Key)
	}
}

// keyReleased counts a keyed job's reservation ended, and wakes the
// queue when its rules were holding a job back for it.
func (b *Backend) keyReleased(j *backend.JobRow) {
	if k, ok := b.queue(j.Queue).keys[j.Key]; ok {
		k.reserved--
	}
	if r := b.rules(j.Queue); r.Limit > 0 || r.Ordered {
		b.wakeOne(j.Queue)
	}
}

// keySource is what one claim may take from the keys of one queue: the
// claimable keys in claim order of their first job, each with how many
// jobs it may still give.
type keySource struct {
	keys minHeap[*keyTake]
}

type keyTake struct {
	k    *keyState
	left int
}

// keySource collects q's claimable keys under rules for a claim of want.
// Called with b.mu held, which serializes claims.
func (b *Backend) keySource(q *queue, rules backend.KeyRules, want int) *keySource {
	s := &keySource{keys: minHeap[*keyTake]{less: func(x, y *keyTake) bool { return claimsBefore(x.k.ready.peek(), y.k.ready.peek()) }}}
	for _, k := range q.keys {
		if k.ready.len() == 0 {
			continue
		}
		left := want
		if rules.Limit > 0 {
			left = min(left, rules.Limit-k.reserved)
		}
		if rules.Ordered {
			head := b.top(&k.byID)
			if k.reserved > 0 || head != k.ready.peek() || rules.Policy() == backend.KeyHold && k.failed > 0 {
				continue
			}
			left = 1
		}
		if left > 0 {
			s.keys.push(&keyTake{k: k, left: left})
		}
	}
	return s
}

// peek returns the job the source would give next, nil when none.
func (s *keySource) peek() *backend.JobRow {
	if s.keys.len() == 0 {
		return nil
	}
	return s.keys.peek().k.ready.peek()
}

// take removes and returns the job peek returned.
func (s *keySource) take() *backend.JobRow {
	t := s.keys.pop()
	j := t.k.ready.pop()
	t.k.reserved++
	t.left--
	if t.left > 0 && t.k.ready.len() > 0 {
		s.keys.push(t)
	}
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
	if q, ok := b.queues[queue]; ok && before.Ordered != rules.Ordered {
		for _, k := range q.keys {
			fresh := newKeyState(rules.Ordered).ready
			for _, j := range k.ready.items {
				fresh.push(j)
			}
			k.ready = fresh
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
