package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// insertRounds bounds how often insert re-sends items whose duplicate
// holder vanished between its snapshot and its conflict check, or whose
// holder it judged out of its states (the next round takes the key over).
const insertRounds = 5

// inserter is the state of one insert (see Backend.insert) across its
// rounds.
type inserter struct {
	b             *Backend
	query         rowQuerier
	batch         batchSender // nil in a caller's transaction (see insertChecked)
	stmt, stmtOne string
	params        []backend.InsertParams // folded (backend.FoldConflicts)
	keyed         bool                   // some item has a key: the keyed statements
	unique        bool                   // some item has a unique key: not plainInsert
	results       []backend.InsertResult
	// held is, for each item found a duplicate, its holder's set, attempts
	// and the server's clock as its round read them (see refollow).
	held      map[int]heldState
	dueQueues map[string]bool
	queues    []string // the queues that got a job due now
}

// heldState is a duplicate's holder as its round read it, for refollow.
type heldState struct {
	states   backend.UniqueStates
	reserved bool
	attempts int32
	due, now time.Time
}

// holder is a unique key's holder as an insert round judged it out of its
// states: withTakeover takes its key only while it is still so.
type holder struct {
	id       int64
	reserved bool
	attempts int32
	due      time.Time
}

// holderRow scans the holder columns of an insert's row (holderColumns).
type holderRow struct {
	states   pgtype.Int2
	reserved pgtype.Bool
	attempts pgtype.Int4
	due, now pgtype.Timestamptz
}

// rounds sends the items send, in rounds, until each is inserted or a
// duplicate of a holder that keeps it out; take is the holders whose keys
// the first round takes over, by item. An item comes back to the next
// round when its holder vanished since the statement's snapshot, or when
// its holder's state is out of the holder's set (backend.UniqueStates,
// judged by the server's clock): that round takes the key over.
func (in *inserter) rounds(ctx context.Context, send []int, take map[int]holder) error {
	params, results := in.params, in.results
	for round := 0; len(send) > 0; round++ {
		if round == insertRounds {
			return fmt.Errorf("insert: unique keys kept changing hands")
		}
		var (
			ord            int64
			id             pgtype.Int8
			duplicate, due bool
			h              holderRow
			answered       = make([]bool, len(send))
			judged         map[int]holder
		)
		dest := []any{&ord, &id, &duplicate, &due, &h.states, &h.reserved, &h.attempts, &h.due, &h.now}
		if !in.unique {
			dest = dest[:4]
		}
		sql, args := in.b.roundSQL(in.stmt, in.keyed, in.unique, len(take) > 0), insertArgs(params, send)
		if in.keyed {
			// Only a batch with keys pays for their turns.
			args = append(args, keyArg(params, send))
		} else if len(send) == 1 && in.stmtOne != "" && params[send[0]].UniqueKey == "" {
			sql, args, dest = in.stmtOne, insertOneArgs(params[send[0]]), dest[:4]
		}
		if len(take) > 0 {
			args = append(args, takeArgs(take)...)
		}
		each := func() error {
			i := send[ord-1]
			if !id.Valid {
				return nil
			}
			if duplicate && h.now.Valid {
				states := backend.UniqueStates(h.states.Int16)
				held := holder{id: id.Int64, reserved: h.reserved.Bool, attempts: h.attempts.Int32, due: h.due.Time}
				if !states.Keeps(&params[i], held.reserved, int(held.attempts), held.due, h.now.Time) {
					if judged == nil {
						judged = make(map[int]holder)
					}
					judged[i] = held
					return nil
				}
				if in.held == nil {
					in.held = make(map[int]heldState)
				}
				in.held[i] = heldState{states: states, reserved: held.reserved, attempts: held.attempts, due: held.due, now: h.now.Time}
			}
			answered[ord-1] = true
			results[i] = backend.InsertResult{ID: id.Int64, Duplicate: duplicate}
			if due {
				in.wake([]string{params[i].Queue})
			}
			return nil
		}
		var err error
		if keys := uniqueKeys(params, send); len(keys) > 0 {
			err = in.insertChecked(ctx, sql, args, dest, each, send, keys)
		} else {
			err = in.query(ctx, sql, args, dest, each)
		}
		if err != nil {
			return err
		}
		take = judged
		var retry []int
		for j, ok := range answered {
			if !ok {
				retry = append(retry, send[j])
			}
		}
		send = retry
	}
	return nil
}

// uniqueKeys returns the unique keys of the items send of params.
func uniqueKeys(params []backend.InsertParams, send []int) []string {
	n := 0
	for _, i := range send {
		if params[i].UniqueKey != "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	keys := make([]string, 0, n)
	for _, i := range send {
		if k := params[i].UniqueKey; k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// wake adds queues to those that got a job due now.
func (in *inserter) wake(queues []string) {
	for _, q := range queues {
		if !in.dueQueues[q] {
			in.dueQueues[q] = true
			in.queues = append(in.queues, q)
		}
	}
}

// refollow judges the items repeating the unique key of an earlier item
// of the batch (followers: item, earlier item) that was a duplicate of a
// stored holder, each on its own, as if the batch's items were inserted
// one by one (as the memory backend does): the holder keeps one out
// while its state is in its set, which the earlier item's conflict mode
// may have changed (moved: the holders' new due times, by job ID), and a
// running holder gives way to an item asking KeepLast. The first item it
// does not keep out takes the key over, in a round of its own, and the
// later ones are that new job's duplicates. Nothing is sent when every
// item is kept out (the common case).
func (in *inserter) refollow(ctx context.Context, followers [][2]int, moved map[int64]time.Time) error {
	params, results := in.params, in.results
	var send []int
	take := map[int]holder{}
	takenBy := map[int]int{} // earlier item -> the follower taking its key
	for _, f := range followers {
		i, first := f[0], f[1]
		if _, ok := takenBy[first]; ok || !results[first].Duplicate {
			continue
		}
		h, ok := in.held[first]
		if !ok {
			continue
		}
		if due, ok := moved[results[first].ID]; ok {
			h.due = due
		}
		if h.states.Keeps(&params[i], h.reserved, int(h.attempts), h.due, h.now) {
			continue
		}
		takenBy[first] = i
		take[i] = holder{id: results[first].ID, reserved: h.reserved, attempts: h.attempts, due: h.due}
		send = append(send, i)
	}
	if len(send) == 0 {
		return nil
	}
	if err := in.rounds(ctx, send, take); err != nil {
		return err
	}
	// The key's items after the one taking it were made duplicates of the
	// old holder: they repeat the new job, as items of one call do.
	for _, f := range followers {
		if by, ok := takenBy[f[1]]; ok && f[0] > by {
			results[f[0]].ID = results[by].ID
		}
	}
	woken, _, err := in.b.applyConflicts(ctx, in.query, params, results, send)
	if err != nil {
		return err
	}
	in.wake(woken)
	return nil
}

// roundSQL is the statement of an insert round: stmt (sqlInsert or
// sqlInsertNotify), in its keyed form when keyed, its plain form unless
// unique (plainInsert), taking holders' keys over first when take
// (withTakeover).
func (b *Backend) roundSQL(stmt string, keyed, unique, take bool) string {
	notify := stmt == b.q.insertNotify
	switch {
	case !unique && keyed && notify:
		return b.kq.insertNotifyPlain
	case !unique && keyed:
		return b.kq.insertPlain
	case !unique && notify:
		return b.q.insertNotifyPlain
	case !unique:
		return b.q.insertPlain
	case keyed && take && notify:
		return b.kq.insertNotifyTake
	case keyed && take:
		return b.kq.insertTake
	case keyed && notify:
		return b.kq.insertNotify
	case keyed:
		return b.kq.insert
	case take && notify:
		return b.q.insertNotifyTake
	case take:
		return b.q.insertTake
	}
	return stmt
}

// takeArgs builds withTakeover's arrays, the holders in ID order (so
// concurrent takeovers lock them in one order).
func takeArgs(take map[int]holder) []any {
	hs := slices.SortedFunc(maps.Values(take), func(a, b holder) int { return cmp.Compare(a.id, b.id) })
	ids := make([]int64, len(hs))
	reserved := make([]bool, len(hs))
	attempts := make([]int32, len(hs))
	due := make([]time.Time, len(hs))
	for j, h := range hs {
		ids[j], reserved[j], attempts[j], due[j] = h.id, h.reserved, h.attempts, h.due
	}
	return []any{ids, reserved, attempts, due}
}
