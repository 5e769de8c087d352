package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

func (a *app) newStatsCmd() *cobra.Command {
	var (
		watch    bool
		interval time.Duration
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count jobs per queue: pending, scheduled, reserved, failed",
		Long: `Count jobs per queue: pending (due now), scheduled (delayed or backing off
before a retry), reserved (running) and failed (in the failed jobs table).
With --watch the table is redrawn every --interval until Ctrl-C; with --json
each count is one JSON line. It never creates a store: a --db without a
jobq schema is an error (exit 1) that names the 'jobq migrate' command
creating it.`,
		Args:    exactArgs(0, "no arguments"),
		PreRunE: a.requireDurable,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := positive(cmd, "interval", interval); err != nil {
				return err
			}
			if cmd.Flags().Changed("interval") && !watch {
				return usagef("--interval only applies with --watch")
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				if !watch {
					return a.printStats(cmd.Context(), in, asJSON, false)
				}
				return a.watchStats(cmd.Context(), in, interval, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "redraw until Ctrl-C")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch redraws")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// watchStats prints the counts every interval until ctx ends (Ctrl-C), which
// is a normal end: it returns nil.
func (a *app) watchStats(ctx context.Context, in *jobq.Inspector, interval time.Duration, asJSON bool) error {
	clear := !asJSON && isTerminal(a.out)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if clear {
			fmt.Fprint(a.out, "\x1b[H\x1b[2J") // cursor home, clear screen
		}
		if err := a.printStats(ctx, in, asJSON, !clear && !asJSON); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// statsJSON is one reading of the counts for --json.
type statsJSON struct {
	At     time.Time   `json:"at"`
	Queues []queueJSON `json:"queues"`
	Total  queueJSON   `json:"total"`
}

type queueJSON struct {
	Queue     string `json:"queue,omitempty"`
	Pending   int64  `json:"pending"`
	Scheduled int64  `json:"scheduled"`
	Reserved  int64  `json:"reserved"`
	Failed    int64  `json:"failed"`
}

func toQueueJSON(s jobq.QueueStats) queueJSON {
	return queueJSON{Queue: s.Queue, Pending: s.Pending, Scheduled: s.Scheduled, Reserved: s.Reserved, Failed: s.Failed}
}

// printStats prints one reading: a table with a total row, or one JSON line.
// stamped adds the time above the table, so frames of a watch piped to a
// file can be told apart.
func (a *app) printStats(ctx context.Context, in *jobq.Inspector, asJSON, stamped bool) error {
	stats, err := in.Stats(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if asJSON {
		out := statsJSON{At: now.UTC(), Queues: make([]queueJSON, len(stats)), Total: toQueueJSON(jobq.Totals(stats))}
		for i, s := range stats {
			out.Queues[i] = toQueueJSON(s)
		}
		return writeJSONLine(a.out, out)
	}
	if stamped {
		fmt.Fprintln(a.out, "--", now.Format(time.TimeOnly))
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "QUEUE\tPENDING\tSCHEDULED\tRESERVED\tFAILED")
	row := func(name string, s jobq.QueueStats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", name, s.Pending, s.Scheduled, s.Reserved, s.Failed)
	}
	for _, s := range stats {
		row(s.Queue, s)
	}
	row("TOTAL", jobq.Totals(stats))
	return tw.Flush()
}
