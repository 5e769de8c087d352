package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/backend"
)

// withBackend opens the --db backend (see openMode), runs fn and closes it,
// so no command forgets to release the file or connection.
func (a *app) withBackend(ctx context.Context, mode openMode, fn func(b backend.Backend) error) error {
	b, err := a.open(ctx, mode)
	if err != nil {
		return err
	}
	err = fn(b)
	if cerr := b.Close(); err == nil && cerr != nil {
		return fmt.Errorf("close %s: %w", a.db, cerr)
	}
	return err
}

// requireSubcommand makes a command that only groups others report an
// unknown or missing subcommand as a one-line usage error; cobra would
// otherwise print the help (exit 0) or a multi-line suggestion. The root
// command with no arguments still prints its help.
func requireSubcommand(c *cobra.Command) {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		names := make([]string, 0, len(cmd.Commands()))
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		list := strings.Join(names, ", ")
		if len(args) == 0 {
			if !cmd.HasParent() {
				return cmd.Help()
			}
			return usagef("%s needs a subcommand: %s (see '%s --help')", cmd.CommandPath(), list, cmd.CommandPath())
		}
		return usagef("unknown command %q for %s; use one of %s (see '%s --help')", args[0], cmd.CommandPath(), list, cmd.CommandPath())
	}
}

// exactArgs is cobra.ExactArgs with a usage error naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s, got %d argument(s) (see '%s --help')", cmd.CommandPath(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// The usage hints of a bad ID argument, by what the ID names.
const (
	failedIDHint = "is not a failed job's ID: use the job's ID, the ID column of 'jobq failed list'"
	jobIDHint    = "is not a job ID: use the number 'jobq enqueue' printed, or the ID column of 'jobq jobs list'"
)

// parseIDs turns arguments into IDs; a bad one is a usage error with hint.
func parseIDs(args []string, hint string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return nil, usagef("%q %s", s, hint)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// positive refuses a flag value that must be above zero, when it was set.
func positive[T int | time.Duration](cmd *cobra.Command, name string, v T) error {
	if cmd.Flags().Changed(name) && v <= 0 {
		return usagef("--%s %v must be greater than zero", name, v)
	}
	return nil
}

// newTable returns a tab-aligned writer for columns of text.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v as compact JSON on one line (for --watch streams).
func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// printAttemptErrors prints a job's failed attempts, one line each, oldest
// first: attempt, when it ended, how long it ran, where, and the first line
// of its error, masked like every error shown.
func (a *app) printAttemptErrors(errs []backend.AttemptError) {
	if len(errs) == 0 {
		return
	}
	fmt.Fprintf(a.out, "Failed attempts (oldest first, the last %d kept):\n", backend.MaxAttemptErrors)
	tw := newTable(a.out)
	fmt.Fprintln(tw, "ATTEMPT\tAT\tDURATION\tWORKER\tERROR")
	for _, e := range errs {
		took, worker := "-", e.Worker
		if e.Duration > 0 {
			took = e.Duration.Round(time.Millisecond).String()
			if e.Duration < time.Millisecond {
				took = e.Duration.String()
			}
		}
		if worker == "" {
			worker = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Attempt, timeText(e.At), took, worker, firstLine(a.masker().Text(e.Error), 100))
	}
	tw.Flush()
}

// firstLine returns s up to its first newline, cut to max runes, for table
// cells (a panic's error carries its whole stack).
func firstLine(s string, max int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	if cut {
		return s + " …"
	}
	return s
}

// timeText formats a time for tables and detail views, in local time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// isTerminal reports whether w is a character device (a terminal), where
// --watch may clear the screen instead of printing frame after frame.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
