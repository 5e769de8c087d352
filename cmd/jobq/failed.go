package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

func (a *app) newFailedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "failed",
		Short: "List, show, replay and purge failed jobs",
		Long: `Jobs that ran out of attempts, or failed permanently, wait in the failed
jobs table with their payload and last error until replayed or purged.
A failed job keeps its job's ID, which these commands take, and a replay
brings the job back under it. These commands never create a store: a
--db without a jobq schema is an error (exit 1) that names the 'jobq
migrate' command creating it.`,
	}
	requireSubcommand(cmd)
	a.addMaskKeys(cmd)
	cmd.AddCommand(a.newFailedListCmd(), a.newFailedShowCmd(), a.newFailedRetryCmd(), a.newFailedPurgeCmd())
	for _, sub := range cmd.Commands() {
		sub.PreRunE = a.requireDurable
	}
	return cmd
}

// filterFlags are the --queue, --type and --key filters shared by the
// subcommands.
type filterFlags struct{ queue, typ, key string }

func (f *filterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.queue, "queue", "", "only jobs of this queue")
	cmd.Flags().StringVar(&f.typ, "type", "", "only jobs of this type")
	cmd.Flags().StringVar(&f.key, "key", "", "only jobs of this key (see 'jobq keys list')")
}

func (f *filterFlags) filter() jobq.FailedFilter {
	return jobq.FailedFilter{Queue: f.queue, Type: f.typ, Key: f.key}
}

func (f *filterFlags) set() bool { return f.queue != "" || f.typ != "" || f.key != "" }

// check refuses a --queue that no job can have, which would otherwise
// match nothing without a word.
func (f *filterFlags) check() error {
	if err := backend.ValidateKey(f.key); err != nil {
		return usagef("--key: %v", err)
	}
	if f.queue == "" {
		return nil
	}
	if err := backend.ValidateQueue(f.queue); err != nil {
		return usagef("--queue: %v", err)
	}
	return nil
}

func (a *app) newFailedListCmd() *cobra.Command {
	var (
		f      filterFlags
		limit  int
		before int64
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List failed jobs, newest first",
		Args:  exactArgs(0, "no arguments (filter with --queue and --type)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return usagef("--limit %d: use 1 to 10000", limit)
			}
			if before < 0 {
				return usagef("--before %d: use the cursor a previous page printed", before)
			}
			if err := f.check(); err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				jobs, err := jobq.NewInspector(b).FailedPage(cmd.Context(), f.filter(), limit, before)
				if err != nil {
					return err
				}
				if asJSON {
					err = writeJSON(a.out, jobview.FailedList(a.masker(), jobs))
				} else {
					a.printFailedTable(jobs)
				}
				if err == nil && len(jobs) == limit {
					// The failed row's own ID: a position in the list, not
					// a job ID, which is why it is printed here only.
					fmt.Fprintf(a.errOut, "more may follow: jobq failed list --before %d\n", jobs[len(jobs)-1].ID)
				}
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs")
	cmd.Flags().Int64Var(&before, "before", 0, "continue below this cursor, which the previous page printed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printFailedTable lists failed jobs by their job IDs, the IDs every
// failed command takes.
func (a *app) printFailedTable(jobs []*jobq.FailedJob) {
	if len(jobs) == 0 {
		fmt.Fprintln(a.out, "no failed jobs")
		return
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "ID\tQUEUE\tTYPE\tATTEMPTS\tFAILED AT\tERROR")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\n", j.JobID, j.Queue, j.Type,
			j.Attempts, j.MaxAttempts, timeText(j.FailedAt), firstLine(a.masker().Text(j.Error), 80))
	}
	tw.Flush()
}

func (a *app) newFailedShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one failed job, by its job ID: payload, full error, attempts and times",
		Args:  exactArgs(1, "one failed job's ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args, failedIDHint)
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				j, err := jobq.NewInspector(b).Failed(cmd.Context(), ids[0])
				if errors.Is(err, jobq.ErrNotFound) {
					return fmt.Errorf("failed job %d not found: see 'jobq failed list' for the IDs", ids[0])
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.out, jobview.FailedJob(a.masker(), j))
				}
				a.printFailedJob(j)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printFailedJob(j *jobq.FailedJob) {
	tw := newTable(a.out)
	fmt.Fprintf(tw, "ID:\t%d\nState:\t%s\nQueue:\t%s\nType:\t%s\n", j.JobID, jobq.StateFailed, j.Queue, j.Type)
	fmt.Fprintf(tw, "Attempts:\t%d of %d\nPriority:\t%d\n", j.Attempts, j.MaxAttempts, j.Priority)
	printKeyLines(tw, j.Key, j.UniqueKey)
	printWorkflowLine(tw, j.WorkflowID, j.Task)
	fmt.Fprintf(tw, "Enqueued at:\t%s\nFailed at:\t%s\n", timeText(j.CreatedAt), timeText(j.FailedAt))
	tw.Flush()
	// Shown as the admin surface shows it: secrets masked (internal/redact).
	payload := a.masker().JSON(j.Payload)
	var pretty bytes.Buffer
	if json.Indent(&pretty, payload, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(payload)
	}
	fmt.Fprintf(a.out, "Payload:\n%s\nError:\n%s\n", pretty.String(), a.masker().Text(j.Error))
	a.printAttemptErrors(j.Errors)
}

// printKeyLines prints a job's key, which leads to 'jobq keys show' (and
// says which key a held head holds), and its unique key; nothing for
// either it lacks.
func printKeyLines(w io.Writer, key, uniqueKey string) {
	if key != "" {
		fmt.Fprintf(w, "Key:\t%s\n", key)
	}
	if uniqueKey != "" {
		fmt.Fprintf(w, "Unique key:\t%s\n", uniqueKey)
	}
}

// printWorkflowLine prints which workflow task a job is, so that a failed
// task leads to 'jobq workflows show'; nothing for a plain job. A pruned
// workflow's task may have lost its name: then the ID alone.
func printWorkflowLine(w io.Writer, workflowID int64, task string) {
	switch {
	case workflowID == 0:
	case task == "":
		fmt.Fprintf(w, "Workflow:\t%d\n", workflowID)
	default:
		fmt.Fprintf(w, "Workflow:\t%d (task %s)\n", workflowID, task)
	}
}

// selection is what retry and purge act on: IDs, or everything matching
// the filters (all with --all).
type selection struct {
	f   filterFlags
	all bool
	// choices names, in the refusal of an empty selection, what the
	// command accepts besides IDs and --all (purge has more than retry).
	choices string
}

func (s *selection) add(cmd *cobra.Command, verb, choices string) {
	s.f.add(cmd)
	s.choices = choices
	cmd.Flags().BoolVar(&s.all, "all", false, verb+" every failed job (narrow with --queue and --type)")
}

// ids parses the arguments and refuses an empty or ambiguous selection, so
// that nothing acts on every failed job unless --all or a filter says so.
// narrowed reports a filter beyond the shared ones (purge's --older-than).
func (s *selection) ids(cmd *cobra.Command, args []string, narrowed bool) ([]int64, error) {
	if err := s.f.check(); err != nil {
		return nil, err
	}
	filtered := s.all || s.f.set() || narrowed
	if len(args) > 0 && filtered {
		return nil, usagef("%s: give failed job IDs or filters (--all, --queue, --type...), not both", cmd.CommandPath())
	}
	if len(args) == 0 && !filtered {
		return nil, usagef("%s needs failed job IDs, %s or --all for every failed job; see 'jobq failed list'", cmd.CommandPath(), s.choices)
	}
	return parseIDs(args, failedIDHint)
}

func (a *app) newFailedRetryCmd() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "retry ID... | --all [--queue Q] [--type T]",
		Short: "Replay failed jobs: back to pending with attempts reset",
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := s.ids(cmd, args, false)
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				var replayed, skipped int
				if len(ids) > 0 {
					replayed, skipped, err = in.Replay(cmd.Context(), ids...)
				} else {
					replayed, skipped, err = in.ReplayAll(cmd.Context(), s.f.filter())
				}
				if errors.Is(err, jobq.ErrNotFound) {
					return fmt.Errorf("%w: check the IDs with 'jobq failed list'; nothing was replayed", err)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "replayed %d, skipped %d\n", replayed, skipped)
				if skipped > 0 {
					fmt.Fprintln(a.errOut, "skipped jobs stay failed: a live job holds their unique key, or they are tasks of a workflow a user cancelled")
				}
				return nil
			})
		},
	}
	s.add(cmd, "replay", "a filter (--queue, --type)")
	return cmd
}

func (a *app) newFailedPurgeCmd() *cobra.Command {
	var (
		s         selection
		olderThan time.Duration
		keep      int
	)
	cmd := &cobra.Command{
		Use:   "purge ID... | --all | --older-than D | --keep N [--queue Q] [--type T]",
		Short: "Delete failed jobs for good",
		Long: `Delete failed jobs for good: the listed IDs, or every failed job matching
the filters (--all for all of them), or those that failed longer ago than
--older-than. --keep N instead keeps the N newest matching failed jobs and
deletes the rest, so the table can be bounded by count; with --queue or
--type only those jobs are counted and pruned. With neither IDs nor a
filter nor --all it refuses (exit 2) and deletes nothing.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positive(cmd, "older-than", olderThan); err != nil {
				return err
			}
			if err := positive(cmd, "keep", keep); err != nil {
				return err
			}
			if cmd.Flags().Changed("keep") && (len(args) > 0 || s.all || olderThan > 0) {
				return usagef("%s: --keep cannot be combined with failed job IDs, --all or --older-than (narrow it with --queue and --type)", cmd.CommandPath())
			}
			var ids []int64
			var err error
			if keep == 0 {
				ids, err = s.ids(cmd, args, olderThan > 0)
			} else {
				err = s.f.check()
			}
			if err != nil {
				return err
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				var n int
				var err error
				switch {
				case keep > 0:
					n, err = in.PurgeKeepNewest(cmd.Context(), s.f.filter(), keep)
				case len(ids) > 0:
					n, err = in.PurgeIDs(cmd.Context(), ids...)
				case s.all && !s.f.set() && olderThan == 0:
					n, err = in.PurgeAll(cmd.Context())
				default:
					// Only a filter gets here (s.ids refused an empty
					// selection), and PurgeMatching refuses an empty
					// one again rather than deleting everything.
					n, err = in.PurgeMatching(cmd.Context(), s.f.filter(), olderThan)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "purged %d\n", n)
				return nil
			})
		},
	}
	s.add(cmd, "purge", "a filter (--queue, --type, --older-than), --keep N")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only jobs that failed longer ago than this, e.g. 720h")
	cmd.Flags().IntVar(&keep, "keep", 0, "keep the `N` newest matching failed jobs and delete the rest")
	return cmd
}
