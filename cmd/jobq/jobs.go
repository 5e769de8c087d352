package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

func (a *app) newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs by state, or show one with its failed attempts",
		Long: `List jobs by state. pending, scheduled and reserved jobs are the live ones;
completed jobs are listed only while kept (a worker's --keep-completed),
cancelled ones for --keep-cancelled (a day by default); failed jobs have
their own command, 'jobq failed list'. Never creates a store.`,
	}
	requireSubcommand(cmd)
	a.addMaskKeys(cmd)
	list := a.newJobsListCmd()
	list.PreRunE = a.requireDurable
	cmd.AddCommand(list)
	show := a.newJobsShowCmd()
	show.PreRunE = a.requireDurable
	cmd.AddCommand(show)
	wait := a.newJobsWaitCmd()
	wait.PreRunE = a.requireDurable
	cmd.AddCommand(wait)
	return cmd
}

func (a *app) newJobsListCmd() *cobra.Command {
	var (
		f            filterFlags
		state        string
		since, until string
		limit        int
		before       int64
		asJSON       bool
	)
	cmd := &cobra.Command{
		Use:   "list --state pending|scheduled|reserved|completed|cancelled",
		Short: "List jobs of one state, newest first",
		Long: `List jobs of one state, newest first (highest ID first), --limit per page;
pass the last ID as --before for the next page. --since and --until bound
the time that belongs to the state (pending and scheduled: when due;
reserved: when claimed; completed and cancelled: when they finished), as
RFC 3339 times or durations before now (--since 1h).`,
		Args: exactArgs(0, "no arguments (choose with --state, filter with --queue, --type, --since, --until)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return usagef("--limit %d: use 1 to 10000", limit)
			}
			if before < 0 {
				return usagef("--before %d: use a job ID from a previous page", before)
			}
			if err := f.check(); err != nil {
				return err
			}
			if state == "" {
				return usagef("%s needs --state pending, scheduled, reserved, completed or cancelled", cmd.CommandPath())
			}
			// The parser's own refusal lists every state, cancelling and
			// failed too, which this command does not list: name its own.
			st, err := jobq.ParseJobState(state)
			live := st == jobq.StatePending || st == jobq.StateScheduled || st == jobq.StateReserved
			if err != nil || !live && st != jobq.StateCompleted && st != jobq.StateCancelled {
				return usagef("--state %q: use pending, scheduled, reserved, completed or cancelled (failed jobs: jobq failed list)", state)
			}
			now := time.Now()
			jf := jobq.JobFilter{Queue: f.queue, Type: f.typ, Key: f.key}
			if jf.Since, err = parseWhen("since", since, now); err != nil {
				return err
			}
			if jf.Until, err = parseWhen("until", until, now); err != nil {
				return err
			}
			if !jf.Since.IsZero() && !jf.Until.IsZero() && !jf.Until.After(jf.Since) {
				return usagef("--until %s is not after --since %s", until, since)
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				ins := jobq.NewInspector(b)
				if live {
					rows, err := ins.JobsPage(cmd.Context(), st, jf, limit, before)
					if err != nil {
						return err
					}
					if asJSON {
						return writeJSON(a.out, jobview.LiveList(a.masker(), st, rows))
					}
					a.printLiveTable(rows, st, limit)
					return nil
				}
				rows, err := ins.FinishedPage(cmd.Context(), st, jf, limit, before)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.out, jobview.FinishedList(a.masker(), rows))
				}
				a.printFinishedTable(rows, st, limit)
				return nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&state, "state", "", "pending, scheduled, reserved, completed or cancelled (required)")
	cmd.Flags().StringVar(&since, "since", "", "only jobs whose state's time is at or after this (RFC 3339, or a duration ago: 2h)")
	cmd.Flags().StringVar(&until, "until", "", "only jobs whose state's time is before this (RFC 3339, or a duration ago)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs")
	cmd.Flags().Int64Var(&before, "before", 0, "only jobs with a lower ID (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// parseWhen reads --since or --until: an RFC 3339 time, or a duration
// before now; empty is no bound.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usagef("--%s %s: give a duration before now without a sign (2h) or an RFC 3339 time", flag, s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usagef("--%s %q: use an RFC 3339 time (2026-01-02T15:04:05Z) or a duration before now (90m)", flag, s)
	}
	return t, nil
}

func (a *app) printLiveTable(rows []*jobq.JobRow, state jobq.JobState, limit int) {
	if len(rows) == 0 {
		fmt.Fprintf(a.out, "no %s jobs\n", state)
		return
	}
	tw := newTable(a.out)
	when := "DUE AT"
	if state == jobq.StateReserved {
		when = "CLAIMED AT"
	}
	fmt.Fprintf(tw, "ID\tQUEUE\tTYPE\tSTATE\tATTEMPTS\t%s\tCREATED AT\tLAST ERROR\n", when)
	for _, j := range rows {
		at := j.AvailableAt
		if state == jobq.StateReserved {
			at = j.ReservedAt
		}
		// The listed state, as --json says it: a scheduled job is stored
		// pending; only a running job's cancel shows in its own row.
		shown := state
		if j.Status == jobq.StateCancelling {
			shown = j.Status
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Queue, j.Type, shown,
			j.Attempts, j.MaxAttempts, timeText(at), timeText(j.CreatedAt), firstLine(a.masker().Text(j.LastError), 60))
	}
	tw.Flush()
	a.morePages(rows[len(rows)-1].ID, len(rows), limit, state)
}

func (a *app) printFinishedTable(rows []*jobq.FinishedJob, state jobq.JobState, limit int) {
	if len(rows) == 0 {
		fmt.Fprintf(a.out, "no %s jobs kept\n", state)
		return
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "ID\tQUEUE\tTYPE\tATTEMPTS\tFINISHED AT\tCREATED AT\tLAST ERROR")
	for _, j := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Queue, j.Type,
			j.Attempts, j.MaxAttempts, timeText(j.FinishedAt), timeText(j.CreatedAt), firstLine(a.masker().Text(j.LastError), 60))
	}
	tw.Flush()
	a.morePages(rows[len(rows)-1].ID, len(rows), limit, state)
}

func (a *app) morePages(last int64, n, limit int, state jobq.JobState) {
	if n == limit {
		fmt.Fprintf(a.errOut, "more may follow: jobq jobs list --state %s --before %d\n", state, last)
	}
}

// retentionFlags are the worker's --keep-* and --failed-max-* flags.
type retentionFlags struct {
	completed, cancelled, failedAge time.Duration
	failedCount                     int
	types                           []string // --keep-completed-type TYPE=DURATION
}

func (r *retentionFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.DurationVar(&r.completed, "keep-completed", 0, "keep completed jobs this long, for 'jobq jobs list --state completed' (0: delete at once)")
	fl.DurationVar(&r.cancelled, "keep-cancelled", 24*time.Hour, "keep cancelled jobs this long")
	fl.DurationVar(&r.failedAge, "failed-max-age", 0, "delete failed jobs older than this (0: keep them)")
	fl.IntVar(&r.failedCount, "failed-max-count", 0, "keep only the newest this many failed jobs (0: all)")
	fl.StringArrayVar(&r.types, "keep-completed-type", nil, "TYPE=DURATION: keep this type's completed jobs this long instead of --keep-completed (0: delete at once); repeat for more types")
}

// retention checks the flags and returns the worker's Retention.
func (r *retentionFlags) retention(cmd *cobra.Command) (jobq.Retention, error) {
	// Zero is "off" for each (the default cancelled retention for
	// --keep-cancelled); only a negative value is a mistake.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"keep-completed", r.completed}, {"keep-cancelled", r.cancelled}, {"failed-max-age", r.failedAge}} {
		if d.v < 0 {
			return jobq.Retention{}, usagef("--%s %s is negative: give a duration, or 0 for the default", d.name, d.v)
		}
	}
	if r.failedCount < 0 {
		return jobq.Retention{}, usagef("--failed-max-count %d is negative: give a count, or 0 to keep every failed job", r.failedCount)
	}
	ret := jobq.Retention{Completed: r.completed, Cancelled: r.cancelled, FailedMaxAge: r.failedAge, FailedMaxCount: r.failedCount}
	for _, arg := range r.types {
		typ, age, err := typeAge(arg)
		if err != nil {
			return jobq.Retention{}, err
		}
		if _, dup := ret.Types[typ]; dup {
			return jobq.Retention{}, usagef("--keep-completed-type names type %q twice: give each type once", typ)
		}
		if ret.Types == nil {
			ret.Types = map[string]jobq.TypeRetention{}
		}
		ret.Types[typ] = jobq.TypeRetention{Completed: age, DeleteAtOnce: age == 0}
	}
	return ret, nil
}

// typeAge reads one --keep-completed-type TYPE=DURATION; the type may
// hold "=", the duration cannot.
func typeAge(arg string) (string, time.Duration, error) {
	i := strings.LastIndex(arg, "=")
	if i <= 0 {
		return "", 0, usagef("--keep-completed-type %q: give TYPE=DURATION, such as email.send=24h", arg)
	}
	age, err := time.ParseDuration(arg[i+1:])
	if err != nil || age < 0 {
		return "", 0, usagef("--keep-completed-type %q: %q is no duration of 0 or more, such as 24h (0: delete at once)", arg, arg[i+1:])
	}
	return arg[:i], age, nil
}
