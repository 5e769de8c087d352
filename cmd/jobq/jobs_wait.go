package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// The exit codes of 'jobq jobs wait' beyond 0 (completed), 1 (error) and
// 2 (usage): one per way a job can end other than completed, so a script
// branches on the code without parsing the line.
const (
	exitWaitFailed    = 3 // the job is among the failed jobs
	exitWaitCancelled = 4 // the job was cancelled
	exitWaitTimeout   = 5 // --timeout ended first; the job runs on
	exitWaitGone      = 6 // no such job: completed and not kept, or never enqueued
)

func (a *app) newJobsWaitCmd() *cobra.Command {
	var (
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "wait ID [--timeout D]",
		Short: "Wait until a job is finished; print its result",
		Long: `Wait until the job with the given ID is finished, however many processes
away it runs, and print its result (the JSON its handler recorded with
SetResult; nothing when it recorded none). It wakes on the store's
notifications where it has them and polls otherwise (at most about a
second apart). A completed job's result is read from the kept completed
jobs: workers must keep them (--keep-completed, Retention.Completed or the
type's retention), or the job is gone once it completes.

Exit codes: 0 completed (its result on stdout); 3 failed; 4 cancelled;
5 --timeout passed first (the job goes on); 6 not found (completed and not
kept, pruned, or never enqueued); 1 error; 2 usage. Every code but 0
prints one line on stderr saying why.`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, jobIDHint)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %s: use a positive duration, or 0 to wait without limit", timeout)
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
				defer cancel()
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				res, err := jobq.NewInspector(b).Wait(ctx, ids[0])
				code := waitExit(err)
				if code == exitError {
					return err
				}
				if asJSON && code != exitWaitTimeout && code != exitWaitGone {
					if err := writeJSON(a.out, jobview.Waited(a.masker(), res)); err != nil {
						return err
					}
				} else if code == 0 && len(res.Result) > 0 {
					fmt.Fprintln(a.out, string(res.Result))
				}
				if code == 0 {
					return nil
				}
				if code == exitWaitTimeout {
					err = fmt.Errorf("job %d is not finished after --timeout %s", ids[0], timeout)
				}
				fmt.Fprintln(a.errOut, "jobq: "+err.Error())
				return checkExit{code: code}
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (exit 5); 0 waits without limit")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the finished job as JSON (id, state, result, error, finished_at)")
	return cmd
}

// errWaitTimeout is the cause of the context --timeout ends, which tells
// it from an interrupt.
var errWaitTimeout = errors.New("--timeout passed")

// waitExit is the exit code of a Wait's error.
func waitExit(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, jobq.ErrJobFailed):
		return exitWaitFailed
	case errors.Is(err, jobq.ErrJobCancelled):
		return exitWaitCancelled
	case errors.Is(err, errWaitTimeout):
		return exitWaitTimeout
	case errors.Is(err, jobq.ErrJobGone):
		return exitWaitGone
	}
	return exitError
}
