package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
)

// defaultDB is the embedded default: a SQLite file in the working directory.
const defaultDB = "sqlite:jobq.db"

// app holds what every subcommand shares: where to write and which backend.
type app struct {
	out, errOut io.Writer
	db          string
}

// usageError is a command-line mistake: exit code 2 and a one-line hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, backend.ErrInvalidInput) {
		return 2
	}
	return 1
}

// newRootCmd builds the command tree; constructors, not init(), so tests can
// build a fresh tree with their own writers.
func newRootCmd(out, errOut io.Writer) *cobra.Command {
	a := &app{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "jobq",
		Short:         "jobq: a background-job queue (worker, enqueue, failed jobs, stats)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(out)
	root.SetErr(errOut)
	def := os.Getenv("JOBQ_DB")
	if def == "" {
		def = defaultDB
	}
	root.PersistentFlags().StringVar(&a.db, "db", def, "backend URL: sqlite:PATH, postgres://…, memory: (env JOBQ_DB)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	requireSubcommand(root) // "jobq bogus" is a one-line usage error
	root.AddCommand(
		a.newWorkerCmd(),
		a.newEnqueueCmd(),
		a.newFailedCmd(),
		a.newStatsCmd(),
		a.newMigrateCmd(),
		a.newDemoCmd(),
		a.newBenchCmd(),
	)
	return root
}

// open opens the backend named by --db.
func (a *app) open(ctx context.Context) (backend.Backend, error) {
	b, err := backend.Open(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", a.db, err)
	}
	return b, nil
}
