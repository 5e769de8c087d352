package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

func (a *app) newCronCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "List periodic schedules: spec, next and last run",
		Long: `Periodic schedules are defined in worker code (jobq.WorkerConfig.Schedules);
each worker registers its schedules in the store when it starts, so the
store knows every schedule some worker has run. These commands only read:
they never create a store, and a --db without a jobq schema is an error
(exit 1) that names the 'jobq migrate' command creating it.`,
	}
	requireSubcommand(cmd)
	cmd.AddCommand(a.newCronListCmd())
	for _, sub := range cmd.Commands() {
		sub.PreRunE = a.requireDurable
	}
	return cmd
}

func (a *app) newCronListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show each schedule, its spec, next run and last run",
		Long: `Show each registered schedule: its name, spec (with its time zone), the
queue and type of its jobs, its next tick (computed now from the spec, by
this machine's clock), its last tick enqueued and that job's ID. Times are
UTC. "never" means no tick was enqueued yet.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				list, err := jobq.NewInspector(b).Schedules(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]scheduleJSON, len(list))
					for i, s := range list {
						out[i] = toScheduleJSON(s)
					}
					return writeJSON(a.out, out)
				}
				a.printSchedules(list)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printSchedules(list []jobq.ScheduleInfo) {
	if len(list) == 0 {
		fmt.Fprintln(a.out, "no schedules: a worker registers its WorkerConfig.Schedules when it starts")
		return
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "NAME\tSPEC\tQUEUE\tTYPE\tNEXT\tLAST\tLAST JOB")
	for _, s := range list {
		last, job := "never", "-"
		if !s.LastTick.IsZero() {
			last, job = utc(s.LastTick), fmt.Sprint(s.LastJobID)
		}
		next := "-"
		if !s.Next.IsZero() {
			next = utc(s.Next)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Spec, s.Queue, s.Type, next, last, job)
	}
	_ = tw.Flush()
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// scheduleJSON is one schedule for --json; absent times are null.
type scheduleJSON struct {
	Name           string     `json:"name"`
	Spec           string     `json:"spec"`
	Queue          string     `json:"queue"`
	Type           string     `json:"type"`
	Next           *time.Time `json:"next"`
	LastTick       *time.Time `json:"last_tick"`
	LastEnqueuedAt *time.Time `json:"last_enqueued_at"`
	LastJobID      int64      `json:"last_job_id,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	RegisteredAt   time.Time  `json:"registered_at"`
}

func toScheduleJSON(s jobq.ScheduleInfo) scheduleJSON {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return scheduleJSON{Name: s.Name, Spec: s.Spec, Queue: s.Queue, Type: s.Type, Next: opt(s.Next),
		LastTick: opt(s.LastTick), LastEnqueuedAt: opt(s.LastEnqueuedAt), LastJobID: s.LastJobID,
		CreatedAt: s.CreatedAt.UTC(), RegisteredAt: s.RegisteredAt.UTC()}
}
