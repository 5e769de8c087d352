package memory

import (
	"time"

	"github.com/jobq/jobq/backend"
)

// queue indexes one queue's live jobs so a claim costs O(log n) per job
// instead of a scan: due jobs in a heap ordered for claiming, not-yet-due
// jobs in a heap ordered by due time, promoted lazily when a claim or a
// stats call looks at the queue.
type queue struct {
	ready     minHeap[*backend.JobRow] // pending and due: claim order (claimsBefore)
	scheduled minHeap[*backend.JobRow] // pending, due later: AvailableAt asc, ID asc
	reserved  int
	failed    int // rows in failed_jobs for this queue
	// keys holds the keyed jobs' index (see keys.go): a due keyed job
	// waits in its key's ready heap, counted in keyedReady, instead of in
	// ready; turns finds the lowest turn among pending keyed jobs (lazy).
	keys       map[string]*keyState
	keyedReady int
	turns      minHeap[*backend.JobRow]
	keyHeap    minHeap[keyEntry] // the keys that may give a job (see touch)
}

func newQueue() *queue {
	return &queue{
		ready:     minHeap[*backend.JobRow]{less: claimsBefore},
		scheduled: minHeap[*backend.JobRow]{less: dueBefore},
		keys:      map[string]*keyState{},
		turns:     minHeap[*backend.JobRow]{less: func(a, b *backend.JobRow) bool { return a.Turn < b.Turn }},
		keyHeap:   minHeap[keyEntry]{less: entryBefore},
	}
}

// claimsBefore is the claim order: higher priority first, then the job
// due first (AvailableAt, so a retried or released job waits behind the
// jobs that were due before it came back, whatever its ID), then older.
// A job's AvailableAt does not change while it is in the ready heap.
func claimsBefore(a, b *backend.JobRow) bool { return backend.CompareClaimOrder(a, b) < 0 }

func dueBefore(a, b *backend.JobRow) bool {
	if !a.AvailableAt.Equal(b.AvailableAt) {
		return a.AvailableAt.Before(b.AvailableAt)
	}
	return a.ID < b.ID
}

// addPending files a pending job under ready or scheduled by its due time.
// A keyed job's key must be indexed already (Backend.keyJoined).
func (q *queue) addPending(j *backend.JobRow, now time.Time) {
	if j.Key != "" {
		q.turns.push(j)
	}
	if j.AvailableAt.After(now) {
		q.scheduled.push(j)
		return
	}
	q.fileReady(j)
}

// fileReady puts a due job in the ready heap it claims from.
func (q *queue) fileReady(j *backend.JobRow) {
	if j.Key == "" {
		q.ready.push(j)
		return
	}
	k := q.keys[j.Key]
	var before *backend.JobRow
	if k.ready.len() > 0 {
		before = k.ready.peek()
	}
	k.ready.push(j)
	q.keyedReady++
	if k.ready.peek() != before {
		q.touch(k)
	}
}

// promote moves scheduled jobs that are due by now to ready.
func (q *queue) promote(now time.Time) {
	for q.scheduled.len() > 0 && !q.scheduled.peek().AvailableAt.After(now) {
		q.fileReady(q.scheduled.pop())
	}
}

// oldestDue is the earliest AvailableAt among the due jobs, zero when
// none is due. The ready heap is in claim order, so this scans it: stats
// are read once per scrape, not per claim.
func (q *queue) oldestDue() time.Time {
	var oldest time.Time
	see := func(items []*backend.JobRow) {
		for _, j := range items {
			if oldest.IsZero() || j.AvailableAt.Before(oldest) {
				oldest = j.AvailableAt
			}
		}
	}
	see(q.ready.items)
	for _, k := range q.keys {
		see(k.ready.items)
	}
	return oldest
}

// empty reports whether the queue holds nothing, so it can be dropped.
func (q *queue) empty() bool {
	return q.ready.len() == 0 && q.scheduled.len() == 0 && q.reserved == 0 && q.failed == 0 && len(q.keys) == 0
}
