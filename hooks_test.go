package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// hookLog records what a worker's hooks saw.
type hookLog struct {
	mu       sync.Mutex
	claimed  []jobq.ClaimedEvent
	started  []int64
	finished []jobq.Event
	written  []jobq.Event
	rescued  []jobq.RescuedEvent
	stale    []jobq.StaleEvent
}

func (h *hookLog) hooks() jobq.WorkerHooks {
	return jobq.WorkerHooks{
		Claimed:  func(e jobq.ClaimedEvent) { h.mu.Lock(); h.claimed = append(h.claimed, e); h.mu.Unlock() },
		Started:  func(_ context.Context, j *jobq.Job) { h.mu.Lock(); h.started = append(h.started, j.ID); h.mu.Unlock() },
		Finished: func(e jobq.Event) { h.mu.Lock(); h.finished = append(h.finished, e); h.mu.Unlock() },
		Written:  func(e jobq.Event) { h.mu.Lock(); h.written = append(h.written, e); h.mu.Unlock() },
		Rescued:  func(e jobq.RescuedEvent) { h.mu.Lock(); h.rescued = append(h.rescued, e); h.mu.Unlock() },
		Stale:    func(e jobq.StaleEvent) { h.mu.Lock(); h.stale = append(h.stale, e); h.mu.Unlock() },
	}
}

func (h *hookLog) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.finished {
		out = append(out, e.Kind.String())
	}
	return out
}

// TestWorkerHooks: every hook fires with what metrics and tracing need:
// the wait since the job was due, the outcome and run time of each
// attempt, the jobs the sweep rescued and the outcomes the fence refused.
func TestWorkerHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMemory(t, nil)
		b := &flakyHeartbeats{Backend: mem}
		reg := jobq.NewRegistry()
		hold := make(chan struct{})
		reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error { time.Sleep(300 * time.Millisecond); return nil })
		reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
			if j.Attempt == 1 {
				return errors.New("try again")
			}
			return nil
		})
		reg.HandleFunc("held", func(ctx context.Context, j *jobq.Job) error { <-hold; return nil })
		c := mustClient(t, mem, jobq.ClientConfig{})
		// A job held by a worker that died: the sweep rescues it.
		dead, _ := c.Enqueue(context.Background(), "ok", nil, jobq.Queue("other"), jobq.MaxAttempts(2))
		if rows, err := mem.JobClaim(context.Background(), backend.ClaimParams{Queues: []string{"other"}, Max: 1, Lease: time.Second}); err != nil || len(rows) != 1 {
			t.Fatalf("claim for the dead worker: %v %v", rows, err)
		}
		ok, _ := c.Enqueue(context.Background(), "ok", nil, jobq.Delay(2*time.Second))
		flaky, _ := c.Enqueue(context.Background(), "flaky", nil, jobq.Queue("other"))
		var log hookLog
		cfg := fastConfig()
		cfg.Queues = []string{"default", "other"}
		cfg.Lease = 3 * time.Second
		cfg.HeartbeatInterval = time.Second
		cfg.Retry = jobq.RetryPolicy{Base: time.Second, NoJitter: true}
		cfg.Hooks = []jobq.WorkerHooks{log.hooks(), {}}
		time.Sleep(3 * time.Second) // the delayed job has been due for 1s when the worker starts
		stop := startWorker(t, b, reg, cfg)
		time.Sleep(10 * time.Second)

		// A stale outcome: heartbeats fail, the lease runs out, the sweep
		// returns the job and it is claimed again (by this worker, the
		// only one); then the first attempt's handler finishes.
		held, _ := c.Enqueue(context.Background(), "held", nil, jobq.MaxAttempts(5))
		b.down.Store(true)
		time.Sleep(5 * time.Second)
		close(hold)
		synctest.Wait()
		stop()

		log.mu.Lock()
		defer log.mu.Unlock()
		var okWait time.Duration = -1
		for _, e := range log.claimed {
			if e.Job.ID == ok {
				okWait = e.Wait
			}
		}
		if okWait != time.Second {
			t.Errorf("claimed wait of the delayed job = %s; want 1s (due at 2s, claimed at 3s)", okWait)
		}
		var okRun time.Duration
		var flakyKinds []string
		for _, e := range log.finished {
			switch e.Job.ID {
			case ok:
				okRun = e.Duration
			case flaky:
				flakyKinds = append(flakyKinds, e.Kind.String())
			}
		}
		if okRun != 300*time.Millisecond {
			t.Errorf("run time of the ok job = %s; want 300ms", okRun)
		}
		if !slices.Equal(flakyKinds, []string{"retry", "done"}) {
			t.Errorf("flaky job's outcomes %v; want retry then done", flakyKinds)
		}
		if len(log.rescued) < 1 || log.rescued[0].JobID != dead || log.rescued[0].Queue != "other" || log.rescued[0].Type != "ok" || log.rescued[0].Failed {
			t.Errorf("rescued %+v; want job %d (queue other, type ok) back to pending", log.rescued, dead)
		}
		if len(log.stale) != 1 || log.stale[0].JobID != held || log.stale[0].Type != "held" {
			t.Errorf("stale %+v; want the held job's outcome refused", log.stale)
		}
		if len(log.started) != len(log.claimed) {
			t.Errorf("%d started, %d claimed; want one start per claim", len(log.started), len(log.claimed))
		}
		// Every attempt is written but the stale one, which is not what
		// became of its job.
		var heldWritten []int
		for _, e := range log.written {
			if e.Job.ID == held {
				heldWritten = append(heldWritten, e.Job.Attempt)
			}
		}
		if len(log.written) != len(log.finished)-1 || !slices.Equal(heldWritten, []int{2}) {
			t.Errorf("%d written of %d finished, the held job's attempts written %v; want all but the stale one (held attempt 1)",
				len(log.written), len(log.finished), heldWritten)
		}
	})
}

// TestWrittenLateCancel: a handler that returns nil just as its job's
// cancel is requested, before the worker hears of it, finishes done, but
// the backend ends the job cancelled: Written says cancelled.
func TestWrittenLateCancel(t *testing.T) {
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	running, release := make(chan int64, 1), make(chan struct{})
	reg.HandleFunc("slow", func(_ context.Context, j *jobq.Job) error {
		running <- j.ID
		<-release
		return nil
	})
	c := mustClient(t, b, jobq.ClientConfig{})
	if _, err := c.Enqueue(context.Background(), "slow", nil); err != nil {
		t.Fatal(err)
	}
	var log hookLog
	cfg := fastConfig()
	cfg.Lease, cfg.HeartbeatInterval, cfg.CancelPollInterval = time.Hour, 10*time.Minute, -1
	cfg.Hooks = []jobq.WorkerHooks{log.hooks()}
	stop := startWorker(t, b, reg, cfg)
	id := <-running
	res, err := jobq.NewInspector(b).Cancel(context.Background(), id)
	if err != nil || len(res) != 1 || res[0].Outcome != backend.CancelRequested {
		t.Fatalf("cancel: %+v, %v; want requested", res, err)
	}
	close(release)
	eventually(t, settle, "the outcome written", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.written) == 1
	})
	stop()
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.finished) != 1 || log.finished[0].Kind != jobq.EventDone || log.written[0].Kind != jobq.EventCancelled {
		t.Fatalf("finished %v, written %v; want done, then cancelled", log.finished, log.written)
	}
}

// TestMiddleware: middleware wraps every attempt, the first added
// outermost, sees the job and its metadata, can change the outcome, and a
// panic inside it is recovered like a handler's.
func TestMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		var mu sync.Mutex
		var trail []string
		note := func(s string) { mu.Lock(); trail = append(trail, s); mu.Unlock() }
		reg.Use(func(next jobq.HandlerFunc) jobq.HandlerFunc {
			return func(ctx context.Context, j *jobq.Job) error {
				note("outer " + j.Type + " " + j.Metadata["trace"])
				err := next(ctx, j)
				note("outer done")
				return err
			}
		}, func(next jobq.HandlerFunc) jobq.HandlerFunc {
			return func(ctx context.Context, j *jobq.Job) error {
				if j.Type == "boom" {
					panic("middleware bug")
				}
				note("inner")
				return next(ctx, j)
			}
		})
		reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error { note("handler"); return nil })
		reg.HandleFunc("boom", func(ctx context.Context, j *jobq.Job) error { note("boom handler"); return nil })
		c := mustClient(t, b, jobq.ClientConfig{})
		c.Enqueue(context.Background(), "ok", nil, jobq.Metadata(map[string]string{"trace": "abc"}))
		c.Enqueue(context.Background(), "boom", nil, jobq.MaxAttempts(1))
		unknown, _ := c.Enqueue(context.Background(), "unknown", nil, jobq.MaxAttempts(1))
		cfg := fastConfig()
		cfg.Concurrency = 1
		stop := startWorker(t, b, reg, cfg)
		time.Sleep(time.Second)
		stop()
		// A type without a handler never reaches the middleware: it is
		// given back untouched (TestUnknownTypeDeferred).
		want := []string{"outer ok abc", "inner", "handler", "outer done", "outer boom "}
		if !slices.Equal(trail, want) {
			t.Fatalf("trail %q; want %q", trail, want)
		}
		f := failedJobs(t, b)
		if len(f) != 1 || !strings.Contains(f[0].Error, "panic: middleware bug") {
			t.Fatalf("failed jobs %+v; want the middleware's panic alone", f)
		}
		if j, err := b.JobGet(context.Background(), unknown); err != nil || j.Attempts != 0 {
			t.Fatalf("the job without a handler: %+v, %v; want it pending with no attempt spent", j, err)
		}
	})
}

// TestMiddlewareWrapsOnce: a type's handler is wrapped once and the
// wrapping serves its later attempts; middleware added later wraps the
// attempts after it; a middleware that panics while wrapping fails the
// attempt, not the worker.
func TestMiddlewareWrapsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		var wraps, late, runs atomic.Int32
		var bomb atomic.Bool
		reg.Use(func(next jobq.HandlerFunc) jobq.HandlerFunc {
			wraps.Add(1)
			return next
		})
		reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error { runs.Add(1); return nil })
		reg.HandleFunc("wrapbomb", func(ctx context.Context, j *jobq.Job) error { runs.Add(1); return nil })
		c := mustClient(t, b, jobq.ClientConfig{})
		enqueue := func(typ string, n int) {
			for range n {
				if _, err := c.Enqueue(context.Background(), typ, nil, jobq.MaxAttempts(1)); err != nil {
					t.Fatal(err)
				}
			}
		}
		enqueue("ok", 3)
		cfg := fastConfig()
		cfg.Concurrency = 1
		stop := startWorker(t, b, reg, cfg)
		time.Sleep(time.Second)
		if runs.Load() != 3 || wraps.Load() != 1 {
			t.Fatalf("%d runs, %d wraps; want 3 runs of one wrapping", runs.Load(), wraps.Load())
		}
		reg.Use(func(next jobq.HandlerFunc) jobq.HandlerFunc {
			return func(ctx context.Context, j *jobq.Job) error {
				if j.Type == "wrapbomb" {
					panic("unreachable: wrapping panics first")
				}
				late.Add(1)
				return next(ctx, j)
			}
		}, func(next jobq.HandlerFunc) jobq.HandlerFunc {
			if bomb.Load() {
				panic("wrap bug")
			}
			return next
		})
		enqueue("ok", 2)
		time.Sleep(time.Second)
		bomb.Store(true)
		enqueue("wrapbomb", 1)
		time.Sleep(time.Second)
		stop()
		if runs.Load() != 5 || late.Load() != 2 || wraps.Load() != 2 {
			t.Fatalf("%d runs, %d inside the later middleware, %d wraps; want 5, 2 and 2", runs.Load(), late.Load(), wraps.Load())
		}
		f := failedJobs(t, b)
		if len(f) != 1 || f[0].Type != "wrapbomb" || !strings.Contains(f[0].Error, "panic: wrap bug") {
			t.Fatalf("failed jobs %+v; want wrapbomb failed by the wrapping's panic", f)
		}
	})
}

// TestClientHooks: BeforeEnqueue can add metadata the handler then reads,
// or refuse the call with nothing written; AfterEnqueue hears of every job
// with its result.
func TestClientHooks(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	var mu sync.Mutex
	var after []string
	c := mustClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{{
		BeforeEnqueue: func(ctx context.Context, j *jobq.EnqueueInfo) error {
			if j.Type == "forbidden" {
				return errors.New("not on my watch")
			}
			j.Metadata["traceparent"] = "00-abc-def-01"
			return nil
		},
		AfterEnqueue: func(ctx context.Context, j jobq.EnqueueInfo, res jobq.EnqueueResult, err error) {
			mu.Lock()
			defer mu.Unlock()
			line := j.Type + " " + j.Queue + " " + j.Metadata["traceparent"]
			if res.Duplicate {
				line += " dup"
			}
			if err != nil {
				line += " refused"
			}
			after = append(after, line)
		},
	}}})
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "email", nil, jobq.Queue("mail"), jobq.Metadata(map[string]string{"user": "7"}), jobq.UniqueKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "email", nil, jobq.Queue("mail"), jobq.UniqueKey("k")); !errors.Is(err, jobq.ErrDuplicate) {
		t.Fatalf("second enqueue: %v, want ErrDuplicate", err)
	}
	row, err := b.JobGet(ctx, id)
	if err != nil || row.Metadata["traceparent"] != "00-abc-def-01" || row.Metadata["user"] != "7" {
		t.Fatalf("stored job %+v, %v; want the hook's and the caller's metadata", row, err)
	}
	if _, err := c.EnqueueMany(ctx, []jobq.JobSpec{{Type: "email"}, {Type: "forbidden"}}); err == nil || !strings.Contains(err.Error(), "not on my watch") {
		t.Fatalf("enqueue refused by the hook: %v", err)
	}
	if s, _ := b.QueueStats(ctx); len(s) != 1 || s[0].Pending != 1 {
		t.Fatalf("stats %+v; want only the first job: a refused batch writes nothing", s)
	}
	mu.Lock()
	defer mu.Unlock()
	// Every job BeforeEnqueue saw is finished by AfterEnqueue, the refused
	// batch's too (with its error), so a tracer's spans never leak.
	want := []string{"email mail 00-abc-def-01", "email mail 00-abc-def-01 dup", "email default 00-abc-def-01 refused", "forbidden default  refused"}
	if !slices.Equal(after, want) {
		t.Fatalf("AfterEnqueue saw %q, want %q", after, want)
	}
}

// TestMetadataReachesHandlerAndFailedJobs: metadata set at enqueue is what
// the handler reads and what the failed job and its replay keep; metadata
// over the limits is refused with nothing written.
func TestMetadataReachesHandlerAndFailedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		seen := make(chan map[string]string, 2)
		reg.HandleFunc("tagged", func(ctx context.Context, j *jobq.Job) error {
			seen <- j.Metadata
			return jobq.Permanent(errors.New("no"))
		})
		c := mustClient(t, b, jobq.ClientConfig{})
		md := map[string]string{"tenant": "acme", "traceparent": "00-1-2-01"}
		if _, err := c.Enqueue(context.Background(), "tagged", nil, jobq.Metadata(md)); err != nil {
			t.Fatal(err)
		}
		big := map[string]string{"k": strings.Repeat("x", backend.MaxMetadataBytes)}
		if _, err := c.Enqueue(context.Background(), "tagged", nil, jobq.Metadata(big)); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("oversized metadata: %v; want ErrInvalidInput naming metadata", err)
		}
		stop := startWorker(t, b, reg, fastConfig())
		if got := <-seen; got["tenant"] != "acme" || got["traceparent"] != "00-1-2-01" {
			t.Fatalf("handler saw metadata %v", got)
		}
		synctest.Wait()
		f := failedJobs(t, b)
		if len(f) != 1 || f[0].Metadata["tenant"] != "acme" {
			t.Fatalf("failed jobs %+v; want the metadata kept", f)
		}
		if _, _, err := jobq.NewInspector(b).Replay(context.Background(), f[0].JobID); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got["tenant"] != "acme" {
			t.Fatalf("replayed job's handler saw metadata %v", got)
		}
		stop()
	})
}

// TestErrorTextNormalisedOnce: what the Finished hook and the stored row
// say is the same normalised text: valid UTF-8 and at most
// backend.MaxErrorBytes, keeping the head and tail of a long panic.
func TestErrorTextNormalisedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		long := "HEAD " + strings.Repeat("frame\n", 200_000) + " TAIL"
		reg.HandleFunc("long", func(ctx context.Context, j *jobq.Job) error { return errors.New(long) })
		mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "long", nil, jobq.MaxAttempts(1))
		var log hookLog
		cfg := fastConfig()
		cfg.Hooks = []jobq.WorkerHooks{log.hooks()}
		stop := startWorker(t, b, reg, cfg)
		time.Sleep(time.Second)
		stop()
		f := failedJobs(t, b)
		if len(f) != 1 || len(f[0].Error) > backend.MaxErrorBytes || !strings.HasPrefix(f[0].Error, "HEAD ") || !strings.HasSuffix(f[0].Error, " TAIL") {
			t.Fatalf("stored error of %d bytes; want at most %d with head and tail", len(f[0].Error), backend.MaxErrorBytes)
		}
		if f[0].Error != backend.ErrorText(long) {
			t.Fatal("stored error is not ErrorText of the handler's error")
		}
		if k := log.kinds(); !slices.Equal(k, []string{"failed"}) {
			t.Fatalf("finished kinds %v", k)
		}
	})
}

// TestJobTimeoutNamed: an attempt cut by its timeout says which timeout
// fired.
func TestJobTimeoutNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		reg.HandleFunc("slow", func(ctx context.Context, j *jobq.Job) error { <-ctx.Done(); return ctx.Err() },
			jobq.HandlerOptions{Timeout: 2 * time.Second})
		mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "slow", nil, jobq.MaxAttempts(1))
		stop := startWorker(t, b, reg, fastConfig())
		time.Sleep(3 * time.Second)
		stop()
		f := failedJobs(t, b)
		if len(f) != 1 || f[0].Error != "job timeout of 2s exceeded: context deadline exceeded" {
			t.Fatalf("failed %+v; want the timeout named", f)
		}
	})
}

type jobCtxKey struct{}

// TestClientHookContextPerJob: the context BeforeEnqueue makes for a job
// is the one its AfterEnqueue receives, one per job of a batch, and the
// next hook's BeforeEnqueue builds on it.
func TestClientHookContextPerJob(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	var mu sync.Mutex
	var seen []string
	c := mustClient(t, b, jobq.ClientConfig{Hooks: []jobq.ClientHooks{
		{
			BeforeEnqueue: func(ctx context.Context, j *jobq.EnqueueInfo) error {
				j.Context = context.WithValue(ctx, jobCtxKey{}, "span of "+j.Metadata["n"])
				return nil
			},
		},
		{
			BeforeEnqueue: func(ctx context.Context, j *jobq.EnqueueInfo) error {
				if ctx.Value(jobCtxKey{}) != "span of "+j.Metadata["n"] {
					return errors.New("the second hook did not get the first hook's context")
				}
				return nil
			},
			AfterEnqueue: func(ctx context.Context, j jobq.EnqueueInfo, _ jobq.EnqueueResult, err error) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%v/%v", ctx.Value(jobCtxKey{}), j.Context == ctx))
			},
		},
	}})
	specs := []jobq.JobSpec{
		{Type: "t", Options: []jobq.EnqueueOption{jobq.Metadata(map[string]string{"n": "1"})}},
		{Type: "t", Options: []jobq.EnqueueOption{jobq.Metadata(map[string]string{"n": "2"})}},
	}
	if _, err := c.EnqueueMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	if want := []string{"span of 1/true", "span of 2/true"}; !slices.Equal(seen, want) {
		t.Fatalf("AfterEnqueue saw %q, want %q", seen, want)
	}
}
