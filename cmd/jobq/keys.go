package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// newQueueKeysCmd is 'jobq queue keys': a queue's key rules.
func (a *app) newQueueKeysCmd() *cobra.Command {
	var (
		limit     int
		ordered   bool
		onFailure string
		clearAll  bool
	)
	cmd := &cobra.Command{
		Use:   "keys QUEUE [--limit N] [--ordered [--on-failure hold|continue|halt]] [--clear]",
		Short: "Set or clear a queue's rules for keyed jobs",
		Long: `Set a queue's rules for its keyed jobs (enqueued with --key), enforced by
every claim over all workers. Jobs of one key always take turns with the
other keys' jobs; the rules add:
--limit N: at most N jobs of one key running at once (0: no limit);
--ordered: each key's jobs run one at a time, in enqueue order; a head
that is scheduled or backing off keeps its key waiting;
--on-failure POLICY (with --ordered): what a head that fails for good or
is cancelled does to its key: hold (default: the key waits, see 'jobq
keys list --held', until the failed head is retried or purged; a
cancelled head is a discard and the key goes on), continue (the next job
runs), halt (the key's pending jobs are cancelled, naming the head).
The rules given replace the queue's rules; --clear removes them.`,
		Example: `  jobq queue keys charges --ordered --on-failure hold
  jobq queue keys crawls --limit 2
  jobq queue keys crawls --clear`,
		Args: exactArgs(1, "one queue name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			if err := backend.ValidateQueue(queue); err != nil {
				return usagef("%v", err)
			}
			set := cmd.Flags().Changed("limit") || ordered || onFailure != ""
			switch {
			case clearAll && set:
				return usagef("--clear removes the key rules; give it alone, or set --limit/--ordered without it")
			case !clearAll && !set:
				return usagef("give --limit N, --ordered or --clear (see '%s --help')", cmd.CommandPath())
			}
			rules := jobq.KeyRules{Limit: limit, Ordered: ordered}
			if onFailure != "" {
				p, err := backend.ParseKeyPolicy(onFailure)
				if err != nil {
					return usagef("--on-failure: %v", err)
				}
				rules.OnFailure = p
			}
			if err := backend.ValidateKeyRules(rules); err != nil {
				return usagef("%v", err)
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				if err := jobq.NewInspector(b).SetQueueKeys(cmd.Context(), queue, rules); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "queue %s: keys %s\n", queue, keyRulesText(rules))
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "most jobs of one key running at once over all workers (0: no limit)")
	cmd.Flags().BoolVar(&ordered, "ordered", false, "run each key's jobs one at a time, in enqueue order")
	cmd.Flags().StringVar(&onFailure, "on-failure", "", "with --ordered: hold, continue or halt (default hold)")
	cmd.Flags().BoolVar(&clearAll, "clear", false, "remove the queue's key rules")
	return cmd
}

// keyRulesText shows rules in a word or three: "-" for none.
func keyRulesText(r jobq.KeyRules) string {
	switch {
	case r.Ordered:
		return "ordered, on failure " + string(r.Policy())
	case r.Limit > 0:
		return "limit " + strconv.Itoa(r.Limit) + " per key"
	}
	return "-"
}

func (a *app) newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List keys and show one key's jobs in order",
		Long: `Keys are what keyed jobs act on (an account, a tenant): see 'jobq enqueue
--key' and 'jobq queue keys'. These commands only read: a --db without a
jobq schema is an error (exit 1).`,
	}
	requireSubcommand(cmd)
	cmd.AddCommand(a.newKeysListCmd(), a.newKeysShowCmd())
	for _, sub := range cmd.Commands() {
		sub.PreRunE = a.requireDurable
	}
	return cmd
}

// keyJSON is one key of 'jobq keys list --json'.
type keyJSON struct {
	Queue    string `json:"queue"`
	Key      string `json:"key"`
	Pending  int64  `json:"pending"`
	Reserved int64  `json:"reserved"`
	Failed   int64  `json:"failed"`
	Held     bool   `json:"held"`
	HeadID   int64  `json:"head_id,omitempty"`
	// HeldSince is when the head that holds the key failed (RFC 3339).
	HeldSince string `json:"held_since,omitempty"`
}

func (a *app) newKeysListCmd() *cobra.Command {
	var (
		queue  string
		held   bool
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--queue Q] [--held]",
		Short: "List keys with jobs, busiest first",
		Long: `List the keys that have pending, running or failed jobs, busiest first
(pending plus running). HELD says an ordered key waits for its failed head
(HEAD): retry it ('jobq failed retry HEAD') to run it again first, or
purge it ('jobq failed purge HEAD') to let the key go on.`,
		Args: exactArgs(0, "no arguments (filter with --queue, --held)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return usagef("--limit %d: use 1 to 10000", limit)
			}
			if queue != "" {
				if err := backend.ValidateQueue(queue); err != nil {
					return usagef("--queue: %v", err)
				}
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				keys, err := jobq.NewInspector(b).Keys(cmd.Context(), jobq.KeyListParams{Queue: queue, Held: held, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]keyJSON, len(keys))
					for i, k := range keys {
						out[i] = keyJSON{Queue: k.Queue, Key: k.Key, Pending: k.Pending, Reserved: k.Reserved, Failed: k.Failed, Held: k.Held, HeadID: k.HeadID}
						if k.Held {
							out[i].HeldSince = k.HeldSince.UTC().Format(time.RFC3339Nano)
						}
					}
					return writeJSON(a.out, out)
				}
				if len(keys) == 0 {
					fmt.Fprintln(a.out, "no keys")
					return nil
				}
				tw := newTable(a.out)
				fmt.Fprintln(tw, "QUEUE\tKEY\tPENDING\tRUNNING\tFAILED\tHELD\tHEAD")
				for _, k := range keys {
					h, head := "no", "-"
					if k.Held {
						h, head = "since "+timeText(k.HeldSince), strconv.FormatInt(k.HeadID, 10)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", k.Queue, k.Key, k.Pending, k.Reserved, k.Failed, h, head)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only keys of this queue")
	cmd.Flags().BoolVar(&held, "held", false, "only keys held by a failed head")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// keyJobJSON is one job of 'jobq keys show --json'.
type keyJobJSON struct {
	ID      int64  `json:"id"`
	State   string `json:"state"`
	Type    string `json:"type"`
	Attempt int    `json:"attempts"`
	Turn    int64  `json:"turn,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (a *app) newKeysShowCmd() *cobra.Command {
	var (
		queue  string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show KEY --queue Q",
		Short: "Show one key's live and failed jobs in order",
		Long: `Show the jobs of one key of one queue, oldest first (the order an ordered
key runs them in): pending, scheduled, running and failed ones, at most
1000 of each state, and whether a failed head holds the key.`,
		Args: exactArgs(1, "one key"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := args[0]
			if err := backend.ValidateKey(key); err != nil || key == "" {
				return usagef("KEY %q: give a key as enqueued with --key (see 'jobq keys list')", key)
			}
			if err := backend.ValidateQueue(queue); err != nil {
				return usagef("--queue: %v (a key belongs to one queue; see 'jobq keys list')", err)
			}
			return a.withBackend(cmd.Context(), existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				var jobs []keyJobJSON
				f := jobq.JobFilter{Queue: queue, Key: key}
				for _, st := range []jobq.JobState{jobq.StatePending, jobq.StateScheduled, jobq.StateReserved} {
					rows, err := in.JobsPage(cmd.Context(), st, f, 1000, 0)
					if err != nil {
						return err
					}
					for _, r := range rows {
						jobs = append(jobs, keyJobJSON{ID: r.ID, State: string(st), Type: r.Type, Attempt: r.Attempts, Turn: r.Turn, Error: a.masker().Text(r.LastError)})
					}
				}
				failed, err := in.FailedPage(cmd.Context(), jobq.FailedFilter{Queue: queue, Key: key}, 1000, 0)
				if err != nil {
					return err
				}
				for _, r := range failed {
					jobs = append(jobs, keyJobJSON{ID: r.JobID, State: string(jobq.StateFailed), Type: r.Type, Attempt: r.Attempts, Turn: r.Turn, Error: a.masker().Text(r.Error)})
				}
				slices.SortFunc(jobs, func(x, y keyJobJSON) int { return cmp.Compare(x.ID, y.ID) })
				if asJSON {
					return writeJSON(a.out, jobs)
				}
				return a.printKeyJobs(in, cmd, queue, key, jobs)
			})
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "the key's queue (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printKeyJobs(in *jobq.Inspector, cmd *cobra.Command, queue, key string, jobs []keyJobJSON) error {
	if len(jobs) == 0 {
		fmt.Fprintf(a.out, "key %q of queue %s has no jobs\n", key, queue)
		return nil
	}
	keys, err := in.Keys(cmd.Context(), jobq.KeyListParams{Queue: queue, Held: true, Limit: 10000})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.Key == key {
			fmt.Fprintf(a.out, "key %q of queue %s is held by failed job %d: 'jobq failed retry %d' runs it again first, 'jobq failed purge %d' lets the key go on\n", key, queue, k.HeadID, k.HeadID, k.HeadID)
		}
	}
	tw := newTable(a.out)
	fmt.Fprintln(tw, "ID\tSTATE\tTYPE\tATTEMPTS\tERROR")
	for _, j := range jobs {
		e := j.Error
		if e == "" {
			e = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", j.ID, j.State, j.Type, j.Attempt, firstLine(e, 80))
	}
	return tw.Flush()
}
