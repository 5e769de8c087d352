package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
)

// progressCounter counts the progress writes that reach the backend it
// wraps; every other capability is found through Unwrap.
type progressCounter struct {
	backend.Backend
	writes atomic.Int64
}

func (c *progressCounter) Unwrap() backend.Backend { return c.Backend }

func (c *progressCounter) JobProgress(ctx context.Context, ref backend.JobRef, p backend.Progress) error {
	c.writes.Add(1)
	pr, _ := backend.As[backend.ProgressReporter](c.Backend)
	return pr.JobProgress(ctx, ref, p)
}

// TestProgressCoalesced: a handler reporting progress 10,000 times in a
// tight loop costs a few writes (one per ProgressInterval, the first at
// once), and the last value it reported is what Inspector.Job reads while
// it still runs; once the attempt ends the job has none.
func TestProgressCoalesced(t *testing.T) {
	t.Parallel()
	b := &progressCounter{Backend: newMemory(t, nil)}
	ins := jobq.NewInspector(b)
	reg := jobq.NewRegistry()
	var loop atomic.Int64 // how long the loop took, ns
	seen := make(chan *backend.Progress, 1)
	reg.HandleFunc("loop", func(ctx context.Context, j *jobq.Job) error {
		start := time.Now()
		for i := range 10_000 {
			if err := jobq.SetProgress(ctx, i/100, fmt.Sprintf("step %d <of> 10000", i+1)); err != nil {
				return err
			}
		}
		loop.Store(int64(time.Since(start)))
		var last *backend.Progress
		eventually(t, settle, "the last progress readable", func() bool {
			info, err := ins.Job(ctx, j.ID)
			if err != nil || info.Live == nil || info.Live.Progress == nil {
				return false
			}
			last = info.Live.Progress
			return last.Percent == 99 && last.Message == "step 10000 <of> 10000"
		})
		seen <- last
		return nil
	})
	done := make(chan int64, 1)
	cfg := fastConfig()
	cfg.Hooks = []jobq.WorkerHooks{{Written: func(ev jobq.Event) { done <- ev.Job.ID }}}
	startWorker(t, b, reg, cfg)
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(t.Context(), "loop", nil)
	if err != nil {
		t.Fatal(err)
	}
	last := <-seen
	if time.Since(last.At) > time.Minute || last.At.IsZero() {
		t.Fatalf("progress stamped %v, want about now", last.At)
	}
	if got := <-done; got != id {
		t.Fatalf("written job %d, want %d", got, id)
	}
	// One write at once, one per interval the loop took, and the last
	// value's after it; a single one when the writer first ran after the
	// loop was over, the last value already in place.
	took := time.Duration(loop.Load())
	bound := 2 + int64(took/jobq.ProgressInterval)
	if n := b.writes.Load(); n < 1 || n > bound {
		t.Fatalf("%d progress writes for 10,000 reports in %s, want 1..%d", n, took, bound)
	}
	t.Logf("%d progress writes for 10,000 reports in %s", b.writes.Load(), took)
	if !jobGone(b, id) {
		t.Fatalf("job %d still live after its attempt was written", id)
	}
}

// TestProgressRefusedLoggedOnce: reports of an attempt whose job was
// cancelled under it are refused by the fence: SetProgress still returns
// nil, the refusal is logged once, and nothing more of the attempt is
// written.
func TestProgressRefusedLoggedOnce(t *testing.T) {
	t.Parallel()
	b := &progressCounter{Backend: newMemory(t, nil)}
	ins := jobq.NewInspector(b)
	var buf logBuffer
	reg := jobq.NewRegistry()
	reg.HandleFunc("cancelme", func(ctx context.Context, j *jobq.Job) error {
		if err := jobq.SetProgress(ctx, 10, "started"); err != nil {
			return err
		}
		eventually(t, settle, "the first report written", func() bool { return b.writes.Load() == 1 })
		if _, err := ins.Cancel(context.Background(), j.ID); err != nil {
			return err
		}
		<-ctx.Done()
		for i := range 3 {
			if err := jobq.SetProgress(ctx, 20+i, "after the cancel"); err != nil {
				return fmt.Errorf("SetProgress after the cancel: %w", err)
			}
		}
		eventually(t, settle, "the refusal logged", func() bool { return strings.Contains(buf.String(), "progress refused") })
		for i := range 3 {
			_ = jobq.SetProgress(ctx, 30+i, "still reporting")
		}
		//nolint:forbidigo // the point: no write follows in two intervals
		time.Sleep(2 * jobq.ProgressInterval)
		return nil
	})
	cfg := fastConfig()
	cfg.Logger = buf.logger()
	cfg.CancelPollInterval = 5 * time.Millisecond
	var ev atomic.Pointer[jobq.Event]
	cfg.Hooks = []jobq.WorkerHooks{{Finished: func(e jobq.Event) { ev.Store(&e) }}}
	startWorker(t, b, reg, cfg)
	if _, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(t.Context(), "cancelme", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the attempt finished", func() bool { return ev.Load() != nil })
	if e := ev.Load(); e.Kind != jobq.EventCancelled || e.Err != nil {
		t.Fatalf("attempt ended %s with %v, want cancelled with no error", e.Kind, e.Err)
	}
	if n := b.writes.Load(); n != 2 {
		t.Fatalf("%d progress writes, want 2 (the first, and the refused one)", n)
	}
	if n := strings.Count(buf.String(), "progress refused"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, buf.String())
	}
}

// TestSetProgressInput: bad values and a context that is no handler's
// are input errors; the sync backend, which stores no progress, takes a
// good value and does nothing.
func TestSetProgressInput(t *testing.T) {
	t.Parallel()
	if err := jobq.SetProgress(t.Context(), 1, ""); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("SetProgress outside a handler = %v, want ErrInvalidInput", err)
	}
	b := inline.New()
	reg := jobq.NewRegistry()
	var errs []error
	reg.HandleFunc("p", func(ctx context.Context, j *jobq.Job) error {
		errs = append(errs,
			jobq.SetProgress(ctx, -1, ""),
			jobq.SetProgress(ctx, 101, ""),
			jobq.SetProgress(ctx, 5, strings.Repeat("x", backend.MaxProgressMessageBytes+1)),
			jobq.SetProgress(ctx, 50, "fine"))
		return nil
	})
	if _, err := mustClient(t, b, jobq.ClientConfig{Registry: reg}).Enqueue(t.Context(), "p", nil); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 4 {
		t.Fatalf("handler ran %d checks, want 4", len(errs))
	}
	for i, err := range errs[:3] {
		if !errors.Is(err, jobq.ErrInvalidInput) {
			t.Fatalf("bad report %d = %v, want ErrInvalidInput", i, err)
		}
	}
	if errs[3] != nil {
		t.Fatalf("SetProgress on the sync backend = %v, want nil", errs[3])
	}
}
