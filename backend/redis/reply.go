package redis

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/attemptlog"
)

// Readers of script replies. A script returns arrays of strings and
// integers (see the headers in scripts.lua); a reply of another shape is a
// bug or a foreign key under the prefix, reported as an error.

func asSlice(v any) ([]any, error) {
	s, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T from redis, want an array", v)
	}
	return s, nil
}

func asString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("unexpected reply %T from redis, want a string", v)
}

func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		if x == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected reply %q from redis, want an integer", x)
		}
		return n, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("unexpected reply %T from redis, want an integer", v)
}

// fields reads a run of string values; the first error wins.
type fields struct {
	v   []any
	err error
}

func (f *fields) str(i int) string {
	s, err := asString(f.v[i])
	if err != nil && f.err == nil {
		f.err = err
	}
	return s
}

func (f *fields) int(i int) int { return int(f.int64(i)) }

// int64 reads a whole number that may not fit an int of 32 bits, such as
// a claim's token.
func (f *fields) int64(i int) int64 {
	n, err := asInt(f.v[i])
	if err != nil && f.err == nil {
		f.err = err
	}
	return n
}

// id reads a time part (tsHex) as the ID it makes in the queue of index q.
func (f *fields) id(i, q int) int64 {
	id, err := parseTS(f.str(i), q)
	if err != nil && f.err == nil {
		f.err = err
	}
	return id
}

// task reads a job's fields w ("<workflow ts> <index>", at i) and tn
// (at i + 1) as the workflow ID in the queue of index q and the task's
// name: 0 and "" for a plain job, whose w is empty.
func (f *fields) task(i, q int) (int64, string) {
	w := f.str(i)
	if w == "" {
		return 0, ""
	}
	ts, _, _ := strings.Cut(w, " ")
	id, err := parseTS(ts, q)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("job's workflow %q: %w", w, err)
	}
	return id, f.str(i + 1)
}

// record reads a job's record (field d, see appendRecord).
func (f *fields) record(i int) (maxAttempts int, typ string, payload []byte) {
	ma, typ, payload, err := parseRecord(f.str(i))
	if err != nil && f.err == nil {
		f.err = err
	}
	return ma, typ, payload
}

// micros reads a time stored as µs since 1970; "" is the zero time.
func (f *fields) micros(i int) time.Time {
	s := f.str(i)
	if s == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if f.err == nil {
			f.err = fmt.Errorf("unexpected time %q from redis", s)
		}
		return time.Time{}
	}
	return time.UnixMicro(n)
}

// metadata reads a job's metadata JSON; "" is none.
func (f *fields) metadata(i int) map[string]string {
	s := f.str(i)
	if s == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil && f.err == nil {
		f.err = fmt.Errorf("unreadable metadata from redis: %w", err)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// attemptErrors reads a job's error log (field el, see add_error in
// scripts.lua); "" is none.
func (f *fields) attemptErrors(i int) []backend.AttemptError {
	errs, err := attemptlog.DecodeLines(f.str(i))
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("unreadable attempt errors from redis: %w", err)
	}
	return errs
}

// micro converts a time to µs since 1970, for a script.
func micro(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// microsCeil is a duration in whole µs, rounded up so that a positive
// duration never becomes zero.
func microsCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
