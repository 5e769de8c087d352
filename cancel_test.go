package jobq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
)

// A running job's cancel reaches its handler's context with
// ErrJobCancelled, and the job ends cancelled whatever the handler
// returns: never retried, never failed.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	returns := map[string]error{
		"handler returns ctx error": context.Canceled,
		"handler returns nil":       nil,
		"handler returns permanent": jobq.Permanent(errors.New("stopped")),
	}
	for name, ret := range returns {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newMemory(t, nil)
			reg := jobq.NewRegistry()
			var runs atomic.Int32
			started := make(chan struct{}, 1)
			cause := make(chan error, 1)
			reg.HandleFunc("long", func(ctx context.Context, j *jobq.Job) error {
				runs.Add(1)
				started <- struct{}{}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ret
			})
			var events []jobq.EventKind
			evCh := make(chan jobq.EventKind, 10)
			cfg := fastConfig()
			// The heartbeat's refusal, the fallback, is an hour's third
			// away, so the cancel can reach the handler only through the
			// poll (every 250ms): the wait below needs no tight bound to
			// show that (it was "within a second", which a loaded machine
			// can miss), and the lease cannot run out meanwhile.
			cfg.Lease = time.Hour
			cfg.Hooks = []jobq.WorkerHooks{{Finished: func(e jobq.Event) { evCh <- e.Kind }}}
			id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "long", nil, jobq.MaxAttempts(5))
			if err != nil {
				t.Fatal(err)
			}
			startWorker(t, b, reg, cfg)
			<-started
			ins := jobq.NewInspector(b)
			res, err := ins.Cancel(context.Background(), id)
			if err != nil || len(res) != 1 || res[0].Outcome != jobq.CancelRequested {
				t.Fatalf("Cancel = %+v, %v; want requested", res, err)
			}
			select {
			case c := <-cause:
				if !errors.Is(c, jobq.ErrJobCancelled) {
					t.Fatalf("handler's context cause = %v, want ErrJobCancelled", c)
				}
			case <-time.After(settle):
				t.Fatal("handler's context was not cancelled")
			}
			events = append(events, <-evCh)
			eventually(t, settle, "the job to end", func() bool { return jobGone(b, id) })
			fs, err := ins.FinishedPage(context.Background(), jobq.StateCancelled, jobq.JobFilter{}, 0, 0)
			if err != nil || len(fs) != 1 || fs[0].ID != id || fs[0].Attempts != 1 {
				t.Fatalf("cancelled jobs = %+v, %v; want job %d after 1 attempt", fs, err, id)
			}
			time.Sleep(50 * time.Millisecond) // a wrongful retry would run by now
			if runs.Load() != 1 || len(failedJobs(t, b)) != 0 {
				t.Fatalf("runs = %d, failed = %d; want 1 run and no failed job", runs.Load(), len(failedJobs(t, b)))
			}
			if events[0] != jobq.EventCancelled {
				t.Fatalf("event = %s, want cancelled", events[0])
			}
			res, err = ins.Cancel(context.Background(), id)
			if err != nil || res[0].Outcome != jobq.CancelAlready {
				t.Fatalf("second Cancel = %+v, %v; want already cancelled", res, err)
			}
		})
	}
}

// With the poll off, the heartbeat's refusal tells the handler.
func TestCancelThroughHeartbeat(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	started := make(chan struct{})
	cause := make(chan error, 1)
	reg.HandleFunc("long", func(ctx context.Context, j *jobq.Job) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	cfg := fastConfig()
	cfg.CancelPollInterval = -1
	cfg.Lease, cfg.HeartbeatInterval = 5*time.Second, 100*time.Millisecond
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "long", nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, cfg)
	<-started
	if _, err := jobq.NewInspector(b).Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, jobq.ErrJobCancelled) {
			t.Fatalf("cause = %v, want ErrJobCancelled", c)
		}
	case <-time.After(settle): // a failure deadline: heartbeats come every 100ms
		t.Fatal("the heartbeat did not tell the handler")
	}
	eventually(t, settle, "the job to end", func() bool { return jobGone(b, id) })
	if len(failedJobs(t, b)) != 0 {
		t.Fatal("a cancelled job failed")
	}
}

func TestCancelPendingAndUnsupported(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	id, err := c.Enqueue(context.Background(), "x", nil, jobq.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ins := jobq.NewInspector(b)
	res, err := ins.Cancel(context.Background(), id, id+100)
	if err != nil || res[0].Outcome != jobq.CancelCancelled || res[1].Outcome != jobq.CancelNotFound {
		t.Fatalf("Cancel = %+v, %v; want cancelled, not found", res, err)
	}
	if _, err := ins.Cancel(context.Background()); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("Cancel() = %v, want ErrInvalidInput", err)
	}
	s := inline.New()
	t.Cleanup(func() { s.Close() })
	if _, err := jobq.NewInspector(s).Cancel(context.Background(), 1); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("sync Cancel = %v, want ErrNotSupported", err)
	}
	if _, err := jobq.NewInspector(s).FinishedPage(context.Background(), jobq.StateCompleted, jobq.JobFilter{}, 0, 0); !errors.Is(err, jobq.ErrNotSupported) {
		t.Fatalf("sync FinishedPage = %v, want ErrNotSupported", err)
	}
}

// Retention: completed jobs are kept only when asked, pruned after their
// time; failed jobs are capped by count.
func TestRetention(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, ret jobq.Retention, jobs int, typ string) (backend.Backend, *jobq.Inspector) {
		b := newMemory(t, nil)
		reg := jobq.NewRegistry()
		reg.HandleFunc("ok", func(ctx context.Context, j *jobq.Job) error { return nil })
		reg.HandleFunc("bad", func(ctx context.Context, j *jobq.Job) error { return jobq.Permanent(errors.New("bad")) })
		c := mustClient(t, b, jobq.ClientConfig{})
		for range jobs {
			if _, err := c.Enqueue(context.Background(), typ, nil); err != nil {
				t.Fatal(err)
			}
		}
		cfg := fastConfig()
		cfg.Retention = ret
		startWorker(t, b, reg, cfg)
		eventually(t, settle, "the jobs to finish", func() bool {
			s, _ := b.QueueStats(context.Background())
			return len(s) == 0 || (s[0].Pending == 0 && s[0].Reserved == 0)
		})
		return b, jobq.NewInspector(b)
	}
	completed := func(t *testing.T, ins *jobq.Inspector) int {
		fs, err := ins.FinishedPage(context.Background(), jobq.StateCompleted, jobq.JobFilter{}, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(fs)
	}
	t.Run("off keeps nothing", func(t *testing.T) {
		t.Parallel()
		_, ins := run(t, jobq.Retention{}, 5, "ok")
		time.Sleep(50 * time.Millisecond)
		if n := completed(t, ins); n != 0 {
			t.Fatalf("kept %d completed jobs, want 0", n)
		}
	})
	t.Run("on keeps, then prunes", func(t *testing.T) {
		t.Parallel()
		_, ins := run(t, jobq.Retention{Completed: 300 * time.Millisecond, PruneInterval: 50 * time.Millisecond}, 5, "ok")
		// All 5 may be pruned already on a slow machine; kept for at
		// least the retention, then gone.
		eventually(t, settle, "the completed jobs to be pruned", func() bool { return completed(t, ins) == 0 })
	})
	t.Run("on keeps for the retention", func(t *testing.T) {
		t.Parallel()
		_, ins := run(t, jobq.Retention{Completed: time.Hour, PruneInterval: 50 * time.Millisecond}, 5, "ok")
		eventually(t, settle, "5 completed jobs", func() bool { return completed(t, ins) == 5 })
		time.Sleep(200 * time.Millisecond)
		if n := completed(t, ins); n != 5 {
			t.Fatalf("kept %d completed jobs after some prunes, want 5", n)
		}
	})
	t.Run("failed cap", func(t *testing.T) {
		t.Parallel()
		b, _ := run(t, jobq.Retention{FailedMaxCount: 2, PruneInterval: 50 * time.Millisecond}, 6, "bad")
		eventually(t, settle, "the failed jobs to be capped at 2", func() bool { return len(failedJobs(t, b)) == 2 })
		f := failedJobs(t, b)
		// The memory backend numbers failed rows 1, 2, … as jobs fail.
		if f[0].ID != 6 || f[1].ID != 5 {
			t.Fatalf("kept failed rows %d and %d, want the newest two (6, 5)", f[0].ID, f[1].ID)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		t.Parallel()
		b := newMemory(t, nil)
		cfg := fastConfig()
		cfg.Retention.Completed = -time.Second
		if _, err := jobq.NewWorker(b, jobq.NewRegistry(), cfg); !errors.Is(err, jobq.ErrInvalidInput) {
			t.Fatalf("NewWorker(negative retention) = %v, want ErrInvalidInput", err)
		}
		cfg.Retention.Completed = time.Second
		if _, err := jobq.NewWorker(noRetainer{b}, jobq.NewRegistry(), cfg); !errors.Is(err, jobq.ErrNotSupported) {
			t.Fatalf("NewWorker(retention on a backend without it) = %v, want ErrNotSupported", err)
		}
	})
}

// noRetainer hides a backend's optional capabilities.
type noRetainer struct{ backend.Backend }
