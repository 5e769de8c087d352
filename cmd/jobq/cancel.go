package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// exitNotCancelled is the exit code of 'jobq cancel' when some named jobs
// were not cancelled (already cancelled, finished or unknown) and nothing
// went wrong: each one's line says why.
const exitNotCancelled = 3

func (a *app) newCancelCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs: pending ones at once, running ones by stopping their handler",
		Long: `Cancel the jobs with the given IDs (as 'jobq enqueue' printed them) and print
one line per ID saying what happened:

  cancelled            it was pending or scheduled; it will not run
  cancel requested     it is running: the worker running it, on any machine,
                       cancels its handler's context within about a quarter
                       second, and the job ends cancelled whatever the
                       handler returns (never retried, never failed)
  already cancelled    nothing changed
  already completed    it completed (and is kept by retention); nothing changed
  already failed       it is in the failed jobs ('jobq failed list')
  not found            no such job, or it completed and was not kept

Cancelled jobs are listed by 'jobq jobs list --state cancelled' while kept
(workers prune them after a day by default).

Exit codes: 0 every job was cancelled or its cancel requested; 3 some were
not (their lines say why; the others were cancelled); 1 error; 2 usage.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs the IDs of the jobs to cancel, e.g. jobq cancel 42 43", cmd.CommandPath())
			}
			return nil
		},
		PreRunE: a.requireDurable,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, jobIDHint)
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				res, err := jobq.NewInspector(b).Cancel(cmd.Context(), ids...)
				if err != nil {
					return err
				}
				missed := 0
				out := make([]cancelJSON, len(res))
				for i, r := range res {
					if !r.Outcome.Changed() {
						missed++
					}
					out[i] = cancelJSON{ID: r.ID, Result: r.Outcome.String(), Attempt: r.Attempt}
				}
				if asJSON {
					if err := writeJSON(a.out, out); err != nil {
						return err
					}
				} else {
					for _, r := range res {
						fmt.Fprintln(a.out, cancelLine(r))
					}
				}
				if missed > 0 {
					// main prints nothing more: every line said why.
					return checkExit{code: exitNotCancelled}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: one object per ID with its result")
	return cmd
}

type cancelJSON struct {
	ID      int64  `json:"id"`
	Result  string `json:"result"`
	Attempt int    `json:"attempt,omitempty"`
}

// cancelLine is the one line 'jobq cancel' prints for a job.
func cancelLine(r jobq.CancelResult) string {
	p := fmt.Sprintf("job %d: ", r.ID)
	switch r.Outcome {
	case jobq.CancelCancelled:
		return p + "cancelled"
	case jobq.CancelRequested:
		return p + fmt.Sprintf("cancel requested: attempt %d is running; its handler is being stopped and the job ends cancelled", r.Attempt)
	case jobq.CancelAlready:
		return p + "already cancelled"
	case jobq.CancelCompleted:
		return p + "not cancelled: it already completed"
	case jobq.CancelFailed:
		return p + "not cancelled: it already failed (see jobq failed list)"
	case jobq.CancelNotFound:
		return p + "not cancelled: no such job (or it completed and was not kept)"
	}
	return p + r.Outcome.String()
}
