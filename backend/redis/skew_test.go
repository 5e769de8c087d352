package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// skewed is a Backend as a process whose clock is off by skew uses it:
// every absolute time the process sends was read off its clock, so it is
// skew later than the instant meant (+skew on the way in: InsertParams's
// RunAt and Deadline, FailedFilter.FailedBefore), and every time it reads
// back is compared with its clock, which is as if the time were skew
// earlier against a true clock (-skew on the way out: JobRow's
// AvailableAt, ReservedAt, LeaseUntil, CreatedAt and Deadline, FailedJob's
// CreatedAt and FailedAt, QueueStats.OldestDue). Durations (Delay, Lease, RetryDelay, OlderThan)
// pass unchanged: they do not depend on where a clock stands.
//
// Every method of backend.Backend is written out, not embedded, so that a
// method the contract gains cannot pass through unshifted unnoticed.
type skewed struct {
	b    *Backend
	skew time.Duration
}

var (
	_ backend.Backend  = (*skewed)(nil)
	_ backend.Notifier = (*skewed)(nil)
)

// sent is an absolute time the skewed process sends.
func (s *skewed) sent(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(s.skew)
}

// read is a time the skewed process reads back.
func (s *skewed) read(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-s.skew)
}

func (s *skewed) row(r *backend.JobRow) *backend.JobRow {
	if r == nil {
		return nil
	}
	c := *r
	c.AvailableAt, c.ReservedAt, c.LeaseUntil, c.CreatedAt = s.read(r.AvailableAt), s.read(r.ReservedAt), s.read(r.LeaseUntil), s.read(r.CreatedAt)
	c.Deadline = s.read(r.Deadline)
	return &c
}

func (s *skewed) failed(f *backend.FailedJob) *backend.FailedJob {
	if f == nil {
		return nil
	}
	c := *f
	c.CreatedAt, c.FailedAt = s.read(f.CreatedAt), s.read(f.FailedAt)
	return &c
}

func (s *skewed) filter(f backend.FailedFilter) backend.FailedFilter {
	f.FailedBefore = s.sent(f.FailedBefore)
	return f
}

func (s *skewed) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	p := slices.Clone(params)
	for i := range p {
		p[i].RunAt = s.sent(p[i].RunAt)
		p[i].Deadline = s.sent(p[i].Deadline)
	}
	return s.b.JobInsertMany(ctx, p)
}

func (s *skewed) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	rows, err := s.b.JobClaim(ctx, params)
	for i, r := range rows {
		rows[i] = s.row(r)
	}
	return rows, err
}

func (s *skewed) JobComplete(ctx context.Context, params backend.CompleteParams) (backend.CompleteResult, error) {
	return s.b.JobComplete(ctx, params)
}

func (s *skewed) JobExtendLease(ctx context.Context, params backend.ExtendLeaseParams) ([]backend.JobRef, error) {
	return s.b.JobExtendLease(ctx, params)
}

func (s *skewed) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	return s.b.JobRelease(ctx, refs)
}

func (s *skewed) LeaseSweep(ctx context.Context, params backend.SweepParams) (backend.SweepResult, error) {
	return s.b.LeaseSweep(ctx, params)
}

func (s *skewed) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	r, err := s.b.JobGet(ctx, id)
	return s.row(r), err
}

func (s *skewed) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	stats, err := s.b.QueueStats(ctx)
	for i := range stats {
		stats[i].OldestDue = s.read(stats[i].OldestDue)
	}
	return stats, err
}

func (s *skewed) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	params.Filter = s.filter(params.Filter)
	list, err := s.b.FailedList(ctx, params)
	for i, f := range list {
		list[i] = s.failed(f)
	}
	return list, err
}

func (s *skewed) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	f, err := s.b.FailedGet(ctx, jobID)
	return s.failed(f), err
}

func (s *skewed) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	params.Filter = s.filter(params.Filter)
	return s.b.FailedReplay(ctx, params)
}

func (s *skewed) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	params.Filter = s.filter(params.Filter)
	return s.b.FailedPurge(ctx, params)
}

func (s *skewed) Close() error { return s.b.Close() }

func (s *skewed) Subscribe(queues []string) (<-chan struct{}, func()) { return s.b.Subscribe(queues) }

// skewRun is one handler call in TestClockSkew.
type skewRun struct {
	worker  string
	typ     string
	id      int64
	attempt int
	start   time.Time // by the test's (true) clock
	cause   error     // why the handler's context ended before the job did; nil when it did not
}

func (r skewRun) String() string {
	s := fmt.Sprintf("%s job %d attempt %d on worker %s at %s", r.typ, r.id, r.attempt, r.worker, r.start.Format("15:04:05.000"))
	if r.cause != nil {
		s += fmt.Sprintf(" (cancelled: %v)", r.cause)
	}
	return s
}

// skewWorker is one of TestClockSkew's workers and what it saw.
type skewWorker struct {
	name string
	w    *jobq.Worker
	stop func() // stops the worker and waits for Run to return; idempotent

	mu      sync.Mutex
	rescued []jobq.RescuedEvent
	stale   []jobq.StaleEvent
}

// TestClockSkew: a worker whose clock is off by ten minutes (ahead, and in
// a second subtest behind) neither loses nor steals leases, and a job it
// enqueues with a delay runs at the right time.
//
// Two workers share one key prefix, each on a Backend of its own as two
// processes would be: one with a true clock, one whose Backend is wrapped
// in skewed, so that every absolute time crossing its backend boundary is
// what a process with that clock would send and see. They run twelve jobs
// of 16s at once, more than three leases of 5s each, heartbeating, with
// lease sweeps every 100ms on both. Then:
//
//   - every long job ran once, as attempt 1, its handler never cancelled,
//     and each worker ran some of them (held leases on both sides);
//   - the sweeps rescued exactly one job: a control job whose lease (300ms)
//     the test took and let expire, which shows the sweeps would have
//     caught a lease lost to the skew; it then ran as attempt 2;
//   - no outcome of either worker was refused by the lease fence;
//   - a job the skewed worker's client enqueued with Delay 1.5s started
//     1.5s to a minute after the enqueue, by the true clock (ten minutes
//     off would show);
//   - a job it enqueued with RunAt one hour ahead of its own clock is due
//     an hour plus the skew ahead of the true clock, and reads back as an
//     hour ahead through its Backend: the skew does reach the backend.
//
// What it proves: the runtime and the client decide nothing by comparing
// the backend's times with the local clock (the runtime measures lease
// deadlines on its own monotonic clock from the call that claimed or
// extended; Delay and lease lengths travel as durations), so ten minutes
// either way change nothing; a runtime that trusted LeaseUntil against
// time.Now would cancel its handlers (clock ahead) or heartbeat too late
// and have its jobs stolen (clock behind), and a client that turned Delay
// into a RunAt from its clock would run the delayed job ten minutes off.
//
// What it cannot prove: that the backend itself never reads the worker's
// clock. Both Backends run in this process, on the same true clock as the
// Redis server: Go reads CLOCK_REALTIME through the vDSO, so faketime
// cannot shift a Go process; time namespaces offset only the monotonic
// and boot clocks; and under libfaketime 0.9.10 redis-server 7.0 does not
// start (recursive clock_gettime calls at start-up). That part rests on the
// scripts taking every time from Redis TIME and the Go side sending only
// durations (see the package documentation). Nor can anything help an
// absolute RunAt or FailedBefore computed from a wrong clock: those carry
// the skew, as the RunAt job shows (use Delay and OlderThan).
func TestClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
		t.Run(fmt.Sprintf("%+.0fm", skew.Minutes()), func(t *testing.T) {
			t.Parallel()
			testClockSkew(t, skew)
		})
	}
}

func testClockSkew(t *testing.T, skew time.Duration) {
	const (
		// Leases long enough that a loaded machine's stall of a few
		// seconds loses none; the jobs outlast three of them.
		lease   = 5 * time.Second
		longJob = 16 * time.Second
		long    = 12
		delay   = 1500 * time.Millisecond
	)
	trueB := openTest(t, Options{})
	skewB := &skewed{b: openURL(t, testURL(t), Options{KeyPrefix: trueB.KeyPrefix(), Logger: quiet}), skew: skew}
	ctx := t.Context()

	// The control: a job whose lease the test takes and lets expire.
	control := enqueueJobs(t, trueB, "quick", 1)[0]
	held, err := trueB.JobClaim(ctx, backend.ClaimParams{Queues: []string{"default"}, Max: 1, Lease: 300 * time.Millisecond})
	if err != nil || len(held) != 1 || held[0].ID != control {
		t.Fatalf("claim the control job: %v, %v", held, err)
	}

	var mu sync.Mutex
	var runs []skewRun
	allDone := make(chan struct{})
	want := long + 2 // the long jobs, the control and the delayed job
	finished := 0
	newWorker := func(name string, b backend.Backend) *skewWorker {
		sw := &skewWorker{name: name}
		run := func(ctx context.Context, j *jobq.Job, d time.Duration) error {
			r := skewRun{worker: name, typ: j.Type, id: j.ID, attempt: j.Attempt, start: time.Now()}
			select {
			case <-time.After(d):
			case <-ctx.Done():
				r.cause = context.Cause(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, r)
			if r.cause == nil {
				if finished++; finished == want {
					close(allDone)
				}
			}
			return r.cause
		}
		reg := jobq.NewRegistry()
		reg.HandleFunc("long", func(ctx context.Context, j *jobq.Job) error { return run(ctx, j, longJob) })
		reg.HandleFunc("quick", func(ctx context.Context, j *jobq.Job) error { return run(ctx, j, 0) })
		reg.HandleFunc("delayed", func(ctx context.Context, j *jobq.Job) error { return run(ctx, j, 0) })
		w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
			Concurrency:   7, // 12 long jobs leave room for the control and the delayed job
			Lease:         lease,
			SweepInterval: 100 * time.Millisecond,
			PollInterval:  100 * time.Millisecond,
			Logger:        quiet,
			Hooks: []jobq.WorkerHooks{{
				Rescued: func(e jobq.RescuedEvent) { sw.mu.Lock(); sw.rescued = append(sw.rescued, e); sw.mu.Unlock() },
				Stale:   func(e jobq.StaleEvent) { sw.mu.Lock(); sw.stale = append(sw.stale, e); sw.mu.Unlock() },
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		sw.w = w
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		sw.stop = sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: Run: %v", name, err)
			}
		})
		t.Cleanup(sw.stop)
		return sw
	}
	workers := []*skewWorker{newWorker("true", trueB), newWorker("skewed", skewB)}

	skewC, err := jobq.NewClient(skewB, jobq.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	longIDs := append(enqueueJobs(t, trueB, "long", long/2), enqueueJobs(t, skewB, "long", long/2)...)
	// The wall clock, which Redis's TIME reads too: on a virtual machine
	// here it ran 0.5 % faster than the monotonic one, and a job due 1.5 s
	// after its insert by Redis's clock started 1.4956 s after it by the
	// monotonic clock.
	enqueued := time.Now().Round(0)
	delayed, err := skewC.Enqueue(ctx, "delayed", nil, jobq.Delay(delay))
	if err != nil {
		t.Fatal(err)
	}
	runAt := time.Now().Add(time.Hour)
	probe, err := skewC.Enqueue(ctx, "probe", nil, jobq.RunAt(runAt), jobq.Queue("unserved"))
	if err != nil {
		t.Fatal(err)
	}

	select {
	case <-allDone:
	case <-time.After(2 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		ran := map[int64]bool{}
		for _, r := range runs {
			ran[r.id] = r.cause == nil
		}
		var missing []string
		for _, id := range longIDs {
			if !ran[id] {
				missing = append(missing, fmt.Sprintf("long job %d", id))
			}
		}
		if !ran[control] {
			missing = append(missing, "the control job")
		}
		if !ran[delayed] {
			missing = append(missing, "the delayed job")
		}
		t.Fatalf("after 30s, %d of %d jobs done; not done: %v", finished, want, missing)
	}
	for _, sw := range workers {
		sw.stop() // writes the last outcomes
	}

	mu.Lock()
	defer mu.Unlock()
	perWorker := map[string]int{}
	byID := map[int64][]skewRun{}
	for _, r := range runs {
		byID[r.id] = append(byID[r.id], r)
		if r.cause != nil {
			t.Errorf("worker %s: job %d (%s) attempt %d: handler cancelled: %v", r.worker, r.id, r.typ, r.attempt, r.cause)
		}
	}
	for _, id := range longIDs {
		rs := byID[id]
		if len(rs) != 1 || rs[0].attempt != 1 {
			t.Errorf("long job %d ran %v; want once, as attempt 1", id, rs)
			continue
		}
		perWorker[rs[0].worker]++
	}
	for _, sw := range workers {
		if perWorker[sw.name] == 0 {
			t.Errorf("worker %s ran none of the long jobs (per worker: %v): its leases were not tested", sw.name, perWorker)
		}
	}
	if rs := byID[control]; len(rs) != 1 || rs[0].attempt != 2 {
		t.Errorf("control job %d ran %v; want once, as attempt 2 after its rescue", control, rs)
	}
	var rescued []jobq.RescuedEvent
	for _, sw := range workers {
		sw.mu.Lock()
		rescued = append(rescued, sw.rescued...)
		if len(sw.stale) > 0 || sw.w.StaleOutcomes() != 0 {
			t.Errorf("worker %s: outcomes refused by the lease fence: %+v", sw.name, sw.stale)
		}
		sw.mu.Unlock()
	}
	if len(rescued) != 1 || rescued[0].JobID != control || rescued[0].Attempt != 1 {
		t.Errorf("rescued %+v; want only the control job %d, attempt 1", rescued, control)
	}
	if rs := byID[delayed]; len(rs) != 1 {
		t.Errorf("delayed job %d ran %v; want once", delayed, rs)
	} else if after := rs[0].start.Sub(enqueued); after < delay-time.Millisecond || after > delay+time.Minute {
		t.Errorf("delayed job (Delay %s, enqueued by the skewed client) started %s after the enqueue, want %s to %s", delay, after, delay, delay+time.Minute)
	}

	// The RunAt job: due an hour plus the skew from now on the true clock,
	// an hour from now as the skewed process reads it.
	near := func(got, want time.Time) bool { return got.Sub(want).Abs() < time.Minute }
	if r, err := trueB.JobGet(ctx, probe); err != nil || !near(r.AvailableAt, runAt.Add(skew)) {
		t.Errorf("RunAt job through the true backend: %+v, %v; want available at %s (an hour plus the skew %s)", r, err, runAt.Add(skew), skew)
	}
	if r, err := skewB.JobGet(ctx, probe); err != nil || !near(r.AvailableAt, runAt) {
		t.Errorf("RunAt job through the skewed backend: %+v, %v; want available at %s", r, err, runAt)
	}
	stats, err := trueB.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Queue == "default" && (s.Pending+s.Scheduled+s.Reserved+s.Failed != 0) {
			t.Errorf("queue default: %+v, want nothing left", s)
		}
	}
}

// TestDeadlineClockSkew: the Redis clock decides a deadline, not the
// clock of the process that sets it or of the one that claims. Three
// processes share a key prefix: one with a true clock, one whose clock is
// ten minutes ahead and one ten minutes behind (skewed Backends: a
// deadline they send is the instant meant plus their skew, as a process
// computing it from its own clock sends it).
//
//   - A deadline "a minute from now" set by the process behind is nine
//     minutes past by the store's clock: refused at insert, nothing
//     written. "A minute ago" set by the one ahead is nine minutes ahead:
//     taken, and read back through each as each sent or sees it.
//   - A job whose deadline is two seconds away by the store's clock is
//     claimed through the process ahead, whose clock says the deadline
//     passed ten minutes ago.
//   - A job whose deadline passed by the store's clock is not claimed
//     through the process behind, whose clock says ten minutes remain:
//     the claim moves it to the failed jobs instead, the error naming the
//     deadline the store kept, and that process's sweep reports it.
func TestDeadlineClockSkew(t *testing.T) {
	t.Parallel()
	const skew = 10 * time.Minute
	trueB := openTest(t, Options{})
	other := func(skew time.Duration) *skewed {
		return &skewed{b: openURL(t, testURL(t), Options{KeyPrefix: trueB.KeyPrefix(), Logger: quiet}), skew: skew}
	}
	ahead, behind := other(skew), other(-skew)
	ctx := t.Context()

	_, err := behind.JobInsertMany(ctx, []backend.InsertParams{deadlined("late", time.Now().Add(time.Minute))})
	var ie *backend.InputError
	if !errors.As(err, &ie) || ie.Field != "deadline" || !strings.Contains(ie.Reason, "has passed") {
		t.Fatalf("insert through the process behind, deadline a minute off by its clock: %v; want it refused as passed", err)
	}
	if st, err := trueB.QueueStats(ctx); err != nil || len(st) != 0 {
		t.Fatalf("QueueStats after the refused insert = %+v, %v; want nothing", st, err)
	}
	meant := time.Now().Add(-time.Minute).Truncate(time.Second)
	early := insertIDs(t, ahead, deadlined("early", meant))[0]
	if r, err := ahead.JobGet(ctx, early); err != nil || !r.Deadline.Equal(meant) {
		t.Fatalf("JobGet through the process ahead = %+v, %v; want the deadline it sent, %v", r, err, meant)
	}
	if r, err := trueB.JobGet(ctx, early); err != nil || !r.Deadline.Equal(meant.Add(skew)) {
		t.Fatalf("JobGet through the true process = %+v, %v; want deadline %v", r, err, meant.Add(skew))
	}

	d := time.Now().Add(2 * time.Second)
	soon := insertIDs(t, trueB, deadlined("q", d))[0]
	if r, err := ahead.JobGet(ctx, soon); err != nil || !backend.Expired(r.Deadline, time.Now()) {
		t.Fatalf("JobGet through the process ahead = %+v, %v; want a deadline its clock says passed", r, err)
	}
	rows, err := ahead.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 1 || rows[0].ID != soon {
		t.Fatalf("claim through the process ahead = %v, %v; want job %d, its deadline not passed by the store's clock", rows, err, soon)
	}
	if _, err := ahead.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: rows[0].Ref(), Kind: backend.OutcomeDone}}}); err != nil {
		t.Fatal(err)
	}

	d = time.Now().Add(time.Second)
	lapsed := insertIDs(t, trueB, deadlined("q", d))[0]
	waitPast(t, trueB, "q", d)
	if r, err := behind.JobGet(ctx, lapsed); err != nil || backend.Expired(r.Deadline, time.Now()) {
		t.Fatalf("JobGet through the process behind = %+v, %v; want a deadline its clock says has not come", r, err)
	}
	rows, err = behind.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if err != nil || len(rows) != 0 {
		t.Fatalf("claim through the process behind = %v, %v; want nothing, the deadline passed by the store's clock", rows, err)
	}
	res, err := behind.LeaseSweep(ctx, backend.SweepParams{})
	if err != nil || res.Expired != 1 || len(res.Jobs) != 1 || res.Jobs[0].Ref.ID != lapsed || !res.Jobs[0].Expired {
		t.Fatalf("sweep through the process behind = %+v, %v; want job %d expired", res, err, lapsed)
	}
	wantDeadlineFailed(t, behind, lapsed, d, 0)
}
