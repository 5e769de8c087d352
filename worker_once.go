package jobq

import (
	"context"
	"errors"
	"fmt"

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
// by the backend's clock. RunOne refuses to run while Run or another
// RunOne is running on the same Worker, and Run refuses while RunOne is. A
// backend error (claim or outcome write) is returned; after a failed write
// the job stays reserved until its lease expires, and the Finished hooks
// are not called.
func (w *Worker) RunOne(ctx context.Context) (ev Event, ok bool, err error) {
	if !w.hold() {
		return Event{}, false, errors.New("run one job: the worker is running")
	}
	defer w.release()
	rows, err := w.b.JobClaim(ctx, backend.ClaimParams{Queues: w.cfg.Queues, Max: 1, Lease: w.cfg.Lease})
	if err != nil {
		return Event{}, false, fmt.Errorf("run one job: %w", err)
	}
	if len(rows) == 0 {
		return Event{}, false, nil
	}
	// The caller's context is both the handler's and the worker's: its
	// cause ErrShutdown releases the job, as a stopping Run does.
	ev, err = w.runAttempt(ctx, ctx, rows[0], oneShot{w})
	return ev, true, err
}

// oneShot is RunOne's attemptHolder: nothing extends the claim, and the
// outcome is written before RunOne returns.
type oneShot struct{ w *Worker }

// completingInTx needs nothing: no heartbeat could find the row gone.
func (oneShot) completingInTx(backend.JobRef) {}

func (oneShot) handlerReturned(backend.JobRef) {}

// cancelledWhileRunning is false: with no heartbeat or cancel watcher,
// RunOne learns of a cancel from the write (see write).
func (oneShot) cancelledWhileRunning(context.Context) bool { return false }

// write writes one attempt's outcome (or release) at once and reports it
// as the completer does (onStale, onCancelled, onWritten). An outcome
// that ended the job cancelled instead (its cancel came while the handler
// ran) makes the attempt EventCancelled.
func (o oneShot) write(ctx context.Context, item runner.Item, kind EventKind) (EventKind, error) {
	w, ref := o.w, item.Outcome.Ref
	items := []runner.Item{item}
	var res backend.CompleteResult
	var err error
	if item.Release {
		res, err = w.b.JobRelease(ctx, []backend.JobRef{ref})
	} else {
		res, err = w.b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{item.Outcome}})
	}
	switch {
	case err != nil:
		return kind, fmt.Errorf("run one job: job %d attempt %d: %w", ref.ID, ref.Attempt, err)
	case len(res.Stale) > 0:
		w.onStale(items)
	case len(res.Cancelled) > 0:
		w.onCancelled(items)
		return EventCancelled, nil
	default:
		w.onWritten(items)
	}
	return kind, nil
}
