package backend

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Retainer is implemented by backends that can keep finished jobs
// (completed and cancelled) for a while in a store apart from the live
// jobs, so the claim path never reads them, and list jobs by state.
//
// A done outcome with Outcome.Keep set moves the job there as completed
// instead of deleting it; without Keep (the default) it is deleted as
// before. Cancelled jobs always go there (see Canceller). Nothing leaves it
// but FinishedPrune.
type Retainer interface {
	// FinishedList lists finished jobs of params.State matching the filter,
	// newest first (highest job ID first), at most params.Limit of them
	// (0 means 100).
	FinishedList(ctx context.Context, params FinishedListParams) ([]*FinishedJob, error)

	// FinishedPrune deletes the finished jobs of params.State that finished
	// more than their age ago by the backend's clock (params.Types' age for
	// a type it names, params.OlderThan for the others; see PruneAgeOf),
	// in chunks of at most ChunkSize per transaction, and returns how many.
	FinishedPrune(ctx context.Context, params FinishedPruneParams) (int, error)

	// JobList lists live jobs of params.State (pending: due now,
	// scheduled: due later, reserved: held, cancelling ones included)
	// matching the filter, newest first (highest ID first), at most
	// params.Limit (0 means 100).
	JobList(ctx context.Context, params JobListParams) ([]*JobRow, error)

	// PruneTurn takes or renews the prune turn for holder until ttl from
	// now (backend clock) and reports whether holder has it: one process
	// at a time prunes, and another takes over when the holder stops
	// renewing.
	PruneTurn(ctx context.Context, holder string, ttl time.Duration) (bool, error)
}

// FinishedJob is one kept job that completed or was cancelled.
type FinishedJob struct {
	ID          int64 // the job's ID while it was live
	Queue       string
	Type        string
	Payload     []byte
	State       JobState // StateCompleted or StateCancelled
	Attempts    int      // tries made; 0 for a job cancelled before its first
	MaxAttempts int
	Priority    int
	LastError   string // the error of the last failed attempt, if any
	UniqueKey   string
	Metadata    map[string]string
	CreatedAt   time.Time
	FinishedAt  time.Time // backend clock
	Key         string    // the job's key, "" for none (see KeyController)
	// Result is the JSON its handler recorded (Outcome.Result) when it
	// completed with Keep; nil for none, for cancelled jobs, and unless
	// FinishedListParams.Results asked for it. It is stored in the
	// completion's own step and pruned with the job.
	Result []byte
}

// JobFilter selects listed jobs. Zero fields match everything. Since and
// Until bound the time that belongs to the listed state: finished_at for
// finished jobs, available_at for pending and scheduled ones, reserved_at
// for reserved ones (Since inclusive, Until exclusive).
type JobFilter struct {
	Queue string
	Type  string
	Key   string // "" : any key or none (see KeyController)
	Since time.Time
	Until time.Time
}

// FinishedListParams pages through finished jobs of one state.
type FinishedListParams struct {
	State    JobState // StateCompleted or StateCancelled
	Filter   JobFilter
	Limit    int   // 0 means 100
	BeforeID int64 // when > 0, only IDs lower than this (the next page)
	// Results reads each job's Result too; without it Result is nil. One
	// job's read asks for it; a page of a list does not, since it would
	// carry up to a result cap per job that no list shows.
	Results bool
}

// JobListParams pages through live jobs of one state.
type JobListParams struct {
	State    JobState // StatePending, StateScheduled or StateReserved
	Filter   JobFilter
	Limit    int
	BeforeID int64
}

// FinishedPruneParams selects finished jobs to delete.
type FinishedPruneParams struct {
	State JobState // StateCompleted or StateCancelled
	// OlderThan is the age past which the jobs of every type Types does
	// not name are deleted: > 0, or 0 with Types set to prune only the
	// types it names.
	OlderThan time.Duration
	// Types gives some job types an age of their own (> 0), longer or
	// shorter than OlderThan, so that a prune keeps each type as long as
	// its retention says. Completed jobs only: retention per type is of
	// completed jobs.
	Types map[string]time.Duration
}

// PruneAgeOf is the age past which p deletes the finished jobs of type
// typ: its own in p.Types, else p.OlderThan; 0 keeps them.
func PruneAgeOf(p FinishedPruneParams, typ string) time.Duration {
	if d, ok := p.Types[typ]; ok {
		return d
	}
	return p.OlderThan
}

// PruneAge is one age of a prune and the jobs it applies to: those of
// Types or, with Rest, of every type but Except. A backend deletes each
// PruneAge's jobs with one statement of its own (PruneAges).
type PruneAge struct {
	OlderThan time.Duration
	Types     []string // the types of this age, sorted; nil with Rest
	Rest      bool     // every type Except does not name
	Except    []string // with Rest: the types of the other ages, sorted
}

// PruneAges splits a valid FinishedPruneParams into one PruneAge per
// distinct age, shortest first: the types of p.Types sharing an age are
// one, and the others go with p.OlderThan's (Rest), which a type of
// p.Types of that same age joins too, so Except names only the types
// given another age. Without p.Types it is OlderThan's alone, Except
// empty: the prune of before per-type ages.
func PruneAges(p FinishedPruneParams) []PruneAge {
	byAge := map[time.Duration][]string{}
	var except []string
	for typ, d := range p.Types {
		if d == p.OlderThan {
			continue
		}
		byAge[d] = append(byAge[d], typ)
		except = append(except, typ)
	}
	out := make([]PruneAge, 0, len(byAge)+1)
	for d, types := range byAge {
		slices.Sort(types)
		out = append(out, PruneAge{OlderThan: d, Types: types})
	}
	if p.OlderThan > 0 {
		slices.Sort(except)
		out = append(out, PruneAge{OlderThan: p.OlderThan, Rest: true, Except: except})
	}
	slices.SortFunc(out, func(x, y PruneAge) int { return cmp.Compare(x.OlderThan, y.OlderThan) })
	return out
}

// ValidateJobFilter refuses a time range that ends before it starts.
func ValidateJobFilter(f JobFilter) error {
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return &InputError{Field: "time range", Reason: fmt.Sprintf("until %s is not after since %s", f.Until.Format(time.RFC3339), f.Since.Format(time.RFC3339))}
	}
	return nil
}

// ValidatePage resolves a page's limit (0: 100) and refuses a negative
// limit or cursor.
func ValidatePage(limit int, beforeID int64) (int, error) {
	if beforeID < 0 {
		return 0, &InputError{Field: "before", Reason: fmt.Sprintf("%d is negative", beforeID)}
	}
	return PageLimit(limit, DefaultListLimit)
}

// ValidatePrune refuses a bad FinishedPruneParams.
func ValidatePrune(p FinishedPruneParams) error {
	if err := ValidateKeptState(p.State); err != nil {
		return err
	}
	if p.OlderThan < 0 || p.OlderThan == 0 && len(p.Types) == 0 {
		return &InputError{Field: "older than", Reason: fmt.Sprintf("%s: must be positive", p.OlderThan)}
	}
	if len(p.Types) > 0 && p.State != StateCompleted {
		return &InputError{Field: "types", Reason: fmt.Sprintf("ages per type prune completed jobs only, not %s", p.State)}
	}
	for typ, d := range p.Types {
		if r := typeProblem(typ); r != "" {
			return &InputError{Field: "types", Reason: fmt.Sprintf("type %q: %s", typ, r)}
		}
		if d <= 0 {
			return &InputError{Field: "types", Reason: fmt.Sprintf("type %q: age %s must be positive", typ, d)}
		}
	}
	return nil
}

// ValidatePruneTurn checks PruneTurn's arguments: what every backend's
// PruneTurn checks before it writes anything.
func ValidatePruneTurn(holder string, ttl time.Duration) error {
	if ttl <= 0 || holder == "" {
		return &InputError{Field: "prune turn", Reason: "needs a holder and a positive ttl"}
	}
	return nil
}

// ValidateFinishedList checks a FinishedListParams (page, state, time
// range) and returns the page's limit: what every backend's FinishedList
// checks before it reads anything.
func ValidateFinishedList(p FinishedListParams) (int, error) {
	limit, err := ValidatePage(p.Limit, p.BeforeID)
	if err == nil {
		err = ValidateKeptState(p.State)
	}
	if err == nil {
		err = ValidateJobFilter(p.Filter)
	}
	return limit, err
}

// ValidateJobList checks a JobListParams (page, state, time range) and
// returns the page's limit: what every backend's JobList checks before it
// reads anything.
func ValidateJobList(p JobListParams) (int, error) {
	limit, err := ValidatePage(p.Limit, p.BeforeID)
	if err == nil {
		err = ValidateLiveState(p.State)
	}
	if err == nil {
		err = ValidateJobFilter(p.Filter)
	}
	return limit, err
}
