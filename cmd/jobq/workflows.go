package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// workflowIDHint is the usage hint of a bad workflow ID argument.
const workflowIDHint = "is not a workflow ID: use the numbers in the ID column of 'jobq workflows list'"

func (a *app) newWorkflowsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workflows",
		Aliases: []string{"workflow"},
		Short:   "List, show and cancel workflows: graphs of tasks that wait for each other",
		Long: `A workflow is a graph of named tasks, each an ordinary job, where a task
waits until the tasks it depends on have ended. A workflow is running while
any task is waiting or has a live job, then succeeded (every task
succeeded) or failed; a cancelled one stays cancelled. A failed task is
replayed with 'jobq failed retry' of its failed job ('jobq workflows show'
prints the command), which returns the workflow to running.

These commands never create a store: a --db without a jobq schema is an
error (exit 1) that names the 'jobq migrate' command creating it. A
backend that does not run workflows is an error too.`,
	}
	requireSubcommand(cmd)
	a.addMaskKeys(cmd)
	cmd.AddCommand(a.newWorkflowsListCmd(), a.newWorkflowsShowCmd(), a.newWorkflowsCancelCmd())
	for _, sub := range cmd.Commands() {
		sub.PreRunE = a.requireDurable
	}
	return cmd
}

// workflowErr turns the errors every workflow command shares into one
// line that says what to do: an unknown ID, or a backend without
// workflows.
func (a *app) workflowErr(id int64, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jobq.ErrNoWorkflows):
		return fmt.Errorf("--db %s: this backend does not run workflows", schemeOf(a.db))
	case id > 0 && errors.Is(err, jobq.ErrNotFound):
		return fmt.Errorf("workflow %d not found: see 'jobq workflows list' for the IDs", id)
	}
	return err
}

// workflowStates are the values of --state, in the order the help names
// them.
var workflowStates = []backend.WorkflowState{backend.WorkflowRunning, backend.WorkflowSucceeded, backend.WorkflowFailed, backend.WorkflowCancelled}

func (a *app) newWorkflowsListCmd() *cobra.Command {
	var (
		state  string
		limit  int
		before int64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--state running|succeeded|failed|cancelled]",
		Short: "List workflows, newest first, with their tasks counted by state",
		Args:  exactArgs(0, "no arguments (filter with --state)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return usagef("--limit %d: use 1 to 10000", limit)
			}
			if before < 0 {
				return usagef("--before %d: use a workflow ID from a previous page", before)
			}
			if state != "" && !validWorkflowState(state) {
				return usagef("--state %q: use running, succeeded, failed or cancelled", state)
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				rows, err := jobq.NewInspector(b).Workflows(cmd.Context(), state, limit, before)
				if err != nil {
					return a.workflowErr(0, err)
				}
				if asJSON {
					return writeJSON(a.out, jobview.WorkflowList(a.masker(), rows))
				}
				a.printWorkflowTable(rows, state, limit)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only workflows in this state: running, succeeded, failed or cancelled")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many workflows")
	cmd.Flags().Int64Var(&before, "before", 0, "only workflows with a lower ID (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func validWorkflowState(s string) bool {
	for _, w := range workflowStates {
		if s == string(w) {
			return true
		}
	}
	return false
}

func (a *app) printWorkflowTable(rows []*jobq.WorkflowInfo, state string, limit int) {
	if len(rows) == 0 {
		if state == "" {
			fmt.Fprintln(a.out, "no workflows")
		} else {
			fmt.Fprintf(a.out, "no %s workflows\n", state)
		}
		return
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tTASKS\tWAITING\tACTIVE\tSUCCEEDED\tFAILED\tCANCELLED\tCREATED AT")
	for _, w := range rows {
		c := w.Counts
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", w.ID, orDash(firstLine(w.Name, 40)), w.State,
			c.Waiting+c.Active+c.Succeeded+c.Failed+c.Cancelled, c.Waiting, c.Active, c.Succeeded, c.Failed, c.Cancelled, timeText(w.CreatedAt))
	}
	tw.Flush()
	if len(rows) == limit {
		next := fmt.Sprintf("jobq workflows list --before %d", rows[len(rows)-1].ID)
		if state != "" {
			next += " --state " + state
		}
		fmt.Fprintln(a.errOut, "more may follow: "+next)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) newWorkflowsShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one workflow: its state and its tasks, what each waits on, and why a task failed or was cancelled",
		Long: `Show one workflow and its tasks, one line each in the order they were
stored (every task after the tasks it depends on): its state, its job's ID
(once it has a job), its queue and type, the tasks it runs after ("(continue)"
marks a dependency whose failure does not cancel it), the ones it is still
waiting on, and why it failed or was cancelled. A failed task's line names
the 'jobq failed retry' command that replays it. --json adds each task's
result.`,
		Args: exactArgs(1, "one workflow ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, workflowIDHint)
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				w, err := in.Workflow(cmd.Context(), ids[0])
				if err != nil {
					return a.workflowErr(ids[0], err)
				}
				if asJSON {
					return writeJSON(a.out, jobview.WorkflowOf(a.masker(), w))
				}
				return a.printWorkflow(cmd.Context(), in, w)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printWorkflow(ctx context.Context, in *jobq.Inspector, w *jobq.WorkflowInfo) error {
	title := fmt.Sprintf("Workflow %d", w.ID)
	if w.Name != "" {
		title += fmt.Sprintf(" %q", w.Name)
	}
	fmt.Fprintf(a.out, "%s: %s\n", title, w.State)
	tw := newTable(a.out)
	fmt.Fprintf(tw, "Created:\t%s\n", timeText(w.CreatedAt))
	if !w.FinishedAt.IsZero() {
		fmt.Fprintf(tw, "Finished:\t%s\n", timeText(w.FinishedAt))
	}
	fmt.Fprintf(tw, "Tasks:\t%s\n", countsText(w.Counts))
	tw.Flush()
	fmt.Fprintln(a.out)
	tw = newTable(a.out)
	// The failed tasks whose failed jobs are still there to replay.
	replayable, err := jobview.Replayable(ctx, in, w.Tasks)
	if err != nil {
		return err
	}
	fmt.Fprintln(tw, "TASK\tSTATE\tJOB\tQUEUE/TYPE\tDEPENDENCIES AND REASON")
	for _, t := range w.Tasks {
		notes := a.taskNotes(t, replayable[t.JobID])
		job := "-"
		if t.JobID > 0 {
			job = fmt.Sprint(t.JobID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\n", t.Name, t.State, job, t.Queue, t.Type, orDash(notes))
	}
	return tw.Flush()
}

// countsText is "5: 2 succeeded, 1 active, 2 waiting", the states with no
// task left out.
func countsText(c backend.TaskCounts) string {
	var parts []string
	for _, s := range []struct {
		n    int
		name string
	}{{c.Succeeded, "succeeded"}, {c.Failed, "failed"}, {c.Cancelled, "cancelled"}, {c.Active, "active"}, {c.Waiting, "waiting"}} {
		if s.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", s.n, s.name))
		}
	}
	total := c.Waiting + c.Active + c.Succeeded + c.Failed + c.Cancelled
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

// taskNotes is the last column of a task's line: "after a, b (continue)",
// "waiting on b", the reason it failed or was cancelled, and for a failed
// task whose failed job is still there (replayable) the command that
// replays it.
func (a *app) taskNotes(t *jobq.WorkflowTask, replayable bool) string {
	var notes []string
	if len(t.Deps) > 0 {
		deps := make([]string, len(t.Deps))
		for i, d := range t.Deps {
			deps[i] = d.Task
			if d.Policy == backend.DepContinue {
				deps[i] += " (continue)"
			}
		}
		notes = append(notes, "after "+strings.Join(deps, ", "))
	}
	if t.State == backend.TaskWaiting && len(t.WaitingOn) > 0 {
		notes = append(notes, "waiting on "+strings.Join(t.WaitingOn, ", "))
	}
	if t.Reason != "" && (t.State == backend.TaskFailed || t.State == backend.TaskCancelled) {
		notes = append(notes, string(t.State)+": "+firstLine(a.masker().Text(t.Reason), 80))
	}
	if t.State == backend.TaskFailed && replayable {
		notes = append(notes, fmt.Sprintf("replay: jobq failed retry %d", t.JobID))
	}
	return strings.Join(notes, "; ")
}

func (a *app) newWorkflowsCancelCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a running workflow: its waiting and pending tasks at once, its running jobs by stopping their handlers",
		Long: `Cancel a running workflow: its waiting tasks, and the tasks whose jobs are
pending or scheduled, end cancelled at once; the handlers running its
tasks' jobs are told to stop (as 'jobq cancel' does) and their tasks end
cancelled now. The workflow is cancelled for good: replaying its failed
tasks is refused.

Exit codes: 0 the workflow was cancelled; 3 it had already ended (the line
says how) and nothing changed; 1 error (an unknown ID among them); 2 usage.`,
		Args: exactArgs(1, "one workflow ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, workflowIDHint)
			if err != nil {
				return err
			}
			id := ids[0]
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				res, err := jobq.NewInspector(b).CancelWorkflow(cmd.Context(), id)
				if err != nil {
					return a.workflowErr(id, err)
				}
				if asJSON {
					if err := writeJSON(a.out, workflowCancelJSON{ID: id, Changed: res.Changed, State: string(res.State), Cancelled: res.Cancelled, Requested: res.Requested}); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(a.out, workflowCancelLine(id, res))
				}
				if !res.Changed {
					return checkExit{code: exitNotCancelled}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: what the cancel did")
	return cmd
}

type workflowCancelJSON struct {
	ID        int64  `json:"id"`
	Changed   bool   `json:"changed"`
	State     string `json:"state"`
	Cancelled int    `json:"cancelled"`
	Requested int    `json:"requested"`
}

// workflowCancelLine says what 'jobq workflows cancel' did.
func workflowCancelLine(id int64, r jobq.WorkflowCancelResult) string {
	if !r.Changed {
		return fmt.Sprintf("workflow %d: not cancelled: it already ended %s", id, r.State)
	}
	line := fmt.Sprintf("workflow %d: cancelled: %s cancelled", id, plural(r.Cancelled, "task"))
	if r.Requested > 0 {
		line += fmt.Sprintf(", %s told to stop", plural(r.Requested, "running job"))
	}
	return line
}
