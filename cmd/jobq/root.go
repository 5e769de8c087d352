package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
	"github.com/jobq/jobq/internal/redact"
)

// defaultDB is the embedded default: a SQLite file in the working directory.
const defaultDB = "sqlite:jobq.db"

// app holds what every subcommand shares: where to write and which backend.
type app struct {
	out, errOut io.Writer // both scrub the --db URL's secrets (see redactWriter)
	db          string
	// maskKeys is --mask-keys of the commands that show jobs (failed,
	// jobs); mask is their Masker, made on first use.
	maskKeys []string
	mask     *redact.Masker
	// storeLog receives the store's warnings at open (Redis without
	// persistence): the log of a long-running command (worker, serve,
	// metrics), set by logger; the short ones stay quiet.
	storeLog *slog.Logger
}

// masker masks what the commands show of jobs: payloads, metadata and
// error texts, as the admin surface does (redact.DefaultKeys unless
// --mask-keys names others).
func (a *app) masker() *redact.Masker {
	if a.mask == nil {
		a.mask = redact.New(a.maskKeys)
	}
	return a.mask
}

// addMaskKeys adds --mask-keys to cmd and its subcommands.
func (a *app) addMaskKeys(cmd *cobra.Command) {
	cmd.PersistentFlags().StringSliceVar(&a.maskKeys, "mask-keys", redact.DefaultKeys,
		"payload and metadata keys whose values are shown as *** (a key is masked when its name contains one; these replace the defaults)")
}

// usageError is a command-line mistake: exit code 2 and a one-line hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// Exit codes; documented in the root command's help.
const (
	exitError = 1
	exitUsage = 2
	// exitSignal plus the signal's number is the code of a second SIGINT
	// or SIGTERM (130 or 143), the shells' convention for death by signal.
	exitSignal = 128
)

func exitCode(err error) int {
	var u usageError
	if ce := (checkExit{}); errors.As(err, &ce) {
		return ce.code
	}
	if errors.As(err, &u) || errors.Is(err, backend.ErrInvalidInput) {
		return exitUsage
	}
	return exitError
}

// newRootCmd builds the command tree; constructors, not init(), so tests can
// build a fresh tree with their own writers.
func newRootCmd(out, errOut io.Writer) *cobra.Command {
	a := &app{}
	a.out, a.errOut = redactWriter{out, &a.db}, redactWriter{errOut, &a.db}
	root := &cobra.Command{
		Use:   "jobq",
		Short: "jobq: a background-job queue (worker, enqueue, failed jobs, stats)",
		Long: `jobq: a background-job queue (worker, enqueue, failed jobs, stats).

--db (or JOBQ_DB) names the store: sqlite:PATH (default sqlite:jobq.db),
postgres://user@host:5432/db?jobq_schema=NAME,
redis://[user:password@]host:6379/0?key_prefix=NAME (rediss:// for TLS),
memory: or sync:. Only migrate, worker, enqueue,
demo and serve --worker create a store that is not there yet; stats and failed refuse a
--db that holds no jobq schema, so a typo is reported instead of created.
memory: and sync: keep nothing beyond one process: they serve 'jobq demo',
'jobq bench' and tests, and commands that exit refuse them. Passwords in
--db are never printed: every message shows them as ***.

Exit codes: 0 success; 1 error; 2 a mistake in the command line or its
input; 130 (SIGINT) or 143 (SIGTERM) when a second signal ends a command
at once instead of waiting for its graceful stop; 3 from 'jobq cancel' when
some jobs were not cancelled. 'jobq check' follows the
monitoring plugins instead: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(a.out)
	root.SetErr(a.errOut)
	def := os.Getenv("JOBQ_DB")
	if def == "" {
		def = defaultDB
	}
	root.PersistentFlags().StringVar(&a.db, "db", def, "backend URL: sqlite:PATH, postgres://…, redis://…, memory:, sync: (env JOBQ_DB)")
	// --help shows the default, which JOBQ_DB may have set to a URL with a
	// password that --db then overrides (so the writers cannot know it).
	root.PersistentFlags().Lookup("db").DefValue = backend.RedactURL(def)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return a.redact(usagef("%v (see '%s --help')", err, c.CommandPath()))
	})
	requireSubcommand(root) // "jobq bogus" is a one-line usage error
	root.AddCommand(
		a.newWorkerCmd(),
		a.newEnqueueCmd(),
		a.newFailedCmd(),
		a.newCancelCmd(),
		a.newJobsCmd(),
		a.newWorkflowsCmd(),
		a.newStatsCmd(),
		a.newQueueCmd(),
		a.newKeysCmd(),
		a.newCronCmd(),
		a.newCheckCmd(),
		a.newMetricsCmd(),
		a.newServeCmd(),
		a.newMigrateCmd(),
		a.newDemoCmd(),
		a.newBenchCmd(),
		a.newBenchWorkerCmd(),
		a.newVerifyCmd(),
	)
	a.redactErrors(root)
	return root
}

// redactWriter scrubs the secrets of the URL *db (its password and
// password-like query parameters) from everything written through it: the
// one place where output, help and log lines are made safe to show.
type redactWriter struct {
	w  io.Writer
	db *string
}

func (r redactWriter) Write(p []byte) (int, error) {
	clean := backend.Redact(string(p), *r.db)
	if clean == string(p) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, clean); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redact returns err with the --db URL's secrets scrubbed from its text.
func (a *app) redact(err error) error { return backend.RedactError(err, a.db) }

// redactErrors makes every command under c return errors through redact,
// the one place (with redactWriter and the flag error function) where the
// CLI's errors are made safe: main prints what Execute returns as is.
func (a *app) redactErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return a.redact(run(cmd, args)) }
	}
	if pre := c.PreRunE; pre != nil {
		c.PreRunE = func(cmd *cobra.Command, args []string) error { return a.redact(pre(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		a.redactErrors(sub)
	}
}

// openMode says whether a command may create the store --db names.
type openMode int

const (
	// existingOnly: commands that read or repair a store (stats, failed)
	// open only one that already holds an up-to-date jobq schema, so a
	// mistyped --db is reported rather than silently created empty.
	existingOnly openMode = iota
	// mayCreate: migrate, worker, enqueue, demo and serve --worker create
	// and migrate the store as needed.
	mayCreate
)

// open opens the backend named by --db. Backends' errors already name the
// store and the step that failed, so nothing is added to them except, for
// a schema this build cannot use, the command that fixes it (see
// schemaHint).
func (a *app) open(ctx context.Context, mode openMode) (backend.Backend, error) {
	log := a.storeLog
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := backend.OpenWith(ctx, a.db, backend.OpenOptions{Existing: mode == existingOnly, Logger: log})
	if err != nil {
		return nil, a.schemaHint(err)
	}
	return b, nil
}

// schemaHint adds to a *backend.SchemaError the command that fixes it:
// the library knows the versions but not how this program is run, so the
// exact command line (with --db redacted, ready to paste) is ours to give.
// Other errors are returned as they are.
func (a *app) schemaHint(err error) error {
	var se *backend.SchemaError
	if !errors.As(err, &se) {
		return err
	}
	db := shellQuote(backend.RedactURL(a.db))
	switch {
	case se.Have > se.Want:
		return fmt.Errorf("%w; this jobq is older than the store: upgrade jobq", err)
	case se.Have > 0:
		return fmt.Errorf("%w; upgrade it with: jobq migrate --db %s", err, db)
	}
	return fmt.Errorf("%w; create it with: jobq migrate --db %s", err, db)
}

// requireDurable refuses, before anything runs, a --db whose jobs live only
// in this process (memory:, sync:) for a command that exits: whatever it
// stored would vanish with it, and a store it reads is always empty.
func (a *app) requireDurable(cmd *cobra.Command, _ []string) error {
	switch s := schemeOf(a.db); s {
	case "memory", "sync":
		return usagef("%s: --db %s: keeps jobs only inside one process, so they would vanish when this command exits; use sqlite:PATH or postgres://… (%s: serves 'jobq demo', 'jobq bench' and tests)", cmd.CommandPath(), s, s)
	}
	return nil
}
