package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

func (a *app) newQueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List queues; pause, resume and limit them across every worker",
		Long: `Queue settings live in the store, so every worker on every machine obeys
them: a paused queue is skipped by every claim (jobs already running
finish normally, enqueues go on); a concurrency limit bounds the queue's
jobs running at once over all workers; a rate limit bounds its starts per
period. Jobs held back stay pending and spend no attempt. These commands
never create a store: a --db without a jobq schema is an error (exit 1)
that names the 'jobq migrate' command creating it.`,
	}
	requireSubcommand(cmd)
	cmd.AddCommand(a.newQueueListCmd(), a.newQueuePauseCmd(true), a.newQueuePauseCmd(false), a.newQueueLimitCmd(), a.newQueueKeysCmd())
	for _, sub := range cmd.Commands() {
		sub.PreRunE = a.requireDurable
	}
	return cmd
}

// queueInfoJSON is one queue of 'jobq queue list --json'.
type queueInfoJSON struct {
	queueJSON
	Paused      bool   `json:"paused"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	RatePeriod  string `json:"rate_period,omitempty"`
	KeyLimit    int    `json:"key_limit,omitempty"`
	KeyOrdered  bool   `json:"key_ordered,omitempty"`
	KeyPolicy   string `json:"key_on_failure,omitempty"`
}

func (a *app) newQueueListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues with their job counts, paused flag and limits",
		Long: `List every queue that holds jobs or has settings: its pending, scheduled,
reserved and failed jobs, whether it is paused, and its limits
(CONCURRENCY: most jobs running at once over all workers; RATE: most starts
per period; KEYS: its rules for keyed jobs, see 'jobq queue keys'; '-' for
none).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				qs, err := jobq.NewInspector(b).Queues(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]queueInfoJSON, len(qs))
					for i, q := range qs {
						out[i] = queueInfoJSON{queueJSON: toQueueJSON(q.QueueStats), Paused: q.Paused, Concurrency: q.Limits.Concurrency, Rate: q.Limits.Rate,
							KeyLimit: q.Keys.Limit, KeyOrdered: q.Keys.Ordered, KeyPolicy: string(q.Keys.Policy())}
						if q.Limits.Rate > 0 {
							out[i].RatePeriod = periodText(q.Limits.RatePeriod)
						}
					}
					return writeJSON(a.out, out)
				}
				tw := newTable(a.out)
				fmt.Fprintln(tw, "QUEUE\tPENDING\tSCHEDULED\tRESERVED\tFAILED\tPAUSED\tCONCURRENCY\tRATE\tKEYS")
				for _, q := range qs {
					paused, conc := "no", "-"
					if q.Paused {
						paused = "yes"
					}
					if q.Limits.Concurrency > 0 {
						conc = strconv.Itoa(q.Limits.Concurrency)
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", q.Queue, q.Pending, q.Scheduled, q.Reserved, q.Failed,
						paused, conc, rateText(q.Limits), keyRulesText(q.Keys))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) newQueuePauseCmd(pause bool) *cobra.Command {
	use, short, done := "pause", "Pause queues: no worker claims their jobs until resumed", "paused"
	if !pause {
		use, short, done = "resume", "Resume paused queues: workers claim their jobs again at once", "resumed"
	}
	return &cobra.Command{
		Use:   use + " QUEUE...",
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs at least one queue name (see 'jobq queue list')", cmd.CommandPath())
			}
			for _, q := range args {
				if err := backend.ValidateQueue(q); err != nil {
					return usagef("%v", err)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				for _, q := range args {
					var err error
					if pause {
						err = in.PauseQueue(cmd.Context(), q)
					} else {
						err = in.ResumeQueue(cmd.Context(), q)
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(a.out, "queue %s %s\n", q, done)
				}
				return nil
			})
		},
	}
}

func (a *app) newQueueLimitCmd() *cobra.Command {
	var (
		concurrency int
		rate        string
		clearAll    bool
	)
	cmd := &cobra.Command{
		Use:   "limit QUEUE [--concurrency N] [--rate N/PERIOD] [--clear]",
		Short: "Set or clear a queue's concurrency and rate limits",
		Long: `Set or clear a queue's limits, enforced by every claim over all workers:
--concurrency N: at most N of its jobs running at once (0 clears it);
--rate N/PERIOD: at most N starts per PERIOD, e.g. 50/1s, 600/1m, 10/s
(PERIOD 1ms..24h in whole milliseconds; 0 or none clears it). A limit
not named keeps its value; --clear removes both. Windows of a rate are
aligned to the clock (50/1s: 50 starts in each whole second).`,
		Example: `  jobq queue limit emails --concurrency 3 --rate 50/1s
  jobq queue limit emails --rate none
  jobq queue limit emails --clear`,
		Args: exactArgs(1, "one queue name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			if err := backend.ValidateQueue(queue); err != nil {
				return usagef("%v", err)
			}
			setConc, setRate := cmd.Flags().Changed("concurrency"), cmd.Flags().Changed("rate")
			switch {
			case clearAll && (setConc || setRate):
				return usagef("--clear removes both limits; give it alone, or set --concurrency/--rate without it")
			case !clearAll && !setConc && !setRate:
				return usagef("give --concurrency N, --rate N/PERIOD or --clear (see '%s --help')", cmd.CommandPath())
			case concurrency < 0 || concurrency > backend.MaxQueueConcurrency:
				return usagef("--concurrency %d: use 1..%d, or 0 to clear it", concurrency, backend.MaxQueueConcurrency)
			}
			var r int
			var period time.Duration
			if setRate {
				var err error
				if r, period, err = parseRate(rate); err != nil {
					return err
				}
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				var limits jobq.QueueLimits
				if !clearAll {
					current, err := in.QueueSettings(cmd.Context())
					if err != nil {
						return err
					}
					for _, s := range current {
						if s.Queue == queue {
							limits = s.QueueLimits
						}
					}
					if setConc {
						limits.Concurrency = concurrency
					}
					if setRate {
						limits.Rate, limits.RatePeriod = r, period
					}
				}
				if err := in.SetQueueLimits(cmd.Context(), queue, limits); err != nil {
					return err
				}
				conc := "none"
				if limits.Concurrency > 0 {
					conc = strconv.Itoa(limits.Concurrency)
				}
				rt := rateText(limits)
				if rt == "-" {
					rt = "none"
				}
				fmt.Fprintf(a.out, "queue %s: concurrency %s, rate %s\n", queue, conc, rt)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "most jobs of the queue running at once over all workers (0: no limit)")
	cmd.Flags().StringVar(&rate, "rate", "", "most starts per period, N/PERIOD such as 50/1s (0 or none: no limit)")
	cmd.Flags().BoolVar(&clearAll, "clear", false, "remove both limits")
	return cmd
}

// parseRate reads N/PERIOD (50/1s, 10/s, 600/1m); "0" or "none" clears the
// rate (returns 0, 0).
func parseRate(s string) (int, time.Duration, error) {
	if s == "0" || s == "none" {
		return 0, 0, nil
	}
	bad := func(why string) (int, time.Duration, error) {
		return 0, 0, usagef("--rate %q: %s; use N/PERIOD such as 50/1s, 600/1m or 10/s, or none", s, why)
	}
	ns, ps, ok := strings.Cut(s, "/")
	if !ok {
		return bad("no '/'")
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 || n > backend.MaxQueueRate {
		return bad(fmt.Sprintf("N must be 1..%d", backend.MaxQueueRate))
	}
	if ps != "" && (ps[0] < '0' || ps[0] > '9') {
		ps = "1" + ps // "10/s": one second
	}
	period, err := time.ParseDuration(ps)
	if err != nil {
		return bad("PERIOD is not a duration")
	}
	if err := backend.ValidateQueueLimits(backend.QueueLimits{Rate: n, RatePeriod: period}); err != nil {
		return bad("PERIOD must be 1ms..24h in whole milliseconds")
	}
	return n, period, nil
}

// rateText shows a rate as N/PERIOD, "-" for none.
func rateText(l jobq.QueueLimits) string {
	if l.Rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%s", l.Rate, periodText(l.RatePeriod))
}

// periodText writes a period in its largest whole unit (1m, not 1m0s).
func periodText(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		s string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.s)
		}
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
