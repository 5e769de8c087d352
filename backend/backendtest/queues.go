package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// testQueues: a backend.QueueController pauses and limits queues inside
// the claim itself. Paused queues are skipped by every claim, in-flight
// jobs unaffected; a concurrency limit is never exceeded, however many
// claimers race; a rate limit counts claims per epoch-aligned window; jobs
// held back keep their attempts; settings are stored and listed.
// Backends without the capability skip it.
func testQueues(t *testing.T, h Harness) {
	ctl := func(t *testing.T, b backend.Backend) backend.QueueController {
		t.Helper()
		c, ok := b.(backend.QueueController)
		if !ok {
			t.Skip("backend does not implement backend.QueueController")
		}
		return c
	}
	pause := func(t *testing.T, c backend.QueueController, q string, paused bool) {
		t.Helper()
		if err := c.QueuePause(t.Context(), q, paused); err != nil {
			t.Fatalf("QueuePause(%s, %v): %v", q, paused, err)
		}
	}
	limit := func(t *testing.T, c backend.QueueController, q string, l backend.QueueLimits) {
		t.Helper()
		if err := c.QueueSetLimits(t.Context(), q, l); err != nil {
			t.Fatalf("QueueSetLimits(%s, %+v): %v", q, l, err)
		}
	}
	list := func(t *testing.T, c backend.QueueController) []backend.QueueSettings {
		t.Helper()
		s, err := c.QueueSettingsList(t.Context())
		if err != nil {
			t.Fatalf("QueueSettingsList: %v", err)
		}
		return s
	}
	pendingUntouched := func(t *testing.T, b backend.Backend, ids ...int64) {
		t.Helper()
		for _, id := range ids {
			wantPendingNow(t, b, id, 0)
		}
	}

	parallel(t, h, "PauseStopsClaims", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		pids := insertIDs(t, b, job("p", "t"), job("p", "t"), job("p", "t"))
		other := insertOne(t, b, job("other", "t"))
		inflight := claimOne(t, b, "p")
		pause(t, c, "p", true)
		pause(t, c, "p", true) // idempotent
		claimNone(t, b, "p")
		// A claim over both queues takes only the unpaused one's job.
		if rows := claim(t, b, 10, longLease, "p", "other"); !slices.Equal(ids(rows), []int64{other}) {
			t.Fatalf("claim of p (paused) and other = %v, want only %d", ids(rows), other)
		}
		// The job in flight is unaffected: it keeps its lease and completes.
		if lost, err := b.JobExtendLease(t.Context(), backend.ExtendLeaseParams{Refs: []backend.JobRef{inflight.Ref()}, Lease: longLease}); err != nil || len(lost) != 0 {
			t.Fatalf("JobExtendLease of the in-flight job = %v, %v; want kept", lost, err)
		}
		completeFresh(t, b, done(inflight.Ref()))
		gone(t, b, inflight.ID)
		// Enqueues go on; nothing waiting spent an attempt.
		late := insertOne(t, b, job("p", "t"))
		claimNone(t, b, "p")
		pendingUntouched(t, b, pids[1], pids[2], late)
		wantStats(t, b, backend.QueueStats{Queue: "p", Pending: 3})

		pause(t, c, "p", false)
		if rows := claim(t, b, 10, longLease, "p"); !slices.Equal(sortedIDs(rows), []int64{pids[1], pids[2], late}) {
			t.Fatalf("claim after resume = %v, want %v", sortedIDs(rows), []int64{pids[1], pids[2], late})
		}
	})

	parallel(t, h, "PausedRetryWaits", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		id := insertOne(t, b, job("p", "t"))
		r := claimOne(t, b, "p")
		pause(t, c, "p", true)
		completeFresh(t, b, retry(r.Ref(), 0, "again"))
		claimNone(t, b, "p")
		wantStatus(t, b, id, backend.StatePending, 1)
		pause(t, c, "p", false)
		if r := claimOne(t, b, "p"); r.ID != id || r.Attempts != 2 {
			t.Fatalf("claimed %d attempt %d after resume, want %d attempt 2", r.ID, r.Attempts, id)
		}
	})

	parallel(t, h, "ResumeWakes", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		n, ok := b.(backend.Notifier)
		if !ok {
			t.Skip("backend does not implement backend.Notifier")
		}
		insertOne(t, b, job("p", "t"))
		pause(t, c, "p", true)
		ch, cancel := n.Subscribe([]string{"p"})
		defer cancel()
		time.Sleep(50 * time.Millisecond) // a listener's first wake-up, if any
		drain(ch)
		pause(t, c, "p", false)
		wantWake(t, ch, "resume")
		claimOne(t, b, "p")
	})

	parallel(t, h, "ConcurrencyLimit", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		limit(t, c, "c", backend.QueueLimits{Concurrency: 3})
		var all []int64
		for range 8 {
			all = append(all, insertOne(t, b, job("c", "t")))
		}
		held := claim(t, b, 10, longLease, "c")
		if len(held) != 3 {
			t.Fatalf("claim of 10 under a limit of 3 took %d jobs", len(held))
		}
		claimNone(t, b, "c")
		pendingUntouched(t, b, all[3:]...)
		// Every way a job stops being reserved frees its slot.
		completeFresh(t, b, done(held[0].Ref()))
		next := claim(t, b, 10, longLease, "c")
		if len(next) != 1 {
			t.Fatalf("claim after one job was done took %d, want 1", len(next))
		}
		completeFresh(t, b, retry(held[1].Ref(), time.Hour, "later"))
		if got := claim(t, b, 10, longLease, "c"); len(got) != 1 {
			t.Fatalf("claim after a retry took %d, want 1", len(got))
		}
		if n := release(t, b, held[2].Ref()); n != 1 {
			t.Fatalf("JobRelease gave back %d jobs, want 1", n)
		}
		if got := claim(t, b, 10, longLease, "c"); len(got) != 1 {
			t.Fatalf("claim after a release took %d, want 1", len(got))
		}
		claimNone(t, b, "c")
		wantStats(t, b, backend.QueueStats{Queue: "c", Pending: 3, Scheduled: 1, Reserved: 3})
		// Raising the limit lets more go at once; clearing it, all.
		limit(t, c, "c", backend.QueueLimits{Concurrency: 4})
		if got := claim(t, b, 10, longLease, "c"); len(got) != 1 {
			t.Fatalf("claim after raising the limit to 4 took %d, want 1", len(got))
		}
		limit(t, c, "c", backend.QueueLimits{})
		if got := claim(t, b, 10, longLease, "c"); len(got) != 2 {
			t.Fatalf("claim after clearing the limit took %d, want 2", len(got))
		}
	})

	// A running job whose cancel was requested still runs until its holder
	// ends it: it keeps its slot, and frees it only when it ends.
	parallel(t, h, "ConcurrencyLimitCountsCancelling", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		cn, ok := b.(backend.Canceller)
		if !ok {
			t.Skip("backend does not implement backend.Canceller")
		}
		limit(t, c, "cc", backend.QueueLimits{Concurrency: 1})
		insertIDs(t, b, job("cc", "t"), job("cc", "t"))
		held := claimOne(t, b, "cc")
		res, err := cn.JobCancel(t.Context(), []int64{held.ID})
		if err != nil || len(res) != 1 || res[0].Outcome != backend.CancelRequested {
			t.Fatalf("JobCancel(running job) = %+v, %v; want CancelRequested", res, err)
		}
		claimNone(t, b, "cc")
		if res := releaseRes(t, b, held.Ref()); !slices.Equal(res.Cancelled, []backend.JobRef{held.Ref()}) || len(res.Stale) != 0 {
			t.Fatalf("JobRelease of the cancelling attempt = %+v; want Cancelled [%v]", res, held.Ref())
		}
		claimOne(t, b, "cc")
	})

	parallel(t, h, "ConcurrencyLimitUnderRace", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		const limitN, jobs, claimers = 3, 60, 8
		limit(t, c, "race", backend.QueueLimits{Concurrency: limitN})
		ps := make([]backend.InsertParams, jobs)
		for i := range ps {
			ps[i] = job("race", "t")
		}
		insertIDs(t, b, ps...)
		// held counts jobs between their claim's return and their
		// completion's start, so it never exceeds what the backend holds:
		// above the limit it proves an overshoot.
		var held, peak, finished atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		deadline := time.Now().Add(20 * time.Second)
		for range claimers {
			wg.Go(func() {
				for finished.Load() < jobs && time.Now().Before(deadline) {
					rows, err := b.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"race"}, Max: 5, Lease: longLease})
					if err != nil {
						errs <- err
						return
					}
					if len(rows) == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					now := held.Add(int64(len(rows)))
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					for _, r := range rows {
						if r.Attempts != 1 {
							errs <- errors.New("a job was claimed with attempts != 1: waiting spent an attempt")
							return
						}
					}
					time.Sleep(2 * time.Millisecond)
					out := make([]backend.Outcome, len(rows))
					for i, r := range rows {
						out[i] = done(r.Ref())
					}
					held.Add(-int64(len(rows)))
					if _, err := b.JobComplete(context.Background(), backend.CompleteParams{Outcomes: out}); err != nil {
						errs <- err
						return
					}
					finished.Add(int64(len(rows)))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if finished.Load() != jobs {
			t.Fatalf("finished %d of %d jobs in time", finished.Load(), jobs)
		}
		if p := peak.Load(); p > limitN || p < 1 {
			t.Fatalf("peak of jobs held at once = %d, want 1..%d", p, limitN)
		}
		wantNoStats(t, b)
	})

	parallel(t, h, "RateLimit", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		// An hour's window: the second claim falls in the same one.
		limit(t, c, "r", backend.QueueLimits{Rate: 4, RatePeriod: time.Hour})
		var all []int64
		for range 7 {
			all = append(all, insertOne(t, b, job("r", "t")))
		}
		got := claim(t, b, 10, longLease, "r")
		if len(got) != 4 {
			t.Fatalf("claim under a rate of 4 per hour took %d jobs", len(got))
		}
		// A rate limits starts, not jobs running: finishing frees nothing.
		for _, r := range got {
			completeFresh(t, b, done(r.Ref()))
		}
		claimNone(t, b, "r")
		pendingUntouched(t, b, all[4:]...)
		// Setting limits starts a new window.
		limit(t, c, "r", backend.QueueLimits{Rate: 2, RatePeriod: time.Hour})
		if got := claim(t, b, 10, longLease, "r"); len(got) != 2 {
			t.Fatalf("claim after new limits took %d, want 2", len(got))
		}
		claimNone(t, b, "r")
	})

	parallel(t, h, "RateWindow", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		const rate, period = 3, 200 * time.Millisecond
		limit(t, c, "w", backend.QueueLimits{Rate: rate, RatePeriod: period})
		const jobs = 12
		ps := make([]backend.InsertParams, jobs)
		for i := range ps {
			ps[i] = job("w", "t")
		}
		insertIDs(t, b, ps...)
		perWindow := map[int64]int{}
		var claimed []*backend.JobRow
		eventually(t, waitLimit, "every job to be claimed window by window", func() bool {
			rows := claim(t, b, 10, longLease, "w")
			for _, r := range rows {
				w, _ := backend.RateWindow(r.ReservedAt, period)
				perWindow[w]++
			}
			claimed = append(claimed, rows...)
			return len(claimed) == jobs
		})
		for w, n := range perWindow {
			if n > rate {
				t.Fatalf("window %d of %s: %d claims, want at most %d (all: %v)", w, period, n, rate, perWindow)
			}
		}
		if len(perWindow) < jobs/rate {
			t.Fatalf("%d jobs claimed in %d windows, want at least %d", jobs, len(perWindow), jobs/rate)
		}
		for _, r := range claimed {
			if r.Attempts != 1 {
				t.Fatalf("job %d claimed with attempts %d: waiting spent an attempt", r.ID, r.Attempts)
			}
		}
	})

	parallel(t, h, "BothLimits", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		limit(t, c, "b", backend.QueueLimits{Concurrency: 2, Rate: 3, RatePeriod: time.Hour})
		for range 5 {
			insertOne(t, b, job("b", "t"))
		}
		first := claim(t, b, 10, longLease, "b")
		if len(first) != 2 {
			t.Fatalf("claim took %d, want 2 (concurrency)", len(first))
		}
		completeFresh(t, b, done(first[0].Ref()), done(first[1].Ref()))
		if got := claim(t, b, 10, longLease, "b"); len(got) != 1 {
			t.Fatalf("second claim took %d, want 1 (the rate's third start)", len(got))
		}
		claimNone(t, b, "b")
	})

	parallel(t, h, "OtherQueuesUnaffected", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		limit(t, c, "lim", backend.QueueLimits{Concurrency: 1})
		pause(t, c, "off", true)
		for range 3 {
			insertIDs(t, b, job("lim", "t"), job("free", "t"), job("off", "t"))
		}
		rows := claim(t, b, 10, longLease, "lim", "free", "off")
		count := map[string]int{}
		for _, r := range rows {
			count[r.Queue]++
		}
		if count["lim"] != 1 || count["free"] != 3 || count["off"] != 0 {
			t.Fatalf("claim over a limited, a free and a paused queue took %v, want lim 1, free 3, off 0", count)
		}
		// The limit also holds when the batch is filled by several claims.
		if rows := claim(t, b, 10, longLease, "lim", "free", "off"); len(rows) != 0 {
			t.Fatalf("second claim took %d jobs, want none", len(rows))
		}
	})

	parallel(t, h, "Settings", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		if s := list(t, c); len(s) != 0 {
			t.Fatalf("QueueSettingsList of a new store = %+v, want none", s)
		}
		pause(t, c, "zeta", true)
		limit(t, c, "alpha", backend.QueueLimits{Concurrency: 3, Rate: 50, RatePeriod: time.Second})
		pause(t, c, "alpha", true)
		limit(t, c, "mid", backend.QueueLimits{Rate: 7, RatePeriod: 1500 * time.Millisecond})
		want := []backend.QueueSettings{
			{Queue: "alpha", Paused: true, QueueLimits: backend.QueueLimits{Concurrency: 3, Rate: 50, RatePeriod: time.Second}},
			{Queue: "mid", QueueLimits: backend.QueueLimits{Rate: 7, RatePeriod: 1500 * time.Millisecond}},
			{Queue: "zeta", Paused: true},
		}
		if got := list(t, c); !slices.Equal(got, want) {
			t.Fatalf("QueueSettingsList =\n%+v\nwant\n%+v", got, want)
		}
		// Resuming keeps the limits; clearing them keeps the pause.
		pause(t, c, "alpha", false)
		limit(t, c, "zeta", backend.QueueLimits{})
		want[0].Paused = false
		if got := list(t, c); !slices.Equal(got, want) {
			t.Fatalf("after resuming alpha and clearing zeta's (absent) limits:\n%+v\nwant\n%+v", got, want)
		}
		// A queue neither paused nor limited is not listed.
		limit(t, c, "alpha", backend.QueueLimits{})
		pause(t, c, "zeta", false)
		limit(t, c, "mid", backend.QueueLimits{})
		if got := list(t, c); len(got) != 0 {
			t.Fatalf("QueueSettingsList after clearing everything = %+v, want none", got)
		}
		// Settings do not make a queue appear in the stats.
		pause(t, c, "quiet", true)
		wantNoStats(t, b)
	})

	parallel(t, h, "Invalid", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		wantInvalid(t, c.QueuePause(t.Context(), "bad queue", true), "queue")
		wantInvalid(t, c.QueueSetLimits(t.Context(), "", backend.QueueLimits{Concurrency: 1}), "queue")
		for _, l := range []backend.QueueLimits{
			{Concurrency: -1},
			{Rate: -1, RatePeriod: time.Second},
			{Rate: 5},
			{RatePeriod: time.Second},
			{Rate: 5, RatePeriod: time.Microsecond},
			{Rate: 5, RatePeriod: 1500 * time.Microsecond},
			{Rate: 5, RatePeriod: 48 * time.Hour},
		} {
			err := c.QueueSetLimits(t.Context(), "q", l)
			if !errors.Is(err, backend.ErrInvalidInput) {
				t.Errorf("QueueSetLimits(%+v) = %v, want ErrInvalidInput", l, err)
			}
		}
		if s := list(t, c); len(s) != 0 {
			t.Fatalf("refused settings were stored: %+v", s)
		}
	})

	parallel(t, h, "WorkerUnderLimit", func(t *testing.T, b backend.Backend) {
		c := ctl(t, b)
		const limitN, jobs = 2, 24
		limit(t, c, "default", backend.QueueLimits{Concurrency: limitN})
		var running, peak, runs atomic.Int64
		reg := jobq.NewRegistry()
		reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error {
			now := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			runs.Add(1)
			time.Sleep(10 * time.Millisecond)
			return nil
		})
		for range jobs {
			enqueue(t, b, "slow")
		}
		// Two workers of 8 slots each, polling every 20s: by polls alone
		// the 24 jobs would take about two minutes (2 per poll); only the
		// wake-ups of freed slots finish them within waitLimit (well
		// under 1s when the machine is quiet). The polls were every 2s
		// and the bound 10s, which a loaded machine (-race, a CPU hog)
		// can come near: slower polls let the bound be generous.
		stops := []func(){runWorkerPoll(t, b, reg, 20*time.Second), runWorkerPoll(t, b, reg, 20*time.Second)}
		eventually(t, waitLimit, "every job to run (freed slots wake the workers)", func() bool { return len(stats(t, b)) == 0 })
		for _, stop := range stops {
			stop()
		}
		if p := peak.Load(); p > limitN {
			t.Fatalf("peak running = %d, want at most %d", p, limitN)
		}
		if runs.Load() != jobs {
			t.Fatalf("handlers ran %d times for %d jobs", runs.Load(), jobs)
		}
	})
}
