package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

type enqueueFlags struct {
	queue       string
	delay       time.Duration
	runAt       string
	priority    int
	maxAttempts int
	unique      string
}

func (a *app) newEnqueueCmd() *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue TYPE PAYLOAD",
		Short: "Add a job and print its id",
		Long: `Add a job of type TYPE with the JSON text PAYLOAD ('-' reads it from stdin)
and print its id. The built-in "http" type, run by 'jobq worker', sends a
request; 2xx is success, 408, 429, 5xx and network errors are retried
(honouring Retry-After), any other status fails the job for good:

  jobq enqueue http '{"url":"https://example.com/hook","method":"POST",
    "headers":{"Authorization":"Bearer t"},"body":{"event":"signup"},"timeout":"10s"}'

url is required (http or https); method defaults to POST with a body, GET
without; a string body is sent as text, any other JSON value as JSON;
timeout bounds one attempt (default 30s).

With --unique KEY, while a job with that key is pending or reserved nothing
new is added: the existing job's id is printed with a "duplicate" note, and
the exit code is still 0.`,
		Args: exactArgs(2, "TYPE and PAYLOAD"),
		RunE: func(cmd *cobra.Command, args []string) error {
			payload, err := readPayload(cmd, args[1])
			if err != nil {
				return err
			}
			opts, err := f.options(cmd, args[0], payload)
			if err != nil {
				return err
			}
			return a.enqueue(cmd, args[0], payload, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "default", "queue name: letters, digits, '_', '-', '.', ':' (1..128)")
	fl.DurationVar(&f.delay, "delay", 0, "make the job available after this long, e.g. 90s or 2h")
	fl.StringVar(&f.runAt, "run-at", "", "make the job available at this RFC 3339 time, e.g. 2030-01-02T15:04:05Z")
	fl.IntVar(&f.priority, "priority", 0, "higher runs first (-1000..1000)")
	fl.IntVar(&f.maxAttempts, "max-attempts", jobq.DefaultMaxAttempts, "tries before the job moves to failed jobs (1..1000)")
	fl.StringVar(&f.unique, "unique", "", "unique key: no second job with it while the first is pending or reserved")
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
	if len(payload) > jobq.DefaultMaxPayloadBytes {
		return nil, usagef("payload is over the %d-byte (1 MiB) limit: store large data elsewhere and pass a reference", jobq.DefaultMaxPayloadBytes)
	}
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return nil, usagef("payload is not valid JSON (%v): quote it for the shell, e.g. '{\"url\":\"https://example.com\"}'", err)
	}
	return payload, nil
}

// options checks the flags (and the job as a whole, with the same rules
// the backend applies) so bad input never opens or creates a database.
func (f *enqueueFlags) options(cmd *cobra.Command, typ string, payload []byte) ([]jobq.EnqueueOption, error) {
	p := backend.InsertParams{
		Queue: f.queue, Type: typ, Payload: payload, Priority: f.priority,
		MaxAttempts: f.maxAttempts, Delay: f.delay, UniqueKey: f.unique,
	}
	opts := []jobq.EnqueueOption{
		jobq.Queue(f.queue), jobq.Priority(f.priority), jobq.MaxAttempts(f.maxAttempts),
	}
	if f.runAt != "" {
		if cmd.Flags().Changed("delay") {
			return nil, usagef("use --delay or --run-at, not both")
		}
		t, err := time.Parse(time.RFC3339, f.runAt)
		if err != nil {
			return nil, usagef("--run-at %q is not an RFC 3339 time: use e.g. 2030-01-02T15:04:05Z or 2030-01-02T15:04:05+02:00", f.runAt)
		}
		p.RunAt = t
		opts = append(opts, jobq.RunAt(t))
	}
	if f.delay < 0 {
		return nil, usagef("--delay %s is negative: use a positive duration such as 30s", f.delay)
	}
	if f.delay > 0 {
		opts = append(opts, jobq.Delay(f.delay))
	}
	if f.unique != "" {
		opts = append(opts, jobq.UniqueKey(f.unique))
	}
	if err := backend.ValidateInsert(p); err != nil {
		return nil, err
	}
	if typ == httpJobType {
		// The worker would fail it permanently on its first attempt.
		if _, _, err := buildRequest(payload); err != nil {
			return nil, usagef("http job payload: %v (see 'jobq enqueue --help')", err)
		}
	}
	return opts, nil
}

func (a *app) enqueue(cmd *cobra.Command, typ string, payload []byte, opts []jobq.EnqueueOption) error {
	ctx := cmd.Context()
	return a.withBackend(ctx, func(b backend.Backend) error {
		// The registry matters only for the sync: backend, which runs the
		// job inside Enqueue.
		reg := jobq.NewRegistry()
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		registerHTTP(reg, &http.Client{Transport: tr})
		client, err := jobq.NewClient(b, jobq.ClientConfig{Registry: reg})
		if err != nil {
			return err
		}
		id, err := client.Enqueue(ctx, typ, json.RawMessage(payload), opts...)
		if errors.Is(err, jobq.ErrDuplicate) {
			fmt.Fprintln(a.out, id)
			fmt.Fprintf(a.errOut, "duplicate of job %d: a job with unique key %q is still pending or reserved, so nothing new was enqueued\n", id, cmd.Flag("unique").Value)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(a.out, id)
		return nil
	})
}
