package verify

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// deadlineTolerance is the clock tolerance of the hand-made histories,
// whose times are plain numbers (nanoseconds).
const deadlineTolerance = 50

// deadlineFS is a final state of the deadline workload in which jobs 1
// to n were acknowledged (seq = ID), those of dls sent with the deadline
// it gives (Unix nanoseconds), and failed holds the failed jobs.
func deadlineFS(n int64, dls map[int64]int64, failed ...*backend.FailedJob) finalState {
	fs := finalState{acked: map[int64]int64{}, failed: failed, stats: backend.QueueStats{Failed: int64(len(failed))},
		deadlines: &deadlineFinal{planned: map[int64]plannedDeadline{}, tolerance: deadlineTolerance}}
	for id := int64(1); id <= n; id++ {
		fs.acked[id] = id
	}
	for seq, dl := range dls {
		fs.deadlines.planned[seq] = plannedDeadline{at: time.Unix(0, dl), class: deadlineShort}
	}
	return fs
}

// expiredJob is job id's row in failed jobs, expired at at with the
// DeadlineError of deadline dl.
func expiredJob(id, dl, at int64) *backend.FailedJob {
	return &backend.FailedJob{JobID: id, Error: backend.DeadlineError(time.Unix(0, dl)), FailedAt: time.Unix(0, at), Attempts: 0, MaxAttempts: 3}
}

// TestCheckDeadlineClean: job 1 claimed before its deadline and done,
// job 2 never claimed and expired after its deadline, job 3 without a
// deadline: every check holds and the report counts them.
func TestCheckDeadlineClean(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=890 dl=1000 rat=900
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=ok
			130 written proc=w0.0 job=1 att=1 tok=11 kind=done
			200 claim proc=w0.0 job=3 att=1 tok=31 c0=5000
			210 start proc=w0.0 job=3 seq=3 att=1 tok=31
			220 end proc=w0.0 job=3 att=1 tok=31 res=ok
			230 written proc=w0.0 job=3 att=1 tok=31 kind=done`,
	}, deadlineFS(3, map[int64]int64{1: 1000, 2: 500}, expiredJob(2, 500, 600)))
	wantAnomalies(t, rep, nil)
	if rep.DeadlineJobs != 2 || rep.DeadlineRan != 1 || rep.DeadlineExpired != 1 || rep.DeadlineExpiredUnclaimed != 1 || rep.FailedExpired != 1 {
		t.Errorf("with a deadline %d, ran %d, expired %d (%d never claimed, %d counted failed); want 2, 1, 1, 1, 1",
			rep.DeadlineJobs, rep.DeadlineRan, rep.DeadlineExpired, rep.DeadlineExpiredUnclaimed, rep.FailedExpired)
	}
	if rep.DeadlineClaims != 1 || rep.DeadlineClosest != 100 || rep.DeadlineLateHandlers != 0 {
		t.Errorf("claims %d, closest %s, late handlers %d; want 1, 100ns, 0", rep.DeadlineClaims, rep.DeadlineClosest, rep.DeadlineLateHandlers)
	}
}

// TestCheckDeadlineStoreReservedLate: the store's own reserved time is
// after the deadline, whatever the worker's clock said.
func TestCheckDeadlineStoreReservedLate(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=900 dl=1000 rat=1001
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=ok
			130 written proc=w0.0 job=1 att=1 tok=11 kind=done`,
	}, deadlineFS(1, map[int64]int64{1: 1000}))
	wantAnomalies(t, rep, map[string]int{AnomalyStartedAfterDeadline: 1})
}

// TestCheckDeadlineCallBeganLate: the store says it reserved the job in
// time, but the claim call began after the deadline and the tolerance by
// the worker's clock, so the store claimed it later still; a call begun
// within the tolerance proves nothing.
func TestCheckDeadlineCallBeganLate(t *testing.T) {
	history := func(c0 string) map[string]string {
		return map[string]string{"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=` + c0 + ` dl=1000 rat=1000
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=ok
			130 written proc=w0.0 job=1 att=1 tok=11 kind=done`}
	}
	wantAnomalies(t, verdict(t, history("1051"), deadlineFS(1, map[int64]int64{1: 1000})), map[string]int{AnomalyStartedAfterDeadline: 1})
	wantAnomalies(t, verdict(t, history("1050"), deadlineFS(1, map[int64]int64{1: 1000})), nil)
}

// TestCheckDeadlineLostDeadlineStillChecked: a claimed row that carries
// no deadline (the store lost it) is checked against the deadline the
// job was sent with.
func TestCheckDeadlineLostDeadlineStillChecked(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=2000
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=ok
			130 written proc=w0.0 job=1 att=1 tok=11 kind=done`,
	}, deadlineFS(1, map[int64]int64{1: 1000}))
	wantAnomalies(t, rep, map[string]int{AnomalyStartedAfterDeadline: 1})
}

// TestCheckDeadlineHandlerAfterIsAllowed: claimed before the deadline,
// the handler started after it: the deadline is about the claim, so it
// is only counted.
func TestCheckDeadlineHandlerAfterIsAllowed(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=990 dl=1000 rat=995
			130 start proc=w0.0 job=1 seq=1 att=1 tok=11
			140 end proc=w0.0 job=1 att=1 tok=11 res=ok
			150 written proc=w0.0 job=1 att=1 tok=11 kind=done`,
	}, deadlineFS(1, map[int64]int64{1: 1000}))
	wantAnomalies(t, rep, nil)
	if rep.DeadlineLateHandlers != 1 {
		t.Errorf("%d handlers started after their deadline, want 1", rep.DeadlineLateHandlers)
	}
}

// TestCheckDeadlineRetriedThenExpired: the first attempt, claimed before
// the deadline, failed and was retried; the retry was due after the
// deadline, and the job expired: what the contract says.
func TestCheckDeadlineRetriedThenExpired(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=400 dl=1000 rat=410
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=error
			130 written proc=w0.0 job=1 att=1 tok=11 kind=retry`,
	}, deadlineFS(1, map[int64]int64{1: 1000}, expiredJob(1, 1000, 1100)))
	wantAnomalies(t, rep, nil)
	if rep.DeadlineExpired != 1 || rep.DeadlineExpiredUnclaimed != 0 {
		t.Errorf("expired %d, never claimed %d; want 1, 0", rep.DeadlineExpired, rep.DeadlineExpiredUnclaimed)
	}
}

// TestCheckDeadlineStaleHolderAfterExpiry: the holder of the only claim
// was paused past its lease; the sweep put the job back and it expired;
// the holder's handler ended after that and its outcome was refused:
// fenced, not an expired job that ran.
func TestCheckDeadlineStaleHolderAfterExpiry(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=400 dl=1000 rat=410
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			2000 end proc=w0.0 job=1 att=1 tok=11 res=ok
			2010 stale proc=w0.0 job=1 att=1 tok=11`,
	}, deadlineFS(1, map[int64]int64{1: 1000}, expiredJob(1, 1000, 1100)))
	wantAnomalies(t, rep, nil)
}

// TestCheckDeadlineExpiredButRan: an expired job claimed after it
// expired, one still held when it expired (its retry applied later) and
// one done are each EXPIRED BUT RAN.
func TestCheckDeadlineExpiredButRan(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11 c0=400 dl=1000 rat=410
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=error
			130 written proc=w0.0 job=1 att=1 tok=11 kind=retry
			150 claim proc=w0.0 job=1 att=2 tok=12 c0=500 dl=1000 rat=510
			160 start proc=w0.0 job=1 seq=1 att=2 tok=12
			170 end proc=w0.0 job=1 att=2 tok=12 res=ok
			180 written proc=w0.0 job=1 att=2 tok=12 kind=done
			200 claim proc=w0.0 job=2 att=1 tok=21 c0=400 dl=1000 rat=410
			210 start proc=w0.0 job=2 seq=2 att=1 tok=21
			900 end proc=w0.0 job=2 att=1 tok=21 res=error
			910 written proc=w0.0 job=2 att=1 tok=21 kind=retry`,
		"w1.0.log": `
			300 claim proc=w1.0 job=3 att=1 tok=31 c0=400 dl=1000 rat=410
			310 start proc=w1.0 job=3 seq=3 att=1 tok=31
			320 end proc=w1.0 job=3 att=1 tok=31 res=error
			330 written proc=w1.0 job=3 att=1 tok=31 kind=retry
			400 claim proc=w1.0 job=3 att=2 tok=32 c0=950 dl=1000 rat=1000`,
	}, deadlineFS(3, map[int64]int64{1: 1000, 2: 1000, 3: 1000},
		expiredJob(1, 1000, 1100), expiredJob(2, 1000, 1001), expiredJob(3, 1000, 990)))
	// Job 3's second claim came at its deadline (allowed) but after its
	// expiry at 990: the expiry came too early, and it ran after it.
	wantAnomalies(t, rep, map[string]int{AnomalyExpiredButRan: 3, AnomalyExpiredEarly: 1})
}

// TestCheckDeadlineExpiredEarly: expired before its deadline by the
// store's clock, with another deadline's error, or without a deadline.
func TestCheckDeadlineExpiredEarly(t *testing.T) {
	wrong := expiredJob(2, 1000, 3000)
	wrong.Error = backend.DeadlineError(time.Unix(5, 0))
	rep := verdict(t, nil, deadlineFS(3, map[int64]int64{1: 1000, 2: 1000},
		expiredJob(1, 1000, 1000), wrong, expiredJob(3, 1000, 3000)))
	wantAnomalies(t, rep, map[string]int{AnomalyExpiredEarly: 3})
}

// TestDeadlinePlanner: the planner gives about the share asked for a
// deadline, every class, each within its range, and the same plan for a
// seed.
func TestDeadlinePlanner(t *testing.T) {
	lease := 2 * time.Second
	plan := func() []time.Duration {
		next := deadlinePlanner(0.3, lease, seeded(9, streamDeadlines))
		out := make([]time.Duration, 3000)
		ranges := [deadlineClasses][2]time.Duration{{50 * time.Millisecond, lease / 4}, {lease / 4, 2 * lease}, {10 * lease, 30 * lease}}
		var classes [deadlineClasses]int
		for i := range out {
			d, class := next(int64(i))
			out[i] = d
			if d == 0 {
				continue
			}
			classes[class]++
			lo, hi := ranges[class][0], ranges[class][1]
			if d < lo || d >= hi {
				t.Fatalf("class %d deadline %s is outside [%s, %s)", class, d, lo, hi)
			}
		}
		n := classes[0] + classes[1] + classes[2]
		if n < 800 || n > 1000 || classes[0] < 200 || classes[1] < 200 || classes[2] < 200 {
			t.Errorf("%d of 3000 jobs with a deadline (by class %v), want about 900, each class about 300", n, classes)
		}
		return out
	}
	a, b := plan(), plan()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seq %d: %s then %s for one seed", i, a[i], b[i])
		}
	}
}
