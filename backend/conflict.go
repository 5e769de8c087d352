package backend

import (
	"fmt"
	"time"
)

// ConflictMode says what JobInsertMany does with an item whose UniqueKey
// is held by a live job (or by an earlier item of the same call). Every
// mode answers the holder's ID with Duplicate = true, never an error.
type ConflictMode uint8

// The conflict modes.
const (
	// ConflictSkip (the default) inserts nothing and changes nothing.
	ConflictSkip ConflictMode = iota
	// ConflictReplace gives a waiting holder (pending: due, scheduled or
	// retrying) the item's payload and due time (RunAt, or now + Delay by
	// the backend's clock), keeping its ID, attempts and errors. A
	// running holder is left alone: the item is skipped.
	ConflictReplace
	// ConflictDebounce gives a waiting holder the item's payload and the
	// due time now + Debounce, but never later than DebounceMax after the
	// holder was created: a steady stream of enqueues keeps pushing the
	// job back, and still runs it within DebounceMax. A running holder is
	// left alone, as with ConflictReplace.
	ConflictDebounce
)

// String names the mode as the API and the command line spell it.
func (m ConflictMode) String() string {
	switch m {
	case ConflictSkip:
		return "skip"
	case ConflictReplace:
		return "replace"
	case ConflictDebounce:
		return "debounce"
	}
	return fmt.Sprintf("ConflictMode(%d)", m)
}

// validateConflict checks an item's conflict mode: a mode other than skip
// needs a unique key to conflict on, and is refused for a keyed job,
// whose place among its key's jobs (its turn) was fixed when it was
// inserted and would not follow a new due time.
func validateConflict(p InsertParams) error {
	switch p.OnConflict {
	case ConflictSkip:
		if p.Debounce != 0 || p.DebounceMax != 0 {
			return &InputError{Field: "debounce", Reason: "is only for the debounce conflict mode"}
		}
		if p.KeepLast {
			return &InputError{Field: "keep last", Reason: "is only for the replace and debounce conflict modes"}
		}
		return nil
	case ConflictReplace:
		if p.Debounce != 0 || p.DebounceMax != 0 {
			return &InputError{Field: "debounce", Reason: "is only for the debounce conflict mode"}
		}
	case ConflictDebounce:
		if p.Debounce <= 0 || p.DebounceMax < p.Debounce {
			return &InputError{Field: "debounce", Reason: fmt.Sprintf("%s, at most %s: needs a positive delay and a bound no shorter than it", p.Debounce, p.DebounceMax)}
		}
	default:
		return &InputError{Field: "on conflict", Reason: fmt.Sprintf("%d is no conflict mode", p.OnConflict)}
	}
	if p.UniqueKey == "" {
		return &InputError{Field: "on conflict", Reason: fmt.Sprintf("%s needs a unique key to conflict on", p.OnConflict)}
	}
	if p.Key != "" {
		return &InputError{Field: "on conflict", Reason: fmt.Sprintf("%s is not for a keyed job: its turn among its key's jobs is fixed at insert", p.OnConflict)}
	}
	return nil
}

// Conflict is what an item with a conflict mode other than skip asks of
// the waiting job holding its unique key: the payload and due time it
// takes.
type Conflict struct {
	Item    int // the index of the item in the call
	Payload []byte
	// DueAt is the holder's new due time for ConflictReplace (the item's
	// own: RunAt, or now + Delay); for ConflictDebounce it is now +
	// Debounce, and Cap the bound: the due time is the earlier of DueAt
	// and the holder's CreatedAt + DebounceMax.
	DueAt       time.Time
	DebounceMax time.Duration // ConflictDebounce only; 0 for replace
}

// DueFor is the holder's new due time: DueAt, or for debounce no later
// than created + DebounceMax.
func (c Conflict) DueFor(created time.Time) time.Time {
	if c.DebounceMax > 0 {
		if limit := created.Add(c.DebounceMax); limit.Before(c.DueAt) {
			return limit
		}
	}
	return c.DueAt
}

// ConflictOf is the change item i of params asks of a waiting holder of
// its unique key at now (backend clock), and whether it asks any.
func ConflictOf(params []InsertParams, i int, now time.Time) (Conflict, bool) {
	p := params[i]
	switch p.OnConflict {
	case ConflictReplace:
		return Conflict{Item: i, Payload: p.Payload, DueAt: p.AvailableAt(now)}, true
	case ConflictDebounce:
		return Conflict{Item: i, Payload: p.Payload, DueAt: now.Add(p.Debounce), DebounceMax: p.DebounceMax}, true
	}
	return Conflict{}, false
}

// FoldConflicts applies, to a copy of params, what each item repeating
// the unique key of an earlier item of the same call asks of it: the
// earlier item is not stored yet, so it takes the payload, due time and
// conflict mode itself (as a waiting holder would take the first two;
// the mode carries the change on to a stored job holding the key, should
// the earlier item turn out a duplicate too), and the later one is a
// duplicate as usual. It returns params itself when no item asks
// anything, and marks in replaced the later items that changed an
// earlier one. Backends call it before their insert, which then needs
// only to apply conflicts with jobs already stored.
func FoldConflicts(params []InsertParams) (out []InsertParams, replaced []bool) {
	asks := false
	for _, p := range params {
		if p.UniqueKey != "" && p.OnConflict != ConflictSkip {
			asks = true
			break
		}
	}
	if !asks {
		return params, nil
	}
	out = append([]InsertParams(nil), params...)
	first := make(map[string]int)
	for i, p := range params {
		if p.UniqueKey == "" {
			continue
		}
		j, ok := first[p.UniqueKey]
		if !ok {
			first[p.UniqueKey] = i
			continue
		}
		switch p.OnConflict {
		case ConflictReplace:
			out[j].RunAt, out[j].Delay = p.RunAt, p.Delay
		case ConflictDebounce:
			// The earlier item is created by this call: its bound,
			// DebounceMax from now, is never before now + Debounce.
			out[j].RunAt, out[j].Delay = time.Time{}, p.Debounce
		default:
			continue
		}
		if replaced == nil {
			replaced = make([]bool, len(params))
		}
		out[j].Payload = p.Payload
		out[j].OnConflict, out[j].Debounce, out[j].DebounceMax = p.OnConflict, p.Debounce, p.DebounceMax
		out[j].KeepLast = p.KeepLast
		replaced[i] = true
	}
	return out, replaced
}
