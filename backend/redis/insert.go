package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq/backend"
)

// insertFields is the number of ARGV values per item of the insert script.
const insertFields = 9

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
	if err := b.begin("insert"); err != nil {
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
	res, err := b.insert(ctx, params)
	return res, b.fail("insert", err)
}

func (b *Backend) insert(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
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
	if len(groups) == 1 && !uniques {
		// The common case: one script mints the IDs and writes the jobs,
		// together with other callers' plain inserts into the queue.
		first, err := b.inserts.insert(ctx, groups[0], params)
		if err != nil {
			return nil, err
		}
		res := make([]backend.InsertResult, len(params))
		for j := range res {
			res[j].ID = makeID(first+int64(j), groups[0].idx)
		}
		return res, nil
	}
	if err := b.mintIDs(ctx, groups, len(params)); err != nil {
		return nil, err
	}
	if uniques {
		return b.insertUnique(ctx, params, groups)
	}
	calls := make([]*evalCall, len(groups))
	for i, g := range groups {
		calls[i] = b.insertCall(g, params, true)
	}
	if err := b.c.evalAll(ctx, calls, true); err != nil {
		return nil, err
	}
	res := make([]backend.InsertResult, len(params))
	for i, g := range groups {
		if _, err := b.afterInsert(g, calls[i].res); err != nil {
			return nil, err
		}
		for j, item := range g.items {
			res[item].ID = g.ids[j]
		}
	}
	return res, nil
}

// runInsert writes the jobs of group g, minting their IDs, and returns the
// time part of the first.
func (b *Backend) runInsert(ctx context.Context, g *insertGroup, params []backend.InsertParams) (int64, error) {
	call := b.insertCall(g, params, false)
	if err := b.c.evalAll(ctx, []*evalCall{call}, true); err != nil {
		return 0, err
	}
	return b.afterInsert(g, call.res)
}

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

// insertCall builds the insert script call of one group; with given IDs
// (g.ids, one per item) the job keys go in KEYS, otherwise the script
// mints the IDs.
func (b *Backend) insertCall(g *insertGroup, params []backend.InsertParams, given bool) *evalCall {
	q := g.q
	keys := []string{q.meta, q.ready, q.readyAt, q.delayed, q.jobPrefix}
	mode := "m"
	if given {
		mode = "k"
		for _, id := range g.ids {
			keys = append(keys, q.job(id))
		}
	}
	args := make([]any, 0, 5+insertFields*len(g.items))
	args = append(args, q.channel, b.origin, mode, len(g.items))
	for j, item := range g.items {
		p := params[item]
		id := ""
		if given {
			id = tsHex(g.ids[j])
		}
		runAt := ""
		if !p.RunAt.IsZero() {
			runAt = micro(p.RunAt)
		}
		md := ""
		if len(p.Metadata) > 0 {
			buf, _ := json.Marshal(p.Metadata) // a map of strings always marshals
			md = string(buf)
		}
		args = append(args, id, p.Type, string(p.Payload), p.Priority, p.MaxAttempts, runAt,
			strconv.FormatInt(microsCeil(p.Delay), 10), p.UniqueKey, md)
	}
	return &evalCall{s: scriptInsert, keys: keys, args: args}
}

// afterInsert reads an insert script's reply {first ts, woke, due}, wakes
// this process's subscribers and returns the first ts.
func (b *Backend) afterInsert(g *insertGroup, res any) (int64, error) {
	v, err := asSlice(res)
	if err != nil || len(v) != 3 {
		return 0, fmt.Errorf("insert %s: unexpected reply %v", g.q.name, res)
	}
	f := fields{v: v}
	first, woke, due := int64(f.int(0)), f.int(1), int64(f.int(2))
	if f.err != nil {
		return 0, f.err
	}
	b.notifier.local(g.q.name, woke == 1, due)
	return first, nil
}

// insertUnique inserts a batch holding unique keys, its IDs minted
// (mintIDs): reserve the keys for them, then write the jobs that are not
// duplicates.
func (b *Backend) insertUnique(ctx context.Context, params []backend.InsertParams, groups []*insertGroup) ([]backend.InsertResult, error) {
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
			claims = append(claims, uniqueClaim{key: p.UniqueKey, id: ids[i]})
		}
	}
	reserved := time.Now()
	if err := b.reserveUnique(ctx, claims); err != nil {
		return nil, err
	}
	holder := map[string]int64{}
	for _, c := range claims {
		if c.holder != 0 {
			holder[c.key] = c.holder
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
			calls = append(calls, b.insertCall(kept, params, true))
			written = append(written, kept)
		}
	}
	var err error
	if time.Since(reserved) > b.grace/2 {
		// Past half the grace, another insert may take the keys over as
		// abandoned while these jobs are written: give up instead.
		err = fmt.Errorf("%w: the insert took longer than %s after reserving its unique keys", backend.ErrUnavailable, b.grace/2)
	} else if len(calls) > 0 {
		err = b.c.evalAll(ctx, calls, true)
	}
	if err != nil {
		// Keys reserved for jobs that were not written go back. On a
		// cluster other queues' scripts may have written theirs: those
		// keep their keys.
		kept := map[int64]bool{}
		for i, g := range written {
			if i < len(calls) && calls[i].err == nil && calls[i].res != nil {
				for _, id := range g.ids {
					kept[id] = true
				}
			}
		}
		var unused []uniqueClaim
		for _, c := range claims {
			if !kept[c.id] {
				unused = append(unused, c)
			}
		}
		b.releaseUniqueBestEffort(ctx, unused)
		return nil, err
	}
	for i, g := range written {
		if _, err := b.afterInsert(g, calls[i].res); err != nil {
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
			calls[i] = &evalCall{s: scriptMint, keys: []string{g.q.meta}, args: []any{count, least}}
		}
		if err := b.c.evalAll(ctx, calls, false); err != nil {
			return err
		}
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
		// Past every queue's last ID, with room for a round trip.
		least = slices.Max(firsts) + int64(n) + int64(time.Millisecond/time.Microsecond)<<try
	}
}
