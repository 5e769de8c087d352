package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestCompleterBatchesAndRetries: outcomes are written in batches no larger
// than maxBatch, a write the backend could not do is retried, every job
// ends done, and Run returns once Close was called and the buffer is
// flushed.
func TestCompleterBatchesAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 250, time.Minute)
		f := &recorder{Backend: mem, completeErr: func(call int, _ backend.CompleteParams) error {
			if call == 1 {
				return fmt.Errorf("connection reset: %w", backend.ErrUnavailable)
			}
			return nil
		}}
		c := NewCompleter(f, 300, 100, 0, quiet, nil)
		wait := start(func() { c.Run(context.Background()) })
		for _, r := range rows {
			c.Submit(done(r))
		}
		c.Close()
		wait()
		if !queueEmpty(t, mem) {
			t.Fatal("jobs left after the completer flushed")
		}
		sizes := f.batchSizes()
		if len(sizes) < 4 { // the failed write of the first batch, then at least 3 batches of <= 100
			t.Fatalf("writes %v; want the failed one retried and batches of at most 100", sizes)
		}
		if sizes[0] != sizes[1] {
			t.Fatalf("writes %v: an unavailable backend must get the same batch again, not a split one", sizes)
		}
		for _, n := range sizes {
			if n > 100 {
				t.Fatalf("a batch of %d outcomes, above maxBatch 100: %v", n, sizes)
			}
		}
	})
}

// TestCompleterLingersWhenBusy: with two outcomes already waiting, the
// completer waits (up to its linger) for the three that follow 20 ms later
// and writes all five at once, instead of two writes.
func TestCompleterLingersWhenBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 5, time.Minute)
		f := &recorder{Backend: mem}
		c := NewCompleter(f, 10, 100, time.Second, quiet, nil)
		c.Submit(done(rows[0]))
		c.Submit(done(rows[1]))
		wait := start(func() { c.Run(context.Background()) })
		time.Sleep(20 * time.Millisecond)
		for _, r := range rows[2:] {
			c.Submit(done(r))
		}
		c.Close()
		wait()
		if got := f.batchSizes(); !slices.Equal(got, []int{5}) {
			t.Fatalf("batches written %v; want one batch of 5", got)
		}
		if !queueEmpty(t, mem) {
			t.Fatal("jobs left after the completer flushed")
		}
	})
}

// TestCompleterWritesLoneOutcomeAtOnce: a single outcome (an idle worker)
// is written without waiting out the linger.
func TestCompleterWritesLoneOutcomeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 1, time.Minute)
		f := &recorder{Backend: mem}
		c := NewCompleter(f, 10, 100, time.Hour, quiet, nil)
		wait := start(func() { c.Run(context.Background()) })
		defer func() { c.Close(); wait() }()
		began := time.Now()
		c.Submit(done(rows[0]))
		synctest.Wait()
		if len(f.batchSizes()) != 1 || time.Since(began) != 0 {
			t.Fatalf("after %s: writes %v; want the lone outcome written at once (linger is 1h)", time.Since(began), f.batchSizes())
		}
		if !queueEmpty(t, mem) {
			t.Fatal("the job is still there after its outcome was written")
		}
	})
}

// TestCompleterIsolatesRefusedOutcome: a backend that refuses any batch
// holding one particular outcome (as Postgres refused a batch holding an
// error text with a NUL byte) no longer stalls the completer: the batch is
// split, every other outcome is written, the refused one is written again
// with a plain error text, and that is logged.
func TestCompleterIsolatesRefusedOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 40, time.Minute)
		bad := rows[17].Ref()
		f := &recorder{Backend: mem, completeErr: func(_ int, p backend.CompleteParams) error {
			for _, o := range p.Outcomes {
				if o.Ref == bad && strings.Contains(o.Error, "poison") {
					return fmt.Errorf("complete jobs: %w: invalid byte sequence for encoding \"UTF8\"", backend.ErrInvalidInput)
				}
			}
			return nil
		}}
		var log logLines
		c := NewCompleter(f, 100, 100, 0, log.logger(), nil)
		for i, r := range rows {
			it := done(r)
			if i == 17 {
				it = retryItem(r, "poison")
			}
			c.Submit(it)
		}
		c.Close()
		wait := start(func() { c.Run(context.Background()) })
		wait()
		for i, r := range rows {
			if i == 17 {
				continue
			}
			if _, err := mem.JobGet(context.Background(), r.ID); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("job %d is still there: the refused outcome held back the others (writes %v)", r.ID, f.batchSizes())
			}
		}
		row, err := mem.JobGet(context.Background(), bad.ID)
		if err != nil || row.Status != backend.StatePending || !strings.Contains(row.LastError, "could not be stored") {
			t.Fatalf("refused job = %+v, %v; want it retried with a plain error text", row, err)
		}
		if !strings.Contains(log.String(), "job_id="+fmt.Sprint(bad.ID)) {
			t.Fatalf("the refused outcome was not logged with its job: %s", log.String())
		}
		if n := len(f.batchSizes()); n > 20 {
			t.Fatalf("%d writes for 40 outcomes and one refusal; want the split to stay logarithmic", n)
		}
	})
}

// TestCompleterDropsWhatItCannotWrite: an outcome the backend refuses even
// with a plain text is dropped and logged, and the completer goes on; a
// write that keeps failing with an unknown error is split after a few
// tries instead of being retried forever.
func TestCompleterDropsWhatItCannotWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 4, time.Minute)
		bad := rows[2].Ref()
		f := &recorder{Backend: mem, completeErr: func(_ int, p backend.CompleteParams) error {
			for _, o := range p.Outcomes {
				if o.Ref == bad {
					return errors.New("relation does not exist")
				}
			}
			return nil
		}}
		var log logLines
		c := NewCompleter(f, 10, 10, 0, log.logger(), nil)
		for _, r := range rows {
			c.Submit(done(r))
		}
		c.Close()
		c.Run(context.Background())
		for i, r := range rows {
			_, err := mem.JobGet(context.Background(), r.ID)
			if gone := errors.Is(err, backend.ErrNotFound); gone == (i == 2) {
				t.Fatalf("job %d (index %d): gone = %v; want only the refused one left reserved", r.ID, i, gone)
			}
		}
		if !strings.Contains(log.String(), "dropped it") {
			t.Fatalf("the dropped outcome was not logged: %s", log.String())
		}
	})
}

// TestCompleterWaitsOutUnavailableBackend: while the backend is down the
// batch is retried whole with backoff, for as long as it takes.
func TestCompleterWaitsOutUnavailableBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 3, time.Hour)
		f := &recorder{Backend: mem, completeErr: func(call int, _ backend.CompleteParams) error {
			if call <= 20 {
				return backend.ErrUnavailable
			}
			return nil
		}}
		c := NewCompleter(f, 10, 10, 0, quiet, nil)
		for _, r := range rows {
			c.Submit(done(r))
		}
		c.Close()
		began := time.Now()
		c.Run(context.Background())
		if !queueEmpty(t, mem) {
			t.Fatal("jobs left after the backend came back")
		}
		for _, n := range f.batchSizes() {
			if n != 3 {
				t.Fatalf("writes %v; want the whole batch every time", f.batchSizes())
			}
		}
		// 50ms doubling to a 5s cap: 20 failures take well over a minute.
		if took := time.Since(began); took < time.Minute {
			t.Fatalf("21 writes in %s; want backoff between them", took)
		}
	})
}

// TestCompleterReleaseFailureKeepsOutcomesWritten: when the releases of a
// batch fail once, the outcomes written with them are not sent again (they
// would come back stale and be counted as taken over).
func TestCompleterReleaseFailureKeepsOutcomesWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		f := &recorder{Backend: mem, releaseErr: func(call int) error {
			if call == 1 {
				return backend.ErrUnavailable
			}
			return nil
		}}
		var stale []Item
		c := NewCompleter(f, 10, 10, 0, quiet, func(it []Item) { stale = append(stale, it...) })
		c.Submit(done(rows[0]))
		c.Submit(release(rows[1]))
		c.Close()
		c.Run(context.Background())
		if n := f.sentTimes(rows[0].Ref()); n != 1 {
			t.Fatalf("the done outcome was sent %d times; want once", n)
		}
		if len(stale) != 0 {
			t.Fatalf("stale outcomes %v; want none", stale)
		}
		row, err := mem.JobGet(context.Background(), rows[1].ID)
		if err != nil || row.Status != backend.StatePending || row.Attempts != 0 {
			t.Fatalf("released job = %+v, %v; want pending with the attempt un-counted", row, err)
		}
	})
}

// TestCompleterReportsStale: outcomes the fence refuses reach onStale with
// their queue and type.
func TestCompleterReportsStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		old := done(rows[1])
		old.Outcome.Ref.Token += 7 // a claim that does not hold the job
		var stale []Item
		c := NewCompleter(mem, 10, 10, 0, quiet, func(it []Item) { stale = append(stale, it...) })
		c.Submit(done(rows[0]))
		c.Submit(old)
		c.Close()
		c.Run(context.Background())
		if len(stale) != 1 || stale[0].Outcome.Ref != old.Outcome.Ref || stale[0].Queue != "q" || stale[0].Type != "t" {
			t.Fatalf("stale = %+v; want the outcome of attempt 7 with queue q and type t", stale)
		}
	})
}

// TestCompleterReportsWritten: OnWritten hears of the outcomes and
// releases the backend applied, once each, and not of an outcome or a
// release the fence refused (those reach onStale); an outcome written
// again with a plain error text is heard of once it is written.
func TestCompleterReportsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 5, time.Minute)
		old := done(rows[1])
		old.Outcome.Ref.Token += 7 // a claim that does not hold the job
		oldRelease := done(rows[4])
		oldRelease.Outcome.Ref.Token += 7
		oldRelease.Release = true
		poisoned := rows[3].Ref()
		f := &recorder{Backend: mem, completeErr: func(_ int, p backend.CompleteParams) error {
			for _, o := range p.Outcomes {
				if o.Ref == poisoned && strings.Contains(o.Error, "poison") {
					return fmt.Errorf("complete jobs: %w: bad text", backend.ErrInvalidInput)
				}
			}
			return nil
		}}
		var stale []backend.JobRef
		c := NewCompleter(f, 10, 10, 0, quiet, func(items []Item) {
			for _, it := range items {
				stale = append(stale, it.Outcome.Ref)
			}
		})
		var written []backend.JobRef
		c.OnWritten(func(items []Item) {
			for _, it := range items {
				written = append(written, it.Outcome.Ref)
			}
		})
		release := done(rows[2])
		release.Release = true
		c.Submit(done(rows[0]))
		c.Submit(old)
		c.Submit(release)
		c.Submit(oldRelease)
		c.Submit(retryItem(rows[3], "poison"))
		c.Close()
		c.Run(context.Background())
		want := []backend.JobRef{rows[0].Ref(), poisoned, rows[2].Ref()}
		slices.SortFunc(written, func(a, b backend.JobRef) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(want, func(a, b backend.JobRef) int { return cmp.Compare(a.ID, b.ID) })
		if !slices.Equal(written, want) {
			t.Fatalf("written %v; want %v (not the stale claims)", written, want)
		}
		wantStale := []backend.JobRef{old.Outcome.Ref, oldRelease.Outcome.Ref}
		slices.SortFunc(stale, func(a, b backend.JobRef) int { return cmp.Compare(a.ID, b.ID) })
		if !slices.Equal(stale, wantStale) {
			t.Fatalf("stale %v; want %v", stale, wantStale)
		}
	})
}

// TestCompleterSubmitAfterClose: a handler that outlives the worker's
// shutdown submits after Close: Submit reports false instead of panicking
// on a closed channel, also when it was blocked on a full buffer when
// Close came; Close may be called twice.
func TestCompleterSubmitAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, rows := claimed(t, 3, time.Minute)
		c := NewCompleter(newMemory(t), 1, 10, 0, quiet, nil)
		if !c.Submit(done(rows[0])) {
			t.Fatal("Submit before Close refused")
		}
		var blocked bool
		waitBlocked := start(func() { blocked = c.Submit(done(rows[1])) }) // the buffer of 1 is full
		synctest.Wait()
		c.Close()
		c.Close()
		waitBlocked()
		if blocked {
			t.Fatal("a Submit blocked on the full buffer was accepted after Close")
		}
		if c.Submit(done(rows[2])) {
			t.Fatal("Submit after Close accepted")
		}
		c.Run(context.Background()) // flushes what was accepted, then returns
	})
}

// TestCompleterAbandonsWhenContextEnds: Run returns when its context ends,
// and what it could not write is logged, not retried.
func TestCompleterAbandonsWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		f := &recorder{Backend: mem, completeErr: func(int, backend.CompleteParams) error { return backend.ErrUnavailable }}
		var log logLines
		c := NewCompleter(f, 10, 1, 0, log.logger(), nil)
		ctx, cancel := context.WithCancel(context.Background())
		wait := start(func() { c.Run(ctx) })
		c.Submit(done(rows[0]))
		c.Submit(done(rows[1]))
		time.Sleep(time.Second)
		cancel()
		wait()
		if !strings.Contains(log.String(), "abandon") {
			t.Fatalf("abandoning was not logged: %s", log.String())
		}
		c.Close()
	})
}

// TestCompleterConcurrentSubmitAndClose: Submits racing Close never panic
// and every accepted item is written (run with -race).
func TestCompleterConcurrentSubmitAndClose(t *testing.T) {
	mem, rows := claimed(t, 200, time.Minute)
	c := NewCompleter(mem, 4, 10, 0, quiet, nil)
	wait := start(func() { c.Run(context.Background()) })
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []backend.JobRef
	for _, r := range rows {
		wg.Go(func() {
			if c.Submit(done(r)) {
				mu.Lock()
				accepted = append(accepted, r.Ref())
				mu.Unlock()
			}
		})
	}
	c.Close()
	wg.Wait()
	wait()
	for _, ref := range accepted {
		if _, err := mem.JobGet(context.Background(), ref.ID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("accepted outcome of job %d was not written", ref.ID)
		}
	}
}

// TestCompleterMarksResentStale: a write whose reply was lost after the
// backend applied it is sent again, and the fence refuses the resend: the
// stale callback hears of it marked Resent (it may be the lost send's own
// work, not a lost lease), while an outcome refused on its first send is
// not marked.
func TestCompleterMarksResentStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, rows := claimed(t, 2, time.Minute)
		f := &recorder{Backend: mem}
		f.completeErr = func(call int, p backend.CompleteParams) error {
			if call == 2 {
				// Applied, then the reply is lost.
				if _, err := mem.JobComplete(context.Background(), p); err != nil {
					return err
				}
				return fmt.Errorf("complete jobs: %w: reply lost", backend.ErrUnavailable)
			}
			return nil
		}
		var stale []Item
		c := NewCompleter(f, 10, 1, 0, quiet, func(it []Item) { stale = append(stale, it...) })
		old := done(rows[0])
		old.Outcome.Ref.Token++ // refused on its first send
		c.Submit(old)
		c.Submit(done(rows[1]))
		c.Close()
		c.Run(context.Background())
		if len(stale) != 2 || stale[0].Resent || !stale[1].Resent {
			t.Fatalf("stale %+v; want the first refused unmarked and the resent second marked Resent", stale)
		}
		if _, err := mem.JobGet(context.Background(), rows[1].ID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("job %d: %v; want it done by the send whose reply was lost", rows[1].ID, err)
		}
	})
}
