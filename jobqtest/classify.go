package jobqtest

import (
	"fmt"
	"strings"
	"testing"
)

// Class is what a request did with one job type, as the recorder saw it
// since it was made or last Reset. Classify decides it in this order, the
// first that holds winning: Ran, Deferred, Skipped, NotWired (the zero
// value).
type Class int

const (
	// NotWired: nothing of the type was seen at all: no insert, no run, no
	// enqueue point reached (no BeforeEnqueue hook call, no skip mark).
	NotWired Class = iota
	// Ran: a handler of the type started during the request: inside the
	// enqueue (sync backend), or run by the test (RunQueue, or a Worker
	// with the recorder's WorkerHooks). Its outcome does not matter: a
	// failing handler still ran.
	Ran
	// Deferred: no handler of the type ran, and the backend stored at least
	// one job of it (inserted, not a duplicate, not inline; through
	// EnqueueTx, found in the backend when observed) to run later.
	Deferred
	// Skipped: no handler ran and nothing was stored, but the request
	// reached the enqueue point of the type: the client saw it (its
	// BeforeEnqueue hook ran, or Client.Skip or MarkSkipped marked it) or
	// the backend was asked and stored nothing (a duplicate unique key,
	// an insert error, an EnqueueTx whose transaction did not commit), or
	// a hook or validation refused it.
	Skipped
)

// String names the class.
func (c Class) String() string {
	switch c {
	case NotWired:
		return "not wired"
	case Ran:
		return "ran"
	case Deferred:
		return "deferred"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Observation is everything recorded of one job type since the recorder
// was made or last Reset, and the class it decides.
type Observation struct {
	Type  string
	Class Class
	// Reached counts the enqueue points the client saw: BeforeEnqueue
	// hook calls and skip marks (0 without the recorder's ClientHooks).
	Reached  int
	Enqueues []Enqueue
	Runs     []Run
	// Skips lists the enqueue points that stored nothing, with why.
	Skips []Skip
}

// Observe returns what was recorded of typ and its class.
func (r *Recorder) Observe(typ string) Observation {
	enqueues := r.Enqueues() // outside the lock: it may ask the backend
	r.mu.Lock()
	defer r.mu.Unlock()
	o := Observation{Type: typ, Reached: r.reached[typ]}
	for _, e := range enqueues {
		if e.Type != typ {
			continue
		}
		o.Enqueues = append(o.Enqueues, e)
		switch {
		case e.Duplicate:
			o.Skips = append(o.Skips, Skip{Type: typ, Queue: e.Queue, Reason: fmt.Sprintf("duplicate unique key %q (held by job %d)", e.UniqueKey, e.ID)})
		case e.Err != nil && !e.Inline:
			o.Skips = append(o.Skips, Skip{Type: typ, Queue: e.Queue, Reason: "insert failed: " + e.Err.Error()})
		case e.NotCommitted:
			o.Skips = append(o.Skips, Skip{Type: typ, Queue: e.Queue, Reason: fmt.Sprintf("job %d was inserted in a transaction that did not commit", e.ID)})
		}
	}
	for _, run := range r.runs {
		if run.Type == typ {
			o.Runs = append(o.Runs, run)
		}
	}
	for _, s := range r.marks {
		if s.Type == typ {
			o.Skips = append(o.Skips, s)
		}
	}
	o.Class = o.decide()
	return o
}

// decide applies the decision order of Class.
func (o Observation) decide() Class {
	if len(o.Runs) > 0 {
		return Ran
	}
	for _, e := range o.Enqueues {
		if e.Stored() {
			return Deferred
		}
	}
	if o.Reached > 0 || len(o.Enqueues) > 0 || len(o.Skips) > 0 {
		return Skipped
	}
	return NotWired
}

// String describes the observation for a failure message.
func (o Observation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "type %q: %s (enqueue point reached %d times by the client hooks)", o.Type, o.Class, o.Reached)
	for _, run := range o.Runs {
		where := "by a worker"
		if run.Inline {
			where = "inline, inside the enqueue"
		}
		fmt.Fprintf(&b, "\n\tran: job %d attempt %d on queue %s, %s", run.JobID, run.Attempt, run.Queue, where)
	}
	for _, e := range o.Enqueues {
		fmt.Fprintf(&b, "\n\tinsert: %s", e)
	}
	for _, s := range o.Skips {
		fmt.Fprintf(&b, "\n\tskipped on queue %q: %s", s.Queue, s.Reason)
	}
	return b.String()
}

// String describes one insert.
func (e Enqueue) String() string {
	var state string
	switch {
	case e.Err != nil:
		state = "failed: " + e.Err.Error()
	case e.Duplicate:
		state = fmt.Sprintf("duplicate of job %d", e.ID)
	case e.NotCommitted:
		state = fmt.Sprintf("job %d not committed", e.ID)
	case e.Inline:
		state = fmt.Sprintf("ran inline as job %d", e.ID)
	default:
		state = fmt.Sprintf("stored as job %d", e.ID)
	}
	s := fmt.Sprintf("%s on queue %s %s: %s", e.Type, e.Queue, e.Payload, state)
	if e.InTx {
		s += " (in a transaction)"
	}
	return s
}

// Classify returns the class of typ; see Class for the definitions and
// their order.
func (r *Recorder) Classify(typ string) Class { return r.Observe(typ).Class }

// AssertClass fails t, listing what was recorded of typ, unless its class
// is want.
func (r *Recorder) AssertClass(t testing.TB, typ string, want Class) {
	t.Helper()
	if o := r.Observe(typ); o.Class != want {
		t.Errorf("jobqtest: job type %q was %s, want %s\n%s", typ, o.Class, want, o)
	}
}
