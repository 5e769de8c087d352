package backend

import (
	"fmt"
	"strings"
	"time"
)

// UniqueStates is the set of states in which a job holding a unique key
// keeps a new job of the key out (InsertParams.UniqueStates). The zero
// value is every state, as UniqueAllStates.
//
// The key has one holder at a time: the job inserted with it, until the
// job ends or a later insert takes the key over. An insert of the key is
// a duplicate of its holder while the holder's current state is in the
// holder's set; otherwise the insert takes the key over and is a new job
// (the old holder runs on, no longer holding it). So "skip while one
// waits, allow while one runs" (pending and scheduled, not running) holds
// at most one waiting job per key, with at most one running beside it. A
// job whose state comes back into its set (a retry, a release) holds the
// key again only if no insert took it meanwhile: taking it back could
// collide with the newer job, and a retry cannot be refused. The state is
// judged at the insert, by the backend's clock (pending and scheduled
// differ by the due time alone, with no write between them), in the same
// atomic step as the insert.
type UniqueStates uint8

// The states a UniqueStates set is made of.
const (
	// UniquePending counts a job due now that has not failed an attempt.
	UniquePending UniqueStates = 1 << iota
	// UniqueScheduled counts a job due later that has not failed an
	// attempt.
	UniqueScheduled
	// UniqueRunning counts a reserved job (cancelling included).
	UniqueRunning
	// UniqueRetrying counts a job waiting (due or not) after a failed
	// attempt.
	UniqueRetrying
	// UniqueCompleted counts a job that succeeded while it is kept among
	// the finished jobs (Outcome.Keep, by the worker's retention): until
	// the prune removes it, or at once when the job is not kept. A failed
	// or cancelled job holds nothing: a dead letter waiting for an
	// operator must not keep new jobs of its identity out (the stray
	// keys of bullmq#4311), and its replay takes the key back when free.
	// A job of a set with UniqueCompleted takes the key with it when it
	// completes: nothing takes a key over from a completed holder.
	UniqueCompleted
	// UniqueAllStates is every live state: the default. It leaves
	// UniqueCompleted out, as a job's identity was always freed by its
	// success.
	UniqueAllStates = UniquePending | UniqueScheduled | UniqueRunning | UniqueRetrying
	// UniqueWaiting is the waiting states of a job not yet failed:
	// "skip while one waits, allow while one runs".
	UniqueWaiting = UniquePending | UniqueScheduled
	// uniqueKnown is every state a set may hold.
	uniqueKnown = UniqueAllStates | UniqueCompleted
)

// uniqueStateNames are the states' names, as the command line and the
// API spell them, in bit order.
var uniqueStateNames = []string{"pending", "scheduled", "running", "retrying", "completed"}

// All is s with the zero value read as every state.
func (s UniqueStates) All() UniqueStates {
	if s == 0 {
		return UniqueAllStates
	}
	return s
}

// String names the states of s, comma separated ("pending,scheduled").
func (s UniqueStates) String() string {
	var names []string
	for i, n := range uniqueStateNames {
		if s.All()&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// ParseUniqueStates reads a comma-separated list of state names
// (pending, scheduled, running or reserved, retrying, completed or
// finished); "" is every live state.
func ParseUniqueStates(list string) (UniqueStates, error) {
	var s UniqueStates
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		switch name {
		case "reserved":
			name = "running"
		case "finished":
			name = "completed"
		}
		found := false
		for i, n := range uniqueStateNames {
			if n == name {
				s |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, &InputError{Field: "unique states", Reason: fmt.Sprintf("%q is not one of %s", name, strings.Join(uniqueStateNames, ", "))}
		}
	}
	return s, nil
}

// Holds reports whether a job of set s, in the state given by reserved,
// attempts (failed or running attempts) and due time, keeps a new job of
// its key out at now.
func (s UniqueStates) Holds(reserved bool, attempts int, due, now time.Time) bool {
	var st UniqueStates
	switch {
	case reserved:
		st = UniqueRunning
	case attempts > 0:
		st = UniqueRetrying
	case due.After(now):
		st = UniqueScheduled
	default:
		st = UniquePending
	}
	return s.All()&st != 0
}

// HoldsCompleted reports whether a job of set s keeps its key when it
// completes and is kept among the finished jobs.
func (s UniqueStates) HoldsCompleted() bool { return s&UniqueCompleted != 0 }

// Keeps reports whether a live holder of set s, in the state given by
// reserved, attempts and due, keeps item p out at now: as Holds, except
// that a running holder lets in an item asking KeepLast, its follow-up.
func (s UniqueStates) Keeps(p *InsertParams, reserved bool, attempts int, due, now time.Time) bool {
	if reserved && p.KeepLast {
		return false
	}
	return s.Holds(reserved, attempts, due, now)
}

// validateUniqueStates checks an item's set: known states only, and a
// unique key for it to apply to.
func validateUniqueStates(p InsertParams) error {
	if p.UniqueStates == 0 {
		return nil
	}
	if p.UniqueStates&^uniqueKnown != 0 {
		return &InputError{Field: "unique states", Reason: fmt.Sprintf("%#x holds unknown states", uint8(p.UniqueStates))}
	}
	if p.UniqueKey == "" {
		return &InputError{Field: "unique states", Reason: "need a unique key to apply to"}
	}
	return nil
}
