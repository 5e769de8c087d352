package jobqtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Matcher decides whether a job's JSON payload is the one a test looks for.
type Matcher interface {
	MatchPayload(payload json.RawMessage) bool
	// String describes the matcher in failure messages.
	String() string
}

type funcMatcher struct {
	desc string
	f    func(json.RawMessage) bool
}

func (m funcMatcher) MatchPayload(p json.RawMessage) bool { return m.f(p) }
func (m funcMatcher) String() string                      { return m.desc }

// PayloadFunc matches the payloads for which f returns true; desc names
// the condition in failure messages.
func PayloadFunc(desc string, f func(payload json.RawMessage) bool) Matcher {
	return funcMatcher{desc: desc, f: f}
}

// PartialJSON matches a payload that contains want: every field of a want
// object is present in the payload's object with a matching value (objects
// compared the same way, recursively; arrays, strings, numbers, booleans
// and null must be equal; numbers compare by value, so 1 matches 1.0).
// Fields the payload has beyond want are ignored. want is JSON text when it
// is a string, []byte or json.RawMessage, otherwise it is marshalled. It
// panics when want is not JSON: a mistake in the test itself.
func PartialJSON(want any) Matcher {
	w, text := mustJSON("PartialJSON", want)
	return funcMatcher{desc: "partial JSON " + text, f: func(p json.RawMessage) bool {
		got, err := decode(p)
		return err == nil && contains(got, w)
	}}
}

// EqualJSON matches a payload equal to want as JSON (key order, spacing and
// number spelling aside). want is taken as in PartialJSON.
func EqualJSON(want any) Matcher {
	w, text := mustJSON("EqualJSON", want)
	return funcMatcher{desc: "JSON equal to " + text, f: func(p json.RawMessage) bool {
		got, err := decode(p)
		return err == nil && reflect.DeepEqual(got, w)
	}}
}

func mustJSON(fn string, v any) (any, string) {
	var text []byte
	switch x := v.(type) {
	case string:
		text = []byte(x)
	case []byte:
		text = x
	case json.RawMessage:
		text = x
	default:
		var err error
		if text, err = json.Marshal(v); err != nil {
			panic(fmt.Sprintf("jobqtest.%s: marshal %T: %v", fn, v, err))
		}
	}
	d, err := decode(text)
	if err != nil {
		panic(fmt.Sprintf("jobqtest.%s: %q is not JSON: %v", fn, text, err))
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, text)
	return d, compact.String()
}

func decode(b []byte) (any, error) {
	var v any
	err := json.Unmarshal(b, &v)
	return v, err
}

// contains reports whether got holds want (see PartialJSON).
func contains(got, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(got, want)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !contains(gv, wv) {
			return false
		}
	}
	return true
}

func matchAll(p json.RawMessage, ms []Matcher) bool {
	for _, m := range ms {
		if m != nil && !m.MatchPayload(p) {
			return false
		}
	}
	return true
}

func describe(typ string, ms []Matcher) string {
	var parts []string
	for _, m := range ms {
		if m != nil {
			parts = append(parts, m.String())
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("type %q", typ)
	}
	return fmt.Sprintf("type %q with payload matching %s", typ, strings.Join(parts, " and "))
}

// Enqueued returns the successful enqueues (see Enqueue.Enqueued) of typ
// whose payload matches every matcher, in order.
func (r *Recorder) Enqueued(typ string, match ...Matcher) []Enqueue {
	var out []Enqueue
	for _, e := range r.Enqueues() {
		if e.Type == typ && e.Enqueued() && matchAll(e.Payload, match) {
			out = append(out, e)
		}
	}
	return out
}

// AssertEnqueued fails t unless a job of typ whose payload matches every
// matcher was enqueued since the last Reset (stored, or run inline without
// error on the sync backend); the message lists every insert recorded. It
// returns the first such job, or the zero Enqueue.
func (r *Recorder) AssertEnqueued(t testing.TB, typ string, match ...Matcher) Enqueue {
	t.Helper()
	found := r.Enqueued(typ, match...)
	if len(found) == 0 {
		t.Errorf("jobqtest: no job of %s was enqueued; %s", describe(typ, match), r.listing())
		return Enqueue{}
	}
	return found[0]
}

// AssertNotEnqueued fails t when a job of typ whose payload matches every
// matcher was enqueued since the last Reset, naming the ones that were.
func (r *Recorder) AssertNotEnqueued(t testing.TB, typ string, match ...Matcher) {
	t.Helper()
	found := r.Enqueued(typ, match...)
	if len(found) > 0 {
		var b strings.Builder
		for _, e := range found {
			fmt.Fprintf(&b, "\n\t%s", e)
		}
		t.Errorf("jobqtest: %d job(s) of %s were enqueued, want none:%s", len(found), describe(typ, match), b.String())
	}
}

// listing describes every insert recorded, for failure messages.
func (r *Recorder) listing() string {
	all := r.Enqueues()
	if len(all) == 0 {
		return "nothing was enqueued"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "enqueued (%d):", len(all))
	for _, e := range all {
		fmt.Fprintf(&b, "\n\t%s", e)
	}
	return b.String()
}
