package jobqtest

import (
	"fmt"
	"strings"
	"testing"
)

// Class is what a request did with one named part, a job type or a step
// of its own (see Recorder.Ran), as the recorder saw it since it was made
// or last Reset. Classify decides it in this order, the first that holds
// winning: Ran, Deferred, Skipped, NotWired (the zero value); attempts
// that found no handler for the type make it NotWired unless it also Ran.
type Class int

const (
	// NotWired: the part is not on the request's path: nothing of it was
	// seen at all (no insert, no run, no enqueue point reached: no
	// BeforeEnqueue hook call, no skip mark, no OnPath). Also a job type
	// that has no handler: attempts of it were made (by a worker, or
	// inline on the sync backend) and each found no handler registered,
	// so nothing of the part started (Observation.Unhandled), and no
	// other attempt of it ran a handler.
	NotWired Class = iota
	// Ran: the part was called within the request: a handler of the type
	// started, inside the enqueue (sync backend) or run by the test
	// (RunQueue, or a Worker with the recorder's WorkerHooks), or the
	// test recorded the step with Recorder.Ran. Its outcome does not
	// matter: a failing handler still ran.
	Ran
	// Deferred: no handler of the type ran, and the backend stored at least
	// one job of it (inserted, not a duplicate, not inline; through
	// EnqueueTx, found in the backend when observed) to run later.
	Deferred
	// Skipped: the part is on the request's path but was neither called
	// nor deferred: no handler ran and nothing was stored, but the request
	// reached the enqueue point of the type: the client saw it (its
	// BeforeEnqueue hook ran, or Client.Skip or MarkSkipped marked it) or
	// the backend was asked and stored nothing (a duplicate unique key,
	// an insert error, an EnqueueTx whose transaction did not commit), or
	// a hook or validation refused it; or the test placed it on the path
	// with Recorder.OnPath.
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

// Observation is everything recorded of one named part (a job type or a
// step) since the recorder was made or last Reset, and the class it
// decides.
type Observation struct {
	// Type is the job type or the step's name.
	Type  string
	Class Class
	// Reached counts the times the part was placed on the request's path:
	// the enqueue points the client saw (BeforeEnqueue hook calls and skip
	// marks; none without the recorder's ClientHooks) and OnPath calls.
	Reached  int
	Enqueues []Enqueue
	Runs     []Run
	// Unhandled lists the attempts (by a worker, or inline on the sync
	// backend) that found no handler registered for the type: the
	// worker's Started hook fired, but nothing of the part started, so
	// they are not Runs.
	Unhandled []Run
	// Skips lists the enqueue points that stored nothing, with why.
	Skips []Skip
}

// Observe returns what was recorded of typ (a job type or a step's name)
// and its class.
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
		switch {
		case run.Type != typ:
		case !run.Step && r.unhandled[run.k]:
			o.Unhandled = append(o.Unhandled, run.Run)
		default:
			o.Runs = append(o.Runs, run.Run)
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
	if len(o.Unhandled) > 0 {
		return NotWired
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
	fmt.Fprintf(&b, "type %q: %s (on the request's path %d times)", o.Type, o.Class, o.Reached)
	for _, run := range o.Runs {
		if run.Step {
			b.WriteString("\n\tran: called within the request (Recorder.Ran)")
			continue
		}
		where := "by a worker"
		if run.Inline {
			where = "inline, inside the enqueue"
		}
		fmt.Fprintf(&b, "\n\tran: job %d attempt %d on queue %s, %s", run.JobID, run.Attempt, run.Queue, where)
	}
	for _, run := range o.Unhandled {
		where := "by a worker"
		if run.Inline {
			where = "inline, inside the enqueue"
		}
		fmt.Fprintf(&b, "\n\tno handler registered: job %d attempt %d on queue %s, %s, started nothing", run.JobID, run.Attempt, run.Queue, where)
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

// Classify returns the class of typ, a job type or a step's name; see
// Class for the definitions and their order.
func (r *Recorder) Classify(typ string) Class { return r.Observe(typ).Class }

// AssertClass fails t, listing what was recorded of typ, unless its class
// is want.
func (r *Recorder) AssertClass(t testing.TB, typ string, want Class) {
	t.Helper()
	if o := r.Observe(typ); o.Class != want {
		t.Errorf("jobqtest: job type %q was %s, want %s\n%s", typ, o.Class, want, o)
	}
}
