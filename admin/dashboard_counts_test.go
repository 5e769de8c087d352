package admin

import (
	"context"
	"github.com/jobq/jobq/internal/storetest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	syncb "github.com/jobq/jobq/backend/inline"
)

// The chart counts the jobs a healthy system enqueues and finishes at once
// (done jobs deleted, nothing kept, so no job ID is left to see) from the
// backend's insert count, on every backend that keeps one: on Redis too,
// whose IDs are timestamps.
func TestCountsThroughput(t *testing.T) {
	all := append([]storetest.Store{{Name: "memory", URL: func(testing.TB) string { return "memory:" }}}, stores...)
	for _, st := range all {
		t.Run(st.Name, func(t *testing.T) {
			b := openStore(t, st.URL(t))
			now := time.Date(2026, 1, 1, 12, 0, 5, 0, time.UTC)
			c := newCountsCache(jobq.NewInspector(b), func() time.Time { return now })
			insertJobs(t, b, "old", 3, `{}`, 0) // live before the first sample
			sampleAt(t, c)

			// 40 enqueued: 25 done and deleted, 5 failed, 10 still live.
			insertJobs(t, b, "q", 30, `{}`, 0)
			for range 10 {
				insertJobs(t, b, "q", 1, `{}`, 0) // single inserts take another path on Redis
			}
			finish(t, b, "q", 25, backend.OutcomeDone)
			failJobs(t, b, "f", 5, `{}`, "boom")
			now = now.Add(sampleEvery)
			sampleAt(t, c)

			h := c.history()
			if got := h[59]; !got.Known || got.Completed != 25 || got.Failed != 5 || got.Unsupported {
				t.Fatalf("this minute: %+v, want 25 completed and 5 failed", got)
			}
			if got := h[58]; got.Known {
				t.Fatalf("the minute before the first sample: %+v, want unknown", got)
			}
		})
	}
}

// A backend without an insert count (sync) has no throughput: every
// minute is unknown and says why, so the chart can tell it from "no
// samples yet".
func TestCountsThroughputUnsupported(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 5, 0, time.UTC)
	c := newCountsCache(jobq.NewInspector(syncb.New()), func() time.Time { return now })
	sampleAt(t, c)
	now = now.Add(sampleEvery)
	sampleAt(t, c)
	if len(c.samples) != 2 {
		t.Fatalf("%d samples, want 2", len(c.samples))
	}
	for _, m := range c.history() {
		if m.Known || !m.Unsupported {
			t.Fatalf("minute %+v on sync: want unknown and unsupported", m)
		}
	}
}

// sampleAt refreshes c's counts, taking a sample when one is due.
func sampleAt(t *testing.T, c *countsCache) {
	t.Helper()
	if _, _, err := c.get(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// finish claims n due jobs of queue and ends them with kind (not kept).
func finish(t *testing.T, b backend.Backend, queue string, n int, kind backend.OutcomeKind) {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{queue}, Max: n, Lease: time.Minute})
	if err != nil || len(rows) != n {
		t.Fatalf("claim %d of %s: %d rows, %v", n, queue, len(rows), err)
	}
	outs := make([]backend.Outcome, n)
	for i, r := range rows {
		outs[i] = backend.Outcome{Ref: r.Ref(), Kind: kind}
	}
	if res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil || len(res.Stale) != 0 {
		t.Fatalf("complete: %+v, %v", res, err)
	}
}

// With Options.Sample the chart fills while nobody looks: one sample every
// sampleEvery without a request, and the loop ends with the context.
func TestSampleInBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memoryBackend(t)
		ctx, cancel := context.WithCancel(t.Context())
		h, err := New(Options{Inspector: jobq.NewInspector(b), Sample: ctx})
		if err != nil {
			t.Fatal(err)
		}
		c := h.(*server).dash.counts
		samples := func() int {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.samples)
		}
		time.Sleep(3*sampleEvery + sampleEvery/2)
		synctest.Wait()
		if n := samples(); n != 3 {
			t.Errorf("%d samples after 3.5 sample intervals without a request, want 3", n)
		}
		cancel()
		synctest.Wait() // the loop has returned: the bubble would not end otherwise
		time.Sleep(2 * sampleEvery)
		if n := samples(); n != 3 {
			t.Errorf("%d samples after the context ended, want still 3", n)
		}
	})
}
