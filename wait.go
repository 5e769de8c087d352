package jobq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// ErrJobGone is Wait's answer for a job the store has nowhere: not live,
// not among the failed jobs, not kept among the finished ones. A completed
// job that was not kept (Retention.Completed zero, or its type's retention
// deleting it at once: the default) is deleted by its completion, so its
// result is gone; a failed or cancelled job pruned by retention is gone
// too. An ID never enqueued gets the same answer: the store keeps no
// record of the jobs it deleted, so it cannot tell the two apart, and
// reporting "completed" for an ID it has never seen would turn a typo
// into a success. To Wait for a job's result, keep its type's completed
// jobs a while (Retention.Completed or Retention.Types).
var ErrJobGone = errors.New("job not found: finished but not retained, or never enqueued; set Retention.Completed (or its type's retention) to read a completed job's result")

// ErrJobFailed is the error Wait returns, wrapped with the job's last
// error, for a job that ended among the failed jobs (its attempts spent, a
// permanent error, its deadline passed).
var ErrJobFailed = errors.New("job failed")

// WaitResult is a finished job as Wait reports it.
type WaitResult struct {
	ID int64
	// State is StateCompleted, StateFailed or StateCancelled.
	State JobState
	// Result is what the handler recorded (SetResult) for a completed job;
	// nil for none and for the other states.
	Result json.RawMessage
	// Error is a failed job's last error, "cancelled" for a cancelled one,
	// "" for a completed one.
	Error string
	// FinishedAt is when it completed, failed or was cancelled (the
	// backend's clock).
	FinishedAt time.Time
}

// Polling bounds of Wait: the first look after a quiet one comes after
// waitPollMin, each next one after twice the last, up to waitPollMax. A
// backend's FinishNotifier hint makes it look at once, so the poll only
// bounds how late a lost hint makes it, and what Wait costs on a backend
// without hints.
const (
	waitPollMin = 10 * time.Millisecond
	waitPollMax = time.Second
)

// Wait blocks until the job id is finished and returns it: with a nil
// error when it completed (its Result set when the handler recorded
// one); with the job and an error wrapping ErrJobFailed when it failed,
// or ErrJobCancelled when it was cancelled. It works across processes: a
// worker anywhere on the store finishes the job. It looks again whenever
// the backend hints that jobs finished (backend.FinishNotifier: every
// built-in durable backend) and polls otherwise, backing off up to about
// a second, so a lost hint only delays it. A job the store no longer has
// anywhere (completed but not retained, pruned, or never enqueued) is
// ErrJobGone: keep completed jobs (Retention) to read their results. It
// returns ctx's error when ctx ends first. A look that finds the store out
// of reach (ErrUnavailable: a connection cut, a server restarting) is
// looked again at the next poll; any other error of a look is returned at
// once.
func (c *Client) Wait(ctx context.Context, id int64) (WaitResult, error) {
	return waitJob(ctx, c.b, id)
}

// Wait is Client.Wait for an operator's surface (the admin API, the
// command line), which holds an Inspector.
func (i *Inspector) Wait(ctx context.Context, id int64) (WaitResult, error) {
	return waitJob(ctx, i.b, id)
}

// waitJob is Wait on b: subscribe first, then look, so that a job
// finishing between the look and the wait still wakes it.
func waitJob(ctx context.Context, b backend.Backend, id int64) (WaitResult, error) {
	ins := &Inspector{b: b}
	var hints <-chan struct{}
	if n, ok := backend.As[backend.FinishNotifier](b); ok {
		ch, cancel := n.SubscribeFinished()
		defer cancel()
		hints = ch
	}
	poll := waitPollMin
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		res, done, err := waitLook(ctx, ins, id)
		if err != nil && ctx.Err() != nil && res.State == "" && !errors.Is(err, ErrJobGone) {
			// The look failed because ctx ended: say that, with its cause,
			// not the store's words for it.
			return WaitResult{}, fmt.Errorf("wait for job %d: %w", id, context.Cause(ctx))
		}
		if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			// The store is out of reach for now (a cut connection, a
			// restart): a durable wait outlives that, bounded by ctx,
			// and looks again at its next poll.
			done, err = false, nil
		}
		if done || err != nil {
			return res, err
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return WaitResult{}, fmt.Errorf("wait for job %d: %w", id, context.Cause(ctx))
		case <-hints:
			// Jobs finished somewhere: look at once. The poll keeps its
			// length, so a stream of other jobs' hints does not turn
			// into faster polling than the hints themselves.
		case <-timer.C:
			poll = min(2*poll, waitPollMax)
		}
	}
}

// waitLook looks the job up once: done with its result (and error) when it
// is finished or gone, not done while it is live.
func waitLook(ctx context.Context, ins *Inspector, id int64) (WaitResult, bool, error) {
	info, err := ins.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// A replay may have moved it from the failed jobs back to the
		// live ones between the two reads: look at the live ones again
		// before calling it gone.
		if _, again := ins.b.JobGet(ctx, id); again == nil {
			return WaitResult{}, false, nil
		}
		return WaitResult{ID: id}, true, fmt.Errorf("wait for job %d: %w", id, ErrJobGone)
	}
	if err != nil {
		return WaitResult{}, true, fmt.Errorf("wait for job %d: %w", id, err)
	}
	switch {
	case info.Failed != nil:
		f := info.Failed
		res := WaitResult{ID: id, State: StateFailed, Error: f.Error, FinishedAt: f.FailedAt}
		return res, true, fmt.Errorf("job %d: %w: %s", id, ErrJobFailed, shortError(f.Error))
	case info.Finished != nil && info.State == StateCancelled:
		res := WaitResult{ID: id, State: StateCancelled, Error: backend.CancelledError, FinishedAt: info.Finished.FinishedAt}
		return res, true, fmt.Errorf("job %d: %w", id, ErrJobCancelled)
	case info.Finished != nil:
		f := info.Finished
		return WaitResult{ID: id, State: StateCompleted, Result: json.RawMessage(f.Result), FinishedAt: f.FinishedAt}, true, nil
	}
	return WaitResult{}, false, nil
}

// maxErrorInMessage bounds the job's error as Wait's error message quotes
// it: it may be a megabyte of panic stack. WaitResult.Error has it whole.
const maxErrorInMessage = 200

// shortError is s cut to maxErrorInMessage bytes, marked when cut.
func shortError(s string) string {
	if len(s) <= maxErrorInMessage {
		return s
	}
	return backend.Shorten(s, maxErrorInMessage) + "…"
}
