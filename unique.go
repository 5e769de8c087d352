package jobq

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// UniqueBy says which parts of a job make up its unique identity (see
// Unique). The job's type is always one of them.
type UniqueBy struct {
	// Args adds the payload: its canonical JSON (object keys sorted,
	// insignificant space dropped), so {"a":1,"b":2} and { "b":2, "a":1 }
	// are one identity. Numbers compare as written: 1 and 1.0 differ. A Go
	// struct payload whose fields carry the tag `jobq:"unique"` adds only
	// those fields (by their JSON names; top-level fields only), so a
	// request ID or timestamp beside them does not make every job unique.
	Args bool
	// Period adds the time bucket of the job's due time: the due time
	// (RunAt, or now plus Delay by the enqueuing process's clock) truncated
	// to a multiple of Period since the zero time, so with Period 1h every
	// job due within one clock hour (UTC) is one identity. At least 1s;
	// zero adds no bucket.
	Period time.Duration
	// Queue adds the queue, so the same job may wait once in each queue.
	Queue bool
	// States is the set of states in which a job of the identity keeps a
	// new one out; zero: every live state (pending, scheduled, running,
	// retrying). UniqueWaiting lets a new job in while one runs, but not
	// while one waits. UniqueAllStates|UniqueCompleted also keeps new
	// jobs out for as long as the worker's Retention keeps the one that
	// succeeded: "at most once a day" with Retention.Completed 24h. It is no part of the identity: a job out of its
	// states loses the identity to the new one, and does not get it back
	// (see backend.UniqueStates).
	States UniqueStates
}

// UniqueStates is a set of job states for UniqueBy.States.
type UniqueStates = backend.UniqueStates

// The states of UniqueBy.States; combine them with |.
const (
	UniquePending   = backend.UniquePending   // due now, no attempt failed
	UniqueScheduled = backend.UniqueScheduled // due later, no attempt failed
	UniqueRunning   = backend.UniqueRunning   // reserved by a worker
	UniqueRetrying  = backend.UniqueRetrying  // waiting after a failed attempt
	UniqueCompleted = backend.UniqueCompleted // succeeded, while retention keeps it
	UniqueWaiting   = backend.UniqueWaiting   // pending or scheduled
	UniqueAllStates = backend.UniqueAllStates // the default
)

// uniqueKeyPrefix starts every identity Unique computes; what follows is a
// hash, so a key read back in 'jobq jobs show' says where it came from.
const uniqueKeyPrefix = "jobq:unique:"

// Unique makes the job's unique key from its parts: its type, and those by
// selects (and the UniqueKey option's key, when given too, as one more
// part). While a job with the same identity is pending, scheduled,
// retrying or running (or in UniqueBy.States), Enqueue returns that job's
// ID and ErrDuplicate and
// EnqueueMany reports it as a duplicate, instead of adding another: the
// store enforces it atomically, as it does UniqueKey, in batches too. The
// key is computed by the client, so the CLI ('jobq enqueue --unique-by')
// and the admin API ("unique") compute the same identity for the same
// job.
func Unique(by UniqueBy) EnqueueOption {
	return func(o *enqueueOptions) { o.uniqueBy = &by }
}

// uniqueIdentity computes the unique key of a job whose options asked for
// Unique: a hash of its parts, each length-prefixed so no two different
// sets of parts give one input. payload is the job's stored JSON and
// value the Go value it was marshalled from (for `jobq:"unique"` tags).
func uniqueIdentity(typ string, o *enqueueOptions, payload []byte, value any, now time.Time) (string, error) {
	by := o.uniqueBy
	if by.Period != 0 && by.Period < time.Second {
		return "", &backend.InputError{Field: "unique period", Reason: fmt.Sprintf("%s is under the 1s minimum", by.Period)}
	}
	h := sha256.New()
	part := func(tag string, b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write([]byte(tag))
		h.Write(n[:])
		h.Write(b)
	}
	part("type", []byte(typ))
	if o.uniqueKey != "" {
		part("key", []byte(o.uniqueKey))
	}
	if by.Queue {
		part("queue", []byte(o.queue))
	}
	if by.Args {
		args, err := canonicalArgs(payload, uniqueFields(value))
		if err != nil {
			return "", err
		}
		part("args", args)
	}
	if by.Period > 0 {
		due := o.runAt
		if due.IsZero() {
			due = now.Add(o.delay)
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(due.Truncate(by.Period).Unix()))
		part("period", b[:])
	}
	return uniqueKeyPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// canonicalArgs is payload's JSON with object keys sorted and numbers as
// written; with fields, only those keys of a top-level object.
func canonicalArgs(payload []byte, fields []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &backend.InputError{Field: "payload", Reason: fmt.Sprintf("is not JSON, so it cannot be part of a unique identity: %v", err)}
	}
	if obj, ok := v.(map[string]any); ok && fields != nil {
		kept := make(map[string]any, len(fields))
		for _, f := range fields {
			if x, ok := obj[f]; ok {
				kept[f] = x
			}
		}
		v = kept
	}
	// encoding/json writes map keys sorted: that is the canonical order.
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical JSON of the payload: %w", err)
	}
	return out, nil
}

// uniqueFields lists the JSON names of value's fields tagged
// `jobq:"unique"`, or nil when value is no struct or tags none (then the
// whole payload counts).
func uniqueFields(value any) []string {
	t := reflect.TypeOf(value)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || !hasTagOption(f.Tag.Get("jobq"), "unique") {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// hasTagOption reports whether the comma-separated tag holds opt.
func hasTagOption(tag, opt string) bool {
	for _, o := range strings.Split(tag, ",") {
		if strings.TrimSpace(o) == opt {
			return true
		}
	}
	return false
}

// uniqueByJSON is UniqueBy as the admin API and 'jobq enqueue --file'
// write it: the period as a Go duration ("1h"), not nanoseconds.
type uniqueByJSON struct {
	Args   bool   `json:"args,omitempty"`
	Queue  bool   `json:"queue,omitempty"`
	Period string `json:"period,omitempty"`
	// States names the states of UniqueBy.States ("pending", ...);
	// absent: every state.
	States []string `json:"states,omitempty"`
}

// MarshalJSON writes {"args":true,"queue":true,"period":"1h0m0s",
// "states":["pending","scheduled"]}, leaving out the parts not chosen.
func (by UniqueBy) MarshalJSON() ([]byte, error) {
	j := uniqueByJSON{Args: by.Args, Queue: by.Queue}
	if by.Period > 0 {
		j.Period = by.Period.String()
	}
	if by.States.All() != UniqueAllStates {
		j.States = strings.Split(by.States.String(), ",")
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes ({} is the type alone),
// refusing unknown fields and a period that is no duration of at least
// 1s, so a typo never silently widens what counts as a duplicate.
func (by *UniqueBy) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j uniqueByJSON
	if err := dec.Decode(&j); err != nil {
		return &backend.InputError{Field: "unique", Reason: fmt.Sprintf("%v (fields: args, queue, period, states)", err)}
	}
	*by = UniqueBy{Args: j.Args, Queue: j.Queue}
	if j.Period != "" {
		d, err := time.ParseDuration(j.Period)
		if err != nil || d < time.Second {
			return &backend.InputError{Field: "unique", Reason: fmt.Sprintf("period %q: use a Go duration of at least 1s, such as \"1h\"", j.Period)}
		}
		by.Period = d
	}
	states, err := backend.ParseUniqueStates(strings.Join(j.States, ","))
	if err != nil {
		return &backend.InputError{Field: "unique", Reason: fmt.Sprintf("states: %v", err)}
	}
	by.States = states
	return nil
}
