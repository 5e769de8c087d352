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
}

func newQueue() *queue {
	return &queue{
		ready:     minHeap[*backend.JobRow]{less: claimsBefore},
		scheduled: minHeap[*backend.JobRow]{less: dueBefore},
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
func (q *queue) addPending(j *backend.JobRow, now time.Time) {
	if j.AvailableAt.After(now) {
		q.scheduled.push(j)
		return
	}
	q.ready.push(j)
}

// promote moves scheduled jobs that are due by now to ready.
func (q *queue) promote(now time.Time) {
	for q.scheduled.len() > 0 && !q.scheduled.peek().AvailableAt.After(now) {
		q.ready.push(q.scheduled.pop())
	}
}

// oldestDue is the earliest AvailableAt among the due jobs, zero when
// none is due. The ready heap is in claim order, so this scans it: stats
// are read once per scrape, not per claim.
func (q *queue) oldestDue() time.Time {
	var oldest time.Time
	for _, j := range q.ready.items {
		if oldest.IsZero() || j.AvailableAt.Before(oldest) {
			oldest = j.AvailableAt
		}
	}
	return oldest
}

// empty reports whether the queue holds nothing, so it can be dropped.
func (q *queue) empty() bool {
	return q.ready.len() == 0 && q.scheduled.len() == 0 && q.reserved == 0 && q.failed == 0
}
