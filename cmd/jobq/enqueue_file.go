package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// fileBatch is how many jobs of --file one EnqueueMany call stores: one
// transaction, all or nothing.
const fileBatch = 1000

// maxFileLine bounds one line of --file: a payload at its limit plus room
// for the other fields.
const maxFileLine = jobq.DefaultMaxPayloadBytes + 64<<10

// fileJob is one line of --file. Pointers tell a field left out (the flag's
// default applies) from one set to its zero value.
type fileJob struct {
	Type        string            `json:"type"`
	Payload     json.RawMessage   `json:"payload"`
	Queue       *string           `json:"queue"`
	Priority    *int              `json:"priority"`
	MaxAttempts *int              `json:"max_attempts"`
	Delay       *string           `json:"delay"`
	RunAt       *string           `json:"run_at"`
	UniqueKey   string            `json:"unique_key"`
	Unique      *jobq.UniqueBy    `json:"unique"`
	Key         *string           `json:"key"`
	Metadata    map[string]string `json:"metadata"`
}

const fileFields = "type, payload, queue, priority, max_attempts, delay, run_at, unique_key, unique, key, metadata"

// jobLines reads --file and turns each non-blank line into a checked
// JobSpec, with the flags as defaults.
type jobLines struct {
	sc   *bufio.Scanner
	def  jobInput
	line int // the number of the last line read
}

func newJobLines(r io.Reader, def jobInput) *jobLines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxFileLine)
	return &jobLines{sc: sc, def: def}
}

// lineError is a bad line of --file, or a failure to read it.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// next returns the next at most n jobs with the numbers of the lines of the
// first and the last; no jobs at the end of the input. A bad line returns
// a *lineError and no jobs, so a batch is only ever stored whole.
func (r *jobLines) next(n int) (specs []jobq.JobSpec, first, last int, err error) {
	for len(specs) < n && r.sc.Scan() {
		r.line++
		text := r.sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		spec, err := r.parse(text)
		if err != nil {
			return nil, 0, 0, &lineError{line: r.line, err: err}
		}
		if first == 0 {
			first = r.line
		}
		last = r.line
		specs = append(specs, spec)
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = usagef("longer than %d bytes (a payload may be at most 1 MiB)", maxFileLine)
		}
		return nil, 0, 0, &lineError{line: r.line + 1, err: err}
	}
	return specs, first, last, nil
}

// parse decodes one line over the defaults and checks the job it describes.
func (r *jobLines) parse(text []byte) (jobq.JobSpec, error) {
	var j fileJob
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields() // a misspelt "max_attempt" must not be dropped silently
	if err := dec.Decode(&j); err != nil {
		return jobq.JobSpec{}, usageError{msg: describeJSONError(err, fileFields)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return jobq.JobSpec{}, usagef("more than one JSON value: put one job per line")
	}
	if j.Type == "" {
		return jobq.JobSpec{}, usagef(`"type" is missing (the fields are %s)`, fileFields)
	}
	in := r.def
	in.typ, in.payload = j.Type, j.Payload
	if len(in.payload) == 0 {
		in.payload = []byte("{}")
	}
	if j.Queue != nil {
		in.queue = *j.Queue
	}
	if j.Priority != nil {
		in.priority = *j.Priority
	}
	if j.MaxAttempts != nil {
		in.maxAttempts = *j.MaxAttempts
	}
	if j.Delay != nil || j.RunAt != nil {
		// A line's own schedule replaces the flags' whole.
		in.delay, in.runAt = 0, time.Time{}
	}
	if j.Delay != nil && j.RunAt != nil {
		return jobq.JobSpec{}, usagef(`give "delay" or "run_at", not both`)
	}
	if j.Delay != nil {
		d, err := time.ParseDuration(*j.Delay)
		if err != nil || d < 0 {
			return jobq.JobSpec{}, usagef(`"delay" %q: use a positive Go duration such as "90s" or "2h"`, *j.Delay)
		}
		in.delay = d
	}
	if j.RunAt != nil {
		t, err := time.Parse(time.RFC3339, *j.RunAt)
		if err != nil {
			return jobq.JobSpec{}, usagef(`"run_at" %q is not an RFC 3339 time such as "2030-01-02T15:04:05Z"`, *j.RunAt)
		}
		in.runAt = t
	}
	in.unique = j.UniqueKey
	if j.Unique != nil {
		in.uniqueBy = j.Unique
	}
	if j.Key != nil {
		in.key = *j.Key
	}
	if len(j.Metadata) > 0 {
		m := maps.Clone(in.metadata)
		if m == nil {
			m = make(map[string]string, len(j.Metadata))
		}
		maps.Copy(m, j.Metadata)
		in.metadata = m
	}
	return in.spec()
}

// describeJSONError says in a user's terms what is wrong with a JSON object
// decoded into a struct whose fields are named by fields (a line of --file,
// an http job's payload), the decoder's detail last.
func describeJSONError(err error, fields string) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Sprintf("not a JSON object but a JSON %s", typ.Value)
	case errors.As(err, &typ) && typ.Field == "metadata" && typ.Type.Kind() == reflect.String:
		return fmt.Sprintf(`"metadata" holds a JSON %s: its values must be strings`, typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("%q is a JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("%s (the fields are %s)", strings.TrimPrefix(err.Error(), "json: "), fields)
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (%v)", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON (the line ends inside the object)"
	}
	return fmt.Sprintf("not valid JSON (%v)", err)
}

// jsonKind names the JSON a field of fileJob or httpPayload takes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "a whole number"
	case reflect.Map:
		return "an object of strings"
	case reflect.Bool:
		return "true or false"
	}
	return "a " + t.String()
}

// enqueueFile stores the jobs of path ("-": stdin) batch by batch and
// prints one line per job. The first batch is read and checked before the
// store is opened, so a file that is bad from the start creates nothing.
func (a *app) enqueueFile(cmd *cobra.Command, path string, def jobInput) error {
	ctx := cmd.Context()
	name, src := path, cmd.InOrStdin()
	if path == "-" {
		name = "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return usagef("--file: %v", err)
		}
		defer f.Close()
		src = f
	}
	lines := newJobLines(src, def)
	var done, dups int // jobs of the batches stored so far; of them, duplicates
	failed := func(err error, from int) error {
		if done == 0 {
			return fmt.Errorf("%s %w; nothing was enqueued", name, err)
		}
		return fmt.Errorf("%s %w; the %d jobs before line %d were enqueued: resume from line %d", name, err, done, from, from)
	}

	batch, first, last, err := lines.next(fileBatch)
	if err != nil {
		return failed(err, 1)
	}
	if len(batch) == 0 {
		fmt.Fprintf(a.errOut, "%s holds no jobs: nothing was enqueued\n", name)
		return nil
	}
	start := time.Now()
	err = a.withBackend(ctx, mayCreate, func(b backend.Backend) error {
		client, closeClient, err := newClient(b)
		defer closeClient()
		if err != nil {
			return err
		}
		out := bufio.NewWriter(a.out)
		for len(batch) > 0 {
			res, err := client.EnqueueMany(ctx, batch)
			if err != nil {
				if ctx.Err() != nil {
					return failed(fmt.Errorf("lines %d-%d: %w (interrupted: they may or may not be stored)", first, last, err), first)
				}
				return failed(fmt.Errorf("lines %d-%d: %w", first, last, err), first)
			}
			for _, r := range res {
				if r.Duplicate {
					dups++
					fmt.Fprintf(out, "%d\tduplicate\n", r.ID)
				} else {
					fmt.Fprintln(out, r.ID)
				}
			}
			// The ids of each stored batch go out before the next is read.
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write job ids: %w", err)
			}
			done += len(res)
			from := last + 1
			if batch, first, last, err = lines.next(fileBatch); err != nil {
				return failed(err, from)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(a.errOut, "enqueued %d jobs from %s in %s (%.0f jobs/s)", done-dups, name, elapsed.Round(time.Millisecond), float64(done)/elapsed.Seconds())
	if dups > 0 {
		fmt.Fprintf(a.errOut, "; %d duplicates not added: a live job holds their unique key", dups)
	}
	fmt.Fprintln(a.errOut)
	return nil
}
