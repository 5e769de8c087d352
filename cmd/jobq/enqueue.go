package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

type enqueueFlags struct {
	queue        string
	delay        time.Duration
	runAt        string
	priority     int
	maxAttempts  int
	unique       string
	uniqueBy     []string
	uniquePer    time.Duration
	uniqueStates []string
	onConflict   string
	debounce     time.Duration
	debounceMax  time.Duration
	keepLast     bool
	deadline     string
	key          string
	metadata     map[string]string
	file         string
}

func (a *app) newEnqueueCmd() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue TYPE PAYLOAD | --file FILE",
		Short: "Add a job and print its id, or many from a JSON Lines file",
		Long: `Add a job of type TYPE with the JSON text PAYLOAD ('-' reads it from stdin)
and print its id. The built-in "http" type, run by 'jobq worker', sends a
request; 2xx is success, 408, 429, 5xx (but 501) and network errors are
retried (honouring Retry-After), any other status fails the job for good:

  jobq enqueue http '{"url":"https://example.com/hook","method":"POST",
    "headers":{"Authorization":"Bearer t"},"body":{"event":"signup"},"timeout":"10s"}'

url is required (http or https); method is one of GET, HEAD, POST, PUT,
PATCH, DELETE, OPTIONS and TRACE (any case; default POST with a body, GET
without); another method, such as PROPFIND, is sent only with
"extension_method": true, so a typo like "POTS" is refused here. A string
body is sent as text, any other JSON value as JSON; timeout bounds one
attempt (default 30s).

With --unique KEY, while a job with that key is pending or reserved nothing
new is added: the existing job's id is printed with a "duplicate" note, and
the exit code is still 0. With --unique-by PARTS (type, args, queue) and
--unique-period D the key is computed from the job instead: its type, its
payload's canonical JSON (args), its queue, and the D-long time bucket of
its due time, so the same job enqueued twice within one bucket is one job.
Given with --unique, the key is one more part. --on-conflict says what a
duplicate does: skip (the default); replace gives the waiting job holding
the key this payload and due time; debounce (with --debounce D and
--debounce-max M) adds the job due D from now and, on each duplicate, gives
the waiting job this payload and pushes it to D from then, never past M
after it was created. A running job is left alone. --unique-states (with
--unique-by) names the states in which a job keeps new ones out:
pending,scheduled lets a new job in while one runs, but not while one
waits (default: every state). --keep-last (with --on-conflict replace)
makes a duplicate of a running job its follow-up, a new job that later
duplicates replace while it waits.

With --key KEY the job belongs to that key (an account, a tenant): jobs of
one key take turns with other keys' jobs, and the queue's key rules ('jobq
queue keys') limit how many run at once or run them one at a time in
enqueue order.

With --file FILE ('-' for stdin), each line is one job, a JSON object:

  {"type":"http","payload":{"url":"https://example.com/hook"},"queue":"hooks",
   "priority":5,"max_attempts":10,"delay":"90s","run_at":"2030-01-02T15:04:05Z",
   "unique_key":"order-7","unique":{"args":true,"period":"1h","states":["pending"]},"key":"acct-42",
   "metadata":{"tenant":"acme"}}

Only "type" is required ("payload" defaults to {}); delay and run_at
exclude each other; other fields are refused. --queue, --priority,
--max-attempts, --delay, --run-at, --unique-by, --unique-period,
--on-conflict (with its durations), --key and --metadata are defaults for lines
that omit the field (a line's delay or run_at replaces both defaults; its
metadata adds to --metadata). Blank lines are skipped. Jobs are stored in
batches of 1000 lines, each batch checked whole before it is stored and
stored all or nothing. For each job one line is printed: its id, or its
id and a tab and "duplicate" when a live job already held its unique key
(nothing added). A summary goes to stderr. A bad line stops the command
(exit 2) naming the line, how many jobs earlier batches stored and the
line to resume from; nothing of its batch is stored.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.file != "" {
				if len(args) > 0 {
					return usagef("%s: give TYPE and PAYLOAD or --file, not both (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())
				}
				return nil
			}
			return exactArgs(2, "TYPE and PAYLOAD (or --file FILE)")(cmd, args)
		},
		PreRunE: a.requireDurable,
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := f.defaults(cmd)
			if err != nil {
				return err
			}
			if f.file != "" {
				return a.enqueueFile(cmd, f.file, def)
			}
			payload, err := readPayload(cmd, args[1])
			if err != nil {
				return err
			}
			def.typ, def.payload = args[0], payload
			spec, err := def.spec()
			if err != nil {
				return err
			}
			return a.enqueue(cmd, spec)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "default", "queue name: letters, digits, '_', '-', '.', ':' (1..128)")
	fl.DurationVar(&f.delay, "delay", 0, "make the job available after this long, e.g. 90s or 2h")
	fl.StringVar(&f.runAt, "run-at", "", "make the job available at this RFC 3339 time, e.g. 2030-01-02T15:04:05Z")
	fl.IntVar(&f.priority, "priority", 0, "higher runs first (-1000..1000)")
	fl.IntVar(&f.maxAttempts, "max-attempts", jobq.DefaultMaxAttempts, "tries before the job moves to failed jobs (1..1000)")
	fl.StringVar(&f.unique, "unique", "", "unique key: no second job with it while the first is pending or reserved")
	fl.StringSliceVar(&f.uniqueBy, "unique-by", nil, "compute the unique key from these parts of the job: type, args, queue (comma-separated)")
	fl.DurationVar(&f.uniquePer, "unique-period", 0, "with --unique-by: also the due time's bucket of this length, e.g. 1h (at least 1s)")
	fl.StringSliceVar(&f.uniqueStates, "unique-states", nil, "with --unique-by: the states in which a job keeps new ones out: pending, scheduled, running, retrying, completed (kept by retention) (default every live state)")
	fl.StringVar(&f.deadline, "deadline", "", "the latest time the job may start, an RFC 3339 time or a duration from now (e.g. 10m); not started by then, it is never run")
	fl.StringVar(&f.onConflict, "on-conflict", "skip", "what a duplicate does: skip, replace or debounce")
	fl.DurationVar(&f.debounce, "debounce", 0, "with --on-conflict debounce: run the job this long after the last duplicate, e.g. 30s")
	fl.BoolVar(&f.keepLast, "keep-last", false, "with --on-conflict replace: a duplicate of a running job becomes its follow-up, replaced while it waits")
	fl.DurationVar(&f.debounceMax, "debounce-max", 0, "with --on-conflict debounce: but no later than this long after the first, e.g. 5m")
	fl.StringVar(&f.key, "key", "", "the job's key (an account, a tenant): the queue's key rules apply (see 'jobq queue keys')")
	fl.StringToStringVar(&f.metadata, "metadata", nil, "metadata the handler can read, e.g. tenant=acme,trace=abc (repeatable)")
	fl.StringVar(&f.file, "file", "", "enqueue the jobs of this JSON Lines `FILE`, one per line ('-' reads stdin)")
	return cmd
}

// readPayload returns the PAYLOAD argument, or stdin for "-", refusing text
// that is not JSON or is over the size limit before anything is opened.
func readPayload(cmd *cobra.Command, arg string) ([]byte, error) {
	payload := []byte(arg)
	if arg == "-" {
		var err error
		payload, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), jobq.DefaultMaxPayloadBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read payload from stdin: %w", err)
		}
	}
	if err := checkPayloadSize(len(payload)); err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return nil, usagef("payload is not valid JSON (%v): quote it for the shell, e.g. '{\"url\":\"https://example.com\"}'", err)
	}
	return payload, nil
}

// checkPayloadSize refuses a payload over the client's limit in the command
// line's words (the client's own error names its Go configuration).
func checkPayloadSize(n int) error {
	if n > jobq.DefaultMaxPayloadBytes {
		return usagef("payload is over the %d-byte (1 MiB) limit: store large data elsewhere and pass a reference", jobq.DefaultMaxPayloadBytes)
	}
	return nil
}

// jobInput is one job as the command line describes it: TYPE, PAYLOAD and
// the flags, or one line of --file over the flags as defaults.
type jobInput struct {
	typ         string
	payload     []byte
	queue       string
	priority    int
	maxAttempts int
	delay       time.Duration
	runAt       time.Time
	unique      string
	uniqueBy    *jobq.UniqueBy     // computed identity (Unique); nil: unique alone
	conflict    jobq.EnqueueOption // Replace or Debounce; nil: skip
	deadline    time.Time          // zero: none
	key         string
	metadata    map[string]string
}

// defaults checks the flags and returns them as the job they describe, so
// bad input never opens or creates a database.
func (f *enqueueFlags) defaults(cmd *cobra.Command) (jobInput, error) {
	in := jobInput{
		queue: f.queue, priority: f.priority, maxAttempts: f.maxAttempts,
		delay: f.delay, unique: f.unique, key: f.key, metadata: f.metadata,
	}
	if f.file != "" && f.unique != "" {
		return in, usagef("--unique names one job: give each line of --file its own \"unique_key\"")
	}
	by, err := uniqueByFlags(cmd, f.uniqueBy, f.uniquePer, f.uniqueStates)
	if err != nil {
		return in, err
	}
	in.uniqueBy = by
	if in.conflict, err = conflictOption(cmd, f.onConflict, f.debounce, f.debounceMax, f.keepLast); err != nil {
		return in, err
	}
	if f.runAt != "" {
		if cmd.Flags().Changed("delay") {
			return in, usagef("use --delay or --run-at, not both")
		}
		t, err := time.Parse(time.RFC3339, f.runAt)
		if err != nil {
			return in, usagef("--run-at %q is not an RFC 3339 time: use e.g. 2030-01-02T15:04:05Z or 2030-01-02T15:04:05+02:00", f.runAt)
		}
		in.runAt = t
	}
	if f.delay < 0 {
		return in, usagef("--delay %s is negative: use a positive duration such as 30s", f.delay)
	}
	if f.deadline != "" {
		if in.deadline, err = parseDeadline(f.deadline, time.Now()); err != nil {
			return in, err
		}
	}
	return in, nil
}

// parseDeadline reads --deadline: an RFC 3339 time, or a positive
// duration from now (this machine's clock; the store then checks the
// time against its own).
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, usagef("--deadline %q is neither an RFC 3339 time nor a positive duration: use e.g. 2030-01-02T15:04:05Z or 10m", s)
	}
	return now.Add(d), nil
}

// spec checks the job with the rules the backend applies (and, for an http
// job, those its worker would apply on the first attempt) and returns it
// for the client.
func (in jobInput) spec() (jobq.JobSpec, error) {
	if err := checkPayloadSize(len(in.payload)); err != nil {
		return jobq.JobSpec{}, err
	}
	p := backend.InsertParams{
		Queue: in.queue, Type: in.typ, Payload: in.payload, Priority: in.priority,
		MaxAttempts: in.maxAttempts, Delay: in.delay, RunAt: in.runAt, UniqueKey: in.unique,
		Metadata: in.metadata, Key: in.key, Deadline: in.deadline,
	}
	if err := backend.ValidateInsert(p); err != nil {
		return jobq.JobSpec{}, err
	}
	if in.typ == httpJobType {
		// The worker would fail it permanently on its first attempt.
		if _, _, err := buildRequest(in.payload); err != nil {
			return jobq.JobSpec{}, usagef("http job payload: %v (see 'jobq enqueue --help')", err)
		}
	}
	opts := []jobq.EnqueueOption{
		jobq.Queue(in.queue), jobq.Priority(in.priority), jobq.MaxAttempts(in.maxAttempts),
	}
	if !in.runAt.IsZero() {
		opts = append(opts, jobq.RunAt(in.runAt))
	}
	if in.delay > 0 {
		opts = append(opts, jobq.Delay(in.delay))
	}
	if in.unique != "" {
		opts = append(opts, jobq.UniqueKey(in.unique))
	}
	if in.uniqueBy != nil {
		opts = append(opts, jobq.Unique(*in.uniqueBy))
	}
	if in.conflict != nil {
		opts = append(opts, in.conflict)
	}
	if !in.deadline.IsZero() {
		opts = append(opts, jobq.Deadline(in.deadline))
	}
	if in.key != "" {
		opts = append(opts, jobq.Key(in.key))
	}
	if len(in.metadata) > 0 {
		opts = append(opts, jobq.Metadata(in.metadata))
	}
	return jobq.JobSpec{Type: in.typ, Payload: json.RawMessage(in.payload), Options: opts}, nil
}

// newClient returns a client over b. The registry would matter only for
// the sync: backend, which runs the job inside Enqueue and which enqueue
// refuses today; should that change, its http jobs already go through the
// same address guard as a worker's, with the default policy. The transport
// is closed when the command ends.
func newClient(b backend.Backend) (*jobq.Client, func(), error) {
	reg := jobq.NewRegistry()
	policy, err := (&httpFlags{}).policy()
	if err != nil {
		return nil, func() {}, err
	}
	httpClient, closeIdle := newHTTPClient(policy)
	registerHTTP(reg, httpClient)
	client, err := jobq.NewClient(b, jobq.ClientConfig{Registry: reg})
	return client, closeIdle, err
}

func (a *app) enqueue(cmd *cobra.Command, spec jobq.JobSpec) error {
	ctx := cmd.Context()
	return a.withBackend(ctx, mayCreate, func(b backend.Backend) error {
		client, done, err := newClient(b)
		defer done()
		if err != nil {
			return err
		}
		res, err := client.EnqueueMany(ctx, []jobq.JobSpec{spec})
		if err != nil {
			return err
		}
		fmt.Fprintln(a.out, res[0].ID)
		switch {
		case res[0].Replaced:
			fmt.Fprintf(a.errOut, "duplicate of job %d, which was waiting and took this payload and due time (--on-conflict); nothing new was enqueued\n", res[0].ID)
		case res[0].Duplicate:
			fmt.Fprintf(a.errOut, "duplicate of job %d: a job with the same unique key is still pending, scheduled or running, so nothing new was enqueued\n", res[0].ID)
		}
		return nil
	})
}

// uniqueByFlags turns --unique-by, --unique-period and --unique-states
// into the parts of a computed unique key: nil when none was given.
func uniqueByFlags(cmd *cobra.Command, parts []string, period time.Duration, states []string) (*jobq.UniqueBy, error) {
	if !cmd.Flags().Changed("unique-by") && !cmd.Flags().Changed("unique-period") && !cmd.Flags().Changed("unique-states") {
		return nil, nil
	}
	var by jobq.UniqueBy
	for _, p := range parts {
		switch p {
		case "type": // always a part
		case "args":
			by.Args = true
		case "queue":
			by.Queue = true
		default:
			return nil, usagef("--unique-by %q: use type, args or queue, comma-separated, e.g. --unique-by args,queue", p)
		}
	}
	if period != 0 && period < time.Second {
		return nil, usagef("--unique-period %s: use a duration of at least 1s, e.g. 1h", period)
	}
	by.Period = period
	var err error
	if by.States, err = backend.ParseUniqueStates(strings.Join(states, ",")); err != nil {
		return nil, usagef("--unique-states: %v; e.g. --unique-states pending,scheduled", err)
	}
	return &by, nil
}

// conflictOption turns --on-conflict and the debounce durations into the
// enqueue option they name: nil for skip. The client checks the rest (a
// unique key to conflict on).
func conflictOption(cmd *cobra.Command, mode string, d, maxWait time.Duration, keepLast bool) (jobq.EnqueueOption, error) {
	fl := cmd.Flags()
	if mode != "debounce" && (fl.Changed("debounce") || fl.Changed("debounce-max")) {
		return nil, usagef("--debounce and --debounce-max are for --on-conflict debounce")
	}
	if keepLast && mode != "replace" {
		return nil, usagef("--keep-last is for --on-conflict replace")
	}
	switch mode {
	case "skip":
		return nil, nil
	case "replace":
		if keepLast {
			return jobq.Replace(jobq.KeepLast()), nil
		}
		return jobq.Replace(), nil
	case "debounce":
		if d <= 0 || maxWait < d {
			return nil, usagef("--on-conflict debounce needs --debounce D > 0 and --debounce-max at least D, e.g. --debounce 30s --debounce-max 5m")
		}
		return jobq.Debounce(d, maxWait), nil
	}
	return nil, usagef("--on-conflict %q: use skip, replace or debounce", mode)
}
