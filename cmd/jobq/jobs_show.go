package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

func (a *app) newJobsShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one job: state, payload, progress, result, last error and every failed attempt",
		Long: `Show one live (pending, scheduled, reserved) or kept (completed, cancelled)
job, or a failed one, by its ID, with the record of its failed attempts:
when each ended, how long it ran, which worker ran it and its error. A
kept completed job shows the result its handler recorded (SetResult), if
any: results are kept only while workers keep completed jobs
(Retention.Completed). A running job shows the progress its handler
last reported (SetProgress), if any. A failed job is shown as 'jobq failed show' shows
it.`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, jobIDHint)
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				info, err := jobq.NewInspector(b).Job(cmd.Context(), ids[0])
				if errors.Is(err, jobq.ErrNotFound) {
					return fmt.Errorf("job %d not found: it is done and not kept, or never existed", ids[0])
				}
				if err != nil {
					return err
				}
				if f := info.Failed; f != nil {
					if asJSON {
						// As GET /api/v1/jobs/{id} shows it: one job
						// among the others (failed show --json is
						// /api/v1/failed/{id}'s shape).
						return writeJSON(a.out, jobview.FailedAsJob(a.masker(), f))
					}
					a.printFailedJob(f)
					return nil
				}
				if asJSON {
					if info.Live != nil {
						return writeJSON(a.out, jobview.Live(a.masker(), info.State, info.Live))
					}
					return writeJSON(a.out, jobview.Finished(a.masker(), info.Finished))
				}
				a.printJob(info)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printJob prints one job as 'jobq jobs show' does.
func (a *app) printJob(info jobq.JobInfo) {
	var (
		id, attempts, maxAttempts, priority int
		queue, typ, lastError, key, uniqKey string
		payload                             []byte
		errs                                []backend.AttemptError
	)
	tw := newTable(a.out)
	if j := info.Live; j != nil {
		id, queue, typ, payload = int(j.ID), j.Queue, j.Type, j.Payload
		attempts, maxAttempts, priority = j.Attempts, j.MaxAttempts, j.Priority
		lastError, key, uniqKey, errs = j.LastError, j.Key, j.UniqueKey, j.Errors
	} else {
		j := info.Finished
		id, queue, typ, payload = int(j.ID), j.Queue, j.Type, j.Payload
		attempts, maxAttempts, priority = j.Attempts, j.MaxAttempts, j.Priority
		lastError, key, uniqKey = j.LastError, j.Key, j.UniqueKey
	}
	fmt.Fprintf(tw, "ID:\t%d\nState:\t%s\nQueue:\t%s\nType:\t%s\n", id, info.State, queue, typ)
	fmt.Fprintf(tw, "Attempts:\t%d of %d\nPriority:\t%d\n", attempts, maxAttempts, priority)
	printKeyLines(tw, key, uniqKey)
	if j := info.Live; j != nil {
		printWorkflowLine(tw, j.WorkflowID, j.Task)
		fmt.Fprintf(tw, "Enqueued at:\t%s\nDue at:\t%s\n", timeText(j.CreatedAt), timeText(j.AvailableAt))
		if !j.LeaseUntil.IsZero() {
			fmt.Fprintf(tw, "Reserved at:\t%s\nLease until:\t%s\n", timeText(j.ReservedAt), timeText(j.LeaseUntil))
		}
		if p := j.Progress; p != nil {
			fmt.Fprintf(tw, "Progress:\t%s (at %s)\n", progressText(p.Percent, a.masker().Text(p.Message)), timeText(p.At))
		}
	} else {
		fmt.Fprintf(tw, "Enqueued at:\t%s\nFinished at:\t%s\n", timeText(info.Finished.CreatedAt), timeText(info.Finished.FinishedAt))
	}
	tw.Flush()
	a.printJSONBlock("Payload", payload)
	if info.Finished != nil && len(info.Finished.Result) > 0 {
		a.printJSONBlock("Result", info.Finished.Result)
	}
	if lastError != "" {
		fmt.Fprintf(a.out, "Last error:\n%s\n", a.masker().Text(lastError))
	}
	a.printAttemptErrors(errs)
}

// progressText is a running job's progress on one line: "42%" and the
// handler's message, when it gave one.
func progressText(percent int, msg string) string {
	if msg == "" {
		return fmt.Sprintf("%d%%", percent)
	}
	return fmt.Sprintf("%d%% %s", percent, msg)
}

// printJSONBlock prints raw, masked and indented when it is JSON, under
// label.
func (a *app) printJSONBlock(label string, raw []byte) {
	masked := a.masker().JSON(raw)
	var pretty bytes.Buffer
	if json.Indent(&pretty, masked, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(masked)
	}
	fmt.Fprintf(a.out, "%s:\n%s\n", label, pretty.String())
}
