package backendtest

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testNotify: a backend.Notifier wakes subscribers of a queue when jobs
// become claimable there. Backends without the capability skip it.
func testNotify(t *testing.T, h Harness) {
	notifier := func(t *testing.T, b backend.Backend) backend.Notifier {
		t.Helper()
		n, ok := b.(backend.Notifier)
		if !ok {
			t.Skip("backend does not implement backend.Notifier")
		}
		return n
	}
	subscribe := func(t *testing.T, n backend.Notifier, queues ...string) <-chan struct{} {
		t.Helper()
		ch, cancel := n.Subscribe(queues)
		t.Cleanup(cancel)
		return ch
	}

	parallel(t, h, "WakesOnInsert", func(t *testing.T, b backend.Backend) {
		n := notifier(t, b)
		ch := subscribe(t, n, "other", "n")
		insertOne(t, b, job("n", "t"))
		wantWake(t, ch, "insert")
	})

	parallel(t, h, "WakesEverySubscriber", func(t *testing.T, b backend.Backend) {
		n := notifier(t, b)
		ch1 := subscribe(t, n, "n")
		ch2 := subscribe(t, n, "n")
		insertOne(t, b, job("n", "t"))
		wantWake(t, ch1, "insert (first subscriber)")
		wantWake(t, ch2, "insert (second subscriber)")
	})

	parallel(t, h, "WakesWhenAvailableAgain", func(t *testing.T, b backend.Backend) {
		n := notifier(t, b)
		ch := subscribe(t, n, "n")
		insertOne(t, b, job("n", "t"))
		wantWake(t, ch, "insert")

		drain(ch)
		completeFresh(t, b, retry(claimOne(t, b, "n").Ref(), 0, "again"))
		wantWake(t, ch, "retry with no delay")

		drain(ch)
		r := claimOne(t, b, "n")
		if n := release(t, b, r.Ref()); n != 1 {
			t.Fatalf("JobRelease gave back %d jobs, want 1", n)
		}
		wantWake(t, ch, "release")

		drain(ch)
		if rows := claim(t, b, 1, shortLease, "n"); len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		sweepUntil(t, b, 1, 0)
		wantWake(t, ch, "rescue by the lease sweep")

		drain(ch)
		completeFresh(t, b, fail(claimOne(t, b, "n").Ref(), "boom"))
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{})
		if err != nil || res.Replayed != 1 {
			t.Fatalf("FailedReplay = %+v, %v", res, err)
		}
		wantWake(t, ch, "replay")
	})

	parallel(t, h, "CancelIsIdempotent", func(t *testing.T, b backend.Backend) {
		n := notifier(t, b)
		_, cancel := n.Subscribe([]string{"n"})
		cancel()
		cancel()
		// Inserting after cancel must not block or panic.
		insertOne(t, b, job("n", "t"))
		ch, cancel2 := n.Subscribe([]string{"n"})
		defer cancel2()
		insertOne(t, b, job("n", "t"))
		wantWake(t, ch, "insert after an earlier subscription was cancelled")
	})
}

// wantWake waits for a notification on ch.
func wantWake(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("no notification within %s after %s", waitLimit, after)
	}
}

// drain empties a coalesced notification channel.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
