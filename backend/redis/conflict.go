package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jobq/jobq/backend"
)

// A unique key's holder is named by the unique hash, in its own slot, and
// changed by the script "conflict" in its queue's slot: no script can hold
// both. The reservation found the holder live; the script checks, in the
// same step as it changes the job, that it still waits, and reports a
// holder that ended since, whose item is then inserted again (its key is
// freed or taken over as for any insert). So the change never lands on a
// job that is running, and an item never names a holder that ended before
// its change could apply.

// conflictTries bounds how often an item is inserted again because the
// holder of its key ended between the reservation and its change: each
// time another job took the key and ended within one round trip.
const conflictTries = 3

// conflictCalls builds the calls of script "conflict" for the items of
// params whose key the live job holder[key] holds and which ask a change
// of it (params are folded: only the first item of a key asks); asked
// lists the items, and groups, parallel to the calls, their holders'
// queues with the items in asked's indexes.
func (b *Backend) conflictCalls(ctx context.Context, params []backend.InsertParams, first map[string]int, holder map[string]int64) (calls []*evalCall, groups []*refGroup, asked []int, err error) {
	var holders []int64
	for i, p := range params {
		if p.OnConflict == backend.ConflictSkip || first[p.UniqueKey] != i || holder[p.UniqueKey] == 0 {
			continue
		}
		asked = append(asked, i)
		holders = append(holders, holder[p.UniqueKey])
	}
	if len(asked) == 0 {
		return nil, nil, nil, nil
	}
	groups, unknown, err := b.groupRefs(ctx, holders)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(unknown) > 0 {
		// reserveUnique names only live jobs, of known queues.
		return nil, nil, nil, fmt.Errorf("unique key %q: holder %d of no known queue", params[asked[unknown[0]]].UniqueKey, holders[unknown[0]])
	}
	for _, g := range groups {
		keys := scriptConflict.keysFor(g.q, len(g.items))
		args := make([]any, 2, 2+5*len(g.items))
		args[0], args[1] = g.q.channel, b.origin
		for _, j := range g.items {
			id, p := holders[j], &params[asked[j]]
			keys = scriptConflict.itemKeys(keys, g.q, id)
			runAt, delay, bound := "", "", ""
			switch p.OnConflict {
			case backend.ConflictDebounce:
				delay = strconv.FormatInt(microsCeil(p.Debounce), 10)
				bound = strconv.FormatInt(microsCeil(p.DebounceMax), 10)
			default:
				if !p.RunAt.IsZero() {
					runAt = micro(p.RunAt)
				} else if p.Delay > 0 {
					delay = strconv.FormatInt(microsCeil(p.Delay), 10)
				}
			}
			args = append(args, tsHex(id), p.Payload, runAt, delay, bound)
		}
		calls = append(calls, scriptConflict.call(keys, args))
	}
	return calls, groups, asked, nil
}

// afterConflict reads the replies of conflictCalls, sets Replaced on the
// results of the items whose holder changed and returns the items whose
// holder had ended.
func (b *Backend) afterConflict(calls []*evalCall, groups []*refGroup, asked []int, res []backend.InsertResult) ([]int, error) {
	var gone []int
	for i, g := range groups {
		v, err := asSlice(calls[i].res)
		if err != nil || len(v) != 3 {
			return nil, fmt.Errorf("apply conflict modes in %s: unexpected reply %v", g.q.name, calls[i].res)
		}
		outs, err := asSlice(v[0])
		if err != nil || len(outs) != len(g.items) {
			return nil, fmt.Errorf("apply conflict modes in %s: unexpected reply %v", g.q.name, calls[i].res)
		}
		f := fields{v: append(outs, v[1], v[2])}
		for j, k := range g.items {
			switch f.int(j) {
			case 1:
				res[asked[k]].Replaced = true
			case -1:
				gone = append(gone, asked[k])
			}
		}
		woke, due := f.int(len(outs)), int64(f.int(len(outs)+1))
		if f.err != nil {
			return nil, f.err
		}
		b.notifier.local(g.q.name, woke == 1, due)
	}
	return gone, nil
}

// insertAgain inserts once more the items of params (folded) whose
// key's holder ended before its change applied, and gives every item of
// their keys the outcome: the later items of a key stay its duplicates.
func (b *Backend) insertAgain(ctx context.Context, params []backend.InsertParams, gone []int, res []backend.InsertResult, tries int) error {
	if tries >= conflictTries {
		return fmt.Errorf("%w: the holder of unique key %q ended before its conflict mode applied, %d times", backend.ErrUnavailable, params[gone[0]].UniqueKey, tries)
	}
	sub := make([]backend.InsertParams, len(gone))
	for j, i := range gone {
		sub[j] = params[i]
	}
	again, err := b.insertTry(ctx, sub, tries+1)
	if err != nil {
		return err
	}
	for j, i := range gone {
		key := params[i].UniqueKey
		for k := i + 1; k < len(params); k++ {
			if params[k].UniqueKey == key {
				res[k].ID = again[j].ID
			}
		}
		res[i] = again[j]
	}
	return nil
}
