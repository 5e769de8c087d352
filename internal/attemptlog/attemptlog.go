// Package attemptlog is the stored form of a job's attempt errors
// (backend.AttemptError) in the stores that keep them as JSON: a JSON array
// of entries on PostgreSQL (jsonb) and SQLite (TEXT), and the same entries
// one per line on Redis, whose scripts append a line without decoding the
// others (cjson would round the microsecond times). The stores write the
// entries in SQL or Lua; this package only reads them, so the field names
// below, and the order of the compact form, are the contract between
// those statements and Go.
//
// An entry is an object with named fields (SQLite, Redis, and PostgreSQL
// rows written before migration 012) or, on PostgreSQL, the compact array
// [attempt, at_us, duration_us, worker, error]: a job retrying for the
// twentieth time rewrites its whole history in every retry's UPDATE, and
// jsonb stores every object's keys again, so arrays make that history
// about 30% smaller and cheaper to build.
package attemptlog

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// entry is one stored attempt error. Times and durations are integer
// microseconds: exact in every store's JSON, whatever its time zone.
type entry struct {
	Attempt    int    `json:"attempt"`
	AtUS       int64  `json:"at_us"`
	DurationUS int64  `json:"duration_us"`
	Worker     string `json:"worker"`
	Error      string `json:"error"`
}

// UnmarshalJSON reads either form of an entry (see the package doc).
func (e *entry) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '[' {
		type object entry // without this method: no recursion
		return json.Unmarshal(b, (*object)(e))
	}
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 5 {
		return fmt.Errorf("attempt error entry of %d values, want 5 (attempt, at_us, duration_us, worker, error)", len(a))
	}
	for i, dst := range []any{&e.Attempt, &e.AtUS, &e.DurationUS, &e.Worker, &e.Error} {
		if err := json.Unmarshal(a[i], dst); err != nil {
			return fmt.Errorf("attempt error entry, value %d: %w", i, err)
		}
	}
	return nil
}

func (e entry) attemptError() backend.AttemptError {
	return backend.AttemptError{
		Attempt:  e.Attempt,
		At:       time.UnixMicro(e.AtUS).UTC(),
		Duration: time.Duration(e.DurationUS) * time.Microsecond,
		Worker:   e.Worker,
		Error:    e.Error,
	}
}

// Decode reads a JSON array of entries, oldest first. Empty input (a job
// stored before the column existed, or that never failed) is nil.
func Decode(data []byte) ([]backend.AttemptError, error) {
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var es []entry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("decode attempt errors: %w", err)
	}
	return convert(es), nil
}

// DecodeLines reads entries stored one JSON object per line (Redis).
func DecodeLines(s string) ([]backend.AttemptError, error) {
	if s == "" {
		return nil, nil
	}
	lines := strings.Split(s, "\n")
	es := make([]entry, 0, len(lines))
	for _, l := range lines {
		if l == "" {
			continue
		}
		var e entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return nil, fmt.Errorf("decode attempt errors: %w", err)
		}
		es = append(es, e)
	}
	return convert(es), nil
}

func convert(es []entry) []backend.AttemptError {
	if len(es) == 0 {
		return nil
	}
	out := make([]backend.AttemptError, len(es))
	for i, e := range es {
		out[i] = e.attemptError()
	}
	return out
}
