package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jsonstr"
)

// insertGroup is the items of one insert call that go to one queue, in
// the call's order.
type insertGroup struct {
	q     *queueKeys
	idx   int   // queue index
	items []int // indexes into the call's params
	ids   []int64
}

// JobInsertMany inserts jobs: per queue in one script, and a call that
// spans queues in one MULTI/EXEC (one per queue on a cluster). Without
// unique keys that is one round trip; with them, see the package
// documentation.
func (b *Backend) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if err := b.begin("insert jobs"); err != nil {
		return nil, err
	}
	for i, p := range params {
		if err := backend.ValidateInsert(p); err != nil {
			return nil, fmt.Errorf("insert item %d: %w", i, err)
		}
	}
	if len(params) == 0 {
		return []backend.InsertResult{}, nil
	}
	if err := b.checkDeadlines(ctx, params); err != nil {
		return nil, b.fail("insert jobs", err)
	}
	params, replaced := backend.FoldConflicts(params)
	res, err := b.insertTry(ctx, params, 0)
	if err != nil {
		return nil, b.fail("insert jobs", err)
	}
	for i := range replaced {
		res[i].Replaced = res[i].Replaced || replaced[i]
	}
	return res, nil
}

// plain reports whether params all go to one queue and none has a unique
// key: the inserts one script call does alone, minting the IDs.
func plain(params []backend.InsertParams) bool {
	for _, p := range params {
		if p.Queue != params[0].Queue || p.UniqueKey != "" {
			return false
		}
	}
	return true
}

// insertTry inserts params, folded (backend.FoldConflicts); tries counts
// the inserts of the same items before it (see insertAgain).
func (b *Backend) insertTry(ctx context.Context, params []backend.InsertParams, tries int) ([]backend.InsertResult, error) {
	if plain(params) {
		// The common case: one script mints the IDs and writes the jobs,
		// together with other callers' plain inserts into the queue.
		idx, err := b.reg.index(ctx, params[0].Queue)
		if err != nil {
			return nil, err
		}
		first, err := b.inserts.insert(ctx, b.keys.queue(params[0].Queue), params)
		if err != nil {
			return nil, err
		}
		res := make([]backend.InsertResult, len(params))
		for j := range res {
			res[j].ID = makeID(first+int64(j), idx)
		}
		return res, nil
	}
	groups, err := b.groupInserts(ctx, params)
	if err != nil {
		return nil, err
	}
	uniques := false
	for _, p := range params {
		if p.UniqueKey != "" {
			uniques = true
			break
		}
	}
	if err := b.mintIDs(ctx, groups, len(params)); err != nil {
		return nil, err
	}
	if uniques {
		return b.insertUnique(ctx, params, groups, tries)
	}
	calls := make([]*evalCall, len(groups))
	for i, g := range groups {
		calls[i] = b.insertCall(g.q, params, g.items, g.ids)
	}
	if err := b.c.evalAll(ctx, calls, true); err != nil {
		return nil, err
	}
	res := make([]backend.InsertResult, len(params))
	for i, g := range groups {
		if _, err := b.afterInsert(g.q, calls[i].res); err != nil {
			return nil, err
		}
		for j, item := range g.items {
			res[item].ID = g.ids[j]
		}
	}
	return res, nil
}

// runInsert writes params, all of queue q, minting their IDs, and returns
// the time part of the first.
func (b *Backend) runInsert(ctx context.Context, q *queueKeys, params []backend.InsertParams) (int64, error) {
	if len(params) == 1 && lone(&params[0]) {
		call := b.insert1Call(q, &params[0])
		res, err := b.c.eval(ctx, call.s, call.keys, call.args)
		if err != nil {
			return 0, err
		}
		return b.afterInsert1(q, res)
	}
	call := b.insertCall(q, params, nil, nil)
	res, err := b.c.eval(ctx, call.s, call.keys, call.args)
	if err != nil {
		return 0, err
	}
	return b.afterInsert(q, res)
}

// insert1Call is the call of script insert1 for p, a lone job (see lone)
// of queue q.
func (b *Backend) insert1Call(q *queueKeys, p *backend.InsertParams) *evalCall {
	record := appendRecord(make([]byte, 0, len(p.Type)+len(p.Payload)+recordOverhead), p)
	return scriptInsert1.on(q, []any{q.channel, b.origin, record})
}

// afterInsert1 reads the reply of script insert1 (ts * 2 + woke), passes
// its wake-up on to this process's workers and returns the ts.
func (b *Backend) afterInsert1(q *queueKeys, res any) (int64, error) {
	v, ok := res.(int64)
	if !ok || v < 0 {
		return 0, fmt.Errorf("insert %s: unexpected reply %v", q.name, res)
	}
	b.notifier.local(q.name, v&1 == 1, -1)
	return v >> 1, nil
}

// lone reports whether p is ready now, of priority 0 and without options
// (a key and a deadline among them):
// a job the script insert1 writes when it is alone.
func lone(p *backend.InsertParams) bool {
	return p.Priority == 0 && p.RunAt.IsZero() && p.Delay <= 0 && p.UniqueKey == "" && len(p.Metadata) == 0 && p.Key == "" &&
		p.Deadline.IsZero()
}

// optStride is the number of values of an item's options in the ARGV of
// the script insert (see its header).
const optStride = 9

// groupInserts splits params by queue, registering new queues.
func (b *Backend) groupInserts(ctx context.Context, params []backend.InsertParams) ([]*insertGroup, error) {
	var groups []*insertGroup
	byQueue := map[string]*insertGroup{}
	for i, p := range params {
		g := byQueue[p.Queue]
		if g == nil {
			idx, err := b.reg.index(ctx, p.Queue)
			if err != nil {
				return nil, err
			}
			g = &insertGroup{q: b.keys.queue(p.Queue), idx: idx}
			byQueue[p.Queue] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, i)
	}
	return groups, nil
}

// insertCall builds the insert script call of the jobs params[items[j]]
// of queue q (all of params, in order, when items is nil). With ids, one
// per item, the job keys go in KEYS; without, the script mints the IDs.
func (b *Backend) insertCall(q *queueKeys, params []backend.InsertParams, items []int, ids []int64) *evalCall {
	n := len(params)
	if items != nil {
		n = len(items)
	}
	item := func(j int) *backend.InsertParams {
		if items != nil {
			return &params[items[j]]
		}
		return &params[j]
	}
	keys := scriptInsert.keysFor(q, len(ids))
	for _, id := range ids {
		keys = scriptInsert.itemKeys(keys, q, id)
	}
	// The records share one buffer, sized so that it never moves: each
	// argument is a slice of it.
	size := 0
	for j := range n {
		p := item(j)
		size += len(p.Type) + len(p.Payload) + recordOverhead
	}
	buf := make([]byte, 0, size)
	args := make([]any, 4, 4+n+len(ids))
	args[0], args[1], args[2] = q.channel, b.origin, n
	var opts []any
	for j := range n {
		p := item(j)
		start := len(buf)
		buf = appendRecord(buf, p)
		args = append(args, buf[start:len(buf):len(buf)])
		if p.Priority != 0 || !lone(p) {
			runAt, delay, md := "", "", ""
			if !p.RunAt.IsZero() {
				runAt = micro(p.RunAt)
			} else if p.Delay > 0 {
				delay = strconv.FormatInt(microsCeil(p.Delay), 10)
			}
			if len(p.Metadata) > 0 {
				md = jsonstr.Object(p.Metadata)
			}
			us := ""
			if p.UniqueStates.All() != backend.UniqueAllStates {
				us = strconv.Itoa(int(p.UniqueStates))
			}
			dl := ""
			if !p.Deadline.IsZero() {
				dl = micro(p.Deadline)
			}
			opts = append(opts, j+1, p.Priority, runAt, delay, p.UniqueKey, md, p.Key, us, dl)
		}
	}
	args[3] = len(opts) / optStride
	args = append(args, opts...)
	for _, id := range ids {
		args = append(args, tsHex(id))
	}
	return scriptInsert.call(keys, args)
}

// recordOverhead bounds the bytes of a record (field d) beyond its type
// and payload: max attempts and two separators.
const recordOverhead = 22

// appendRecord appends the record of a job (field d): "<max attempts>
// <type>\n<payload>". A type has no control characters, so the first
// newline ends it.
func appendRecord(buf []byte, p *backend.InsertParams) []byte {
	buf = strconv.AppendInt(buf, int64(p.MaxAttempts), 10)
	buf = append(buf, ' ')
	buf = append(buf, p.Type...)
	buf = append(buf, '\n')
	return append(buf, p.Payload...)
}

// parseRecord reads a record written by appendRecord.
func parseRecord(s string) (maxAttempts int, typ string, payload []byte, err error) {
	ma, rest, ok1 := strings.Cut(s, " ")
	typ, body, ok2 := strings.Cut(rest, "\n")
	n, err := strconv.Atoi(ma)
	if !ok1 || !ok2 || err != nil {
		return 0, "", nil, fmt.Errorf("malformed job record %.40q", s)
	}
	return n, typ, []byte(body), nil
}

// afterInsert reads an insert script's reply {first ts, woke, due}, wakes
// this process's subscribers and returns the first ts.
func (b *Backend) afterInsert(q *queueKeys, res any) (int64, error) {
	v, err := asSlice(res)
	if err != nil || len(v) != 3 {
		return 0, fmt.Errorf("insert %s: unexpected reply %v", q.name, res)
	}
	f := fields{v: v}
	first, woke, due := int64(f.int(0)), f.int(1), int64(f.int(2))
	if f.err != nil {
		return 0, f.err
	}
	b.notifier.local(q.name, woke == 1, due)
	return first, nil
}

// insertUnique inserts a batch holding unique keys, its IDs minted
// (mintIDs): reserve the keys for them, then write the jobs that are not
// duplicates.
func (b *Backend) insertUnique(ctx context.Context, params []backend.InsertParams, groups []*insertGroup, tries int) ([]backend.InsertResult, error) {
	ids := make([]int64, len(params))
	for _, g := range groups {
		for j, item := range g.items {
			ids[item] = g.ids[j]
		}
	}
	// The first item naming a key claims it; later ones in the batch are
	// duplicates of whatever the first becomes.
	first := map[string]int{}
	var claims []uniqueClaim
	for i, p := range params {
		if p.UniqueKey == "" {
			continue
		}
		if _, seen := first[p.UniqueKey]; !seen {
			first[p.UniqueKey] = i
			claims = append(claims, uniqueClaim{key: p.UniqueKey, id: ids[i], item: &params[i]})
		}
	}
	reserved := time.Now()
	if err := b.reserveUnique(ctx, claims, true); err != nil {
		return nil, err
	}
	// live are the holders a conflict mode may change: not a completed
	// one (backend.UniqueCompleted), of which every item is a duplicate.
	holder, live := map[string]int64{}, map[string]int64{}
	for _, c := range claims {
		if c.holder != 0 {
			holder[c.key] = c.holder
			if !c.completed {
				live[c.key] = c.holder
			}
		}
	}
	res := make([]backend.InsertResult, len(params))
	write := make([]bool, len(params))
	for i, p := range params {
		switch {
		case p.UniqueKey == "":
			write[i] = true
			res[i].ID = ids[i]
		case holder[p.UniqueKey] != 0:
			res[i] = backend.InsertResult{ID: holder[p.UniqueKey], Duplicate: true}
		case first[p.UniqueKey] == i:
			write[i] = true
			res[i].ID = ids[i]
		default:
			res[i] = backend.InsertResult{ID: ids[first[p.UniqueKey]], Duplicate: true}
		}
	}
	var calls []*evalCall
	var written []*insertGroup
	for _, g := range groups {
		kept := &insertGroup{q: g.q, idx: g.idx}
		for j, item := range g.items {
			if write[item] {
				kept.items = append(kept.items, item)
				kept.ids = append(kept.ids, g.ids[j])
			}
		}
		if len(kept.items) > 0 {
			calls = append(calls, b.insertCall(kept.q, params, kept.items, kept.ids))
			written = append(written, kept)
		}
	}
	changes, changed, asked, err := b.conflictCalls(ctx, params, first, live)
	if err != nil {
		b.releaseUniqueBestEffort(ctx, claims)
		return nil, err
	}
	if time.Since(reserved) > b.grace/2 {
		// Past half the grace, another insert may take the keys over as
		// abandoned while these jobs are written: give up instead.
		err = fmt.Errorf("%w: the insert took longer than %s after reserving its unique keys", backend.ErrUnavailable, b.grace/2)
		b.releaseUniqueBestEffort(ctx, claims)
		return nil, err
	}
	inserts := len(calls)
	calls = append(calls, changes...)
	if len(calls) == 0 {
		return res, nil
	}
	if err := b.c.evalAll(ctx, calls, true); err != nil {
		// Keys go back only for jobs whose insert never reached the
		// server. A call whose reply was lost may have written its jobs:
		// they keep their keys, or the key would be free while its job
		// lives (and a resent insert, given a new ID, would not be a
		// duplicate but a second job). If the call did not run, its keys
		// are taken over once found abandoned (see reserveUnique). On a
		// cluster other queues' scripts may have written theirs: those
		// keep their keys too.
		unsent := map[int64]bool{}
		for i, g := range written {
			if isNotSent(calls[i].err) {
				for _, id := range g.ids {
					unsent[id] = true
				}
			}
		}
		var unused []uniqueClaim
		for _, c := range claims {
			if unsent[c.id] {
				unused = append(unused, c)
			}
		}
		b.releaseUniqueBestEffort(ctx, unused)
		return nil, err
	}
	for i, g := range written {
		if _, err := b.afterInsert(g.q, calls[i].res); err != nil {
			return nil, err
		}
	}
	gone, err := b.afterConflict(calls[inserts:], changed, asked, res)
	if err != nil {
		return nil, err
	}
	if len(gone) > 0 {
		if err := b.insertAgain(ctx, params, gone, res, tries); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// mintIDs reserves the IDs of every item of a call of n items, setting
// each group's ids. One queue gets consecutive IDs. Across queues the
// IDs must still grow in the call's order, so item i gets ts base + i in
// its queue, one base for all: each queue hands out its least ts at or
// above a proposal (first none), and while they differ the next round
// proposes past the highest (the IDs a round handed out and no item uses
// are simply never used).
func (b *Backend) mintIDs(ctx context.Context, groups []*insertGroup, n int) error {
	least := int64(0)
	for try := 0; ; try++ {
		calls := make([]*evalCall, len(groups))
		for i, g := range groups {
			count := n
			if len(groups) == 1 {
				count = len(g.items)
			}
			calls[i] = scriptMint.on(g.q, []any{count, least})
		}
		start := time.Now()
		if err := b.c.evalAll(ctx, calls, false); err != nil {
			return err
		}
		took := time.Since(start)
		firsts := make([]int64, len(groups))
		agreed := true
		for i := range groups {
			ts, err := asInt(calls[i].res)
			if err != nil {
				return err
			}
			firsts[i] = ts
			agreed = agreed && ts == firsts[0]
		}
		if len(groups) == 1 {
			g := groups[0]
			g.ids = make([]int64, len(g.items))
			for j := range g.items {
				g.ids[j] = makeID(firsts[0]+int64(j), g.idx)
			}
			return nil
		}
		if agreed {
			for _, g := range groups {
				g.ids = make([]int64, len(g.items))
				for j, item := range g.items {
					g.ids[j] = makeID(firsts[0]+int64(item), g.idx)
				}
			}
			return nil
		}
		if try == 8 {
			return fmt.Errorf("%w: the queues of a batch did not agree on its IDs after %d rounds", backend.ErrUnavailable, try+1)
		}
		// Past every queue's last ID, with room for a round trip: twice
		// the last one's time (a loaded machine makes it long, and a
		// proposal the clocks pass before it lands cannot agree), at
		// least a millisecond, doubling each round.
		room := max(2*took, time.Millisecond)
		least = slices.Max(firsts) + int64(n) + int64(room/time.Microsecond)<<try
	}
}
