package jobq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/runner"
)

// RunOne claims the next due job of the worker's queues (priority, then
// age) and runs one attempt of it in the calling goroutine, with the same
// handler lookup, middleware, timeout, retry policy and hooks as Run, then
// writes its outcome before returning. ok is false, with a zero Event, when
// no job was due. It starts no goroutine: there is no heartbeat, so an
// attempt longer than the worker's Lease may be rescued by another worker's
// lease sweep meanwhile (its outcome is then refused by the fence and
// reported to the Stale hooks), and no lease sweep of its own.
//
// It is the deterministic step the test helpers in package jobqtest build
// on: a test runs the queue attempt by attempt without worker goroutines or
// sleeps. A retried job is written back with the retry policy's delay
// (Event.RetryDelay), so it is due again only once that delay has passed
// by the backend's clock. RunOne refuses to run while Run is running on
// the same Worker. A backend error (claim or outcome write) is returned;
// after a failed write the job stays reserved until its lease expires.
func (w *Worker) RunOne(ctx context.Context) (ev Event, ok bool, err error) {
	if w.running.Load() {
		return Event{}, false, errors.New("run one job: the worker is running")
	}
	rows, err := w.b.JobClaim(ctx, backend.ClaimParams{Queues: w.cfg.Queues, Max: 1, Lease: w.cfg.Lease})
	if err != nil {
		return Event{}, false, fmt.Errorf("run one job: %w", err)
	}
	if len(rows) == 0 {
		return Event{}, false, nil
	}
	row := rows[0]
	job := w.jobOf(row)
	w.hooks.claimed(ClaimedEvent{Job: job, Wait: waitTime(row)})
	jc := &jobCtx{job: job, ref: row.Ref(), backend: w.b}
	w.busy.Add(1)
	w.hooks.started(ctx, job)
	start := time.Now()
	returned := false
	defer func() {
		// A handler that calls runtime.Goexit (t.FailNow in a test's
		// handler) ends the calling goroutine; its attempt is still
		// written, as a failure, on the way out.
		if !returned {
			_, _, _ = w.finishOne(ctx, jc, row, errGoexit, time.Since(start))
		}
	}()
	herr := w.reg.run(ctx, jc, w.cfg.JobTimeout)
	returned = true
	return w.finishOne(ctx, jc, row, herr, time.Since(start))
}

// finishOne writes the outcome of RunOne's attempt, whose handler
// returned herr after took, and tells the hooks.
func (w *Worker) finishOne(ctx context.Context, jc *jobCtx, row *backend.JobRow, herr error, took time.Duration) (Event, bool, error) {
	job := jc.job
	w.busy.Add(-1)
	item, ev := w.decide(ctx, row, job, herr)
	jc.attachResult(&item.Outcome)
	ev.Duration = took
	item.Job, item.Err, item.Took = job, herr, took
	inTx := herr == nil && jc.completedInTx.Load()
	if !inTx {
		cancelled, err := w.writeOne(ctx, item)
		if err != nil {
			return ev, true, fmt.Errorf("run one job: job %d attempt %d: %w", row.ID, row.Attempts, err)
		}
		if cancelled {
			// Cancelled while it ran: the backend refused the outcome and
			// ended the job cancelled, whatever the handler returned.
			ev.Kind = EventCancelled
		}
	}
	w.hooks.finished(ev)
	if inTx {
		w.hooks.written(ev) // written by the handler's transaction
	}
	return ev, true, nil
}

// writeOne writes one attempt's outcome (or release) at once and reports
// it as the completer does (onStale, onCancelled, onWritten). It says
// whether the outcome ended the job cancelled instead (its cancel came
// while the handler ran).
func (w *Worker) writeOne(ctx context.Context, item runner.Item) (cancelled bool, _ error) {
	items := []runner.Item{item}
	var res backend.CompleteResult
	var err error
	if item.Release {
		res, err = w.b.JobRelease(ctx, []backend.JobRef{item.Outcome.Ref})
	} else {
		res, err = w.b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{item.Outcome}})
	}
	switch {
	case err != nil:
		return false, err
	case len(res.Stale) > 0:
		w.onStale(items)
	case len(res.Cancelled) > 0:
		w.onCancelled(items)
		return true, nil
	default:
		w.onWritten(items)
	}
	return false, nil
}
