package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jobq/jobq/backend"
)

// Failed jobs are listed, replayed and purged per queue by scripts that
// walk the queue's failed set newest first (failedscan, purgescan), each
// call examining at most scanBudget entries and returning a cursor.
const scanBudget = 4 * backend.ChunkSize

// filterArgs is a FailedFilter as the scan scripts take it: failed before
// and older than in µs ("" for none). The cutoff is computed inside the
// script from the Redis clock.
type filterArgs struct {
	typ, before, older, key string
	keepHeld                string // "1": FailedFilter.KeepHeld
}

func newFilterArgs(f backend.FailedFilter) filterArgs {
	a := filterArgs{typ: f.Type, key: f.Key}
	if f.KeepHeld {
		a.keepHeld = "1"
	}
	if !f.FailedBefore.IsZero() {
		// failed_at (whole µs) < FailedBefore ⟺ failed_at < ceil(FailedBefore).
		us := f.FailedBefore.UnixMicro()
		if f.FailedBefore.Nanosecond()%1000 != 0 {
			us++
		}
		a.before = strconv.FormatInt(us, 10)
	}
	if f.OlderThan > 0 {
		a.older = strconv.FormatInt(microsCeil(f.OlderThan), 10)
	}
	return a
}

// filterQueues returns the queues a filter covers: its queue when it
// names one (none when that queue does not exist), otherwise every queue.
func (b *Backend) filterQueues(ctx context.Context, f backend.FailedFilter) ([]string, error) {
	if f.Queue == "" {
		return b.reg.all(ctx)
	}
	_, known, err := b.reg.lookup(ctx, f.Queue)
	if err != nil || !known {
		return nil, err
	}
	return []string{f.Queue}, nil
}

// failedRecord is one failed job as the scan scripts return it.
type failedRecord struct {
	fid   int64
	jobID int64
	queue string
	typ   string
	uniq  string
	row   *backend.FailedJob // 'rec' scans only
}

// scanFailed returns up to limit failed jobs of queue matching fa, newest
// first, below the failed ID upper (0 for none). With full, each record
// carries the whole row. It loops over the script's cursor until it has
// limit or the set is exhausted.
func (b *Backend) scanFailed(ctx context.Context, queue string, fa filterArgs, upper int64, limit int, full bool) ([]failedRecord, int64, error) {
	k := b.keys.queue(queue)
	idx, ok, err := b.reg.lookup(ctx, queue)
	if err != nil || !ok {
		return nil, 0, err
	}
	what, width := "ref", 4
	if full {
		what, width = "rec", 13
	}
	cursor := ""
	if upper > 0 {
		cursor = tsBelow(upper, idx)
	}
	var out []failedRecord
	for len(out) < limit {
		res, err := scriptFailedScan.eval(ctx, b.c, scriptFailedScan.keysOf(k),
			[]any{cursor, fa.before, fa.older, fa.typ, limit - len(out), scanBudget, what, fa.key, fa.keepHeld})
		if err != nil {
			return nil, 0, err
		}
		v, err := asSlice(res)
		if err != nil || len(v) < 1 || (len(v)-1)%width != 0 {
			return nil, 0, fmt.Errorf("list failed jobs of %s: unexpected reply", queue)
		}
		f := fields{v: v}
		for i := 1; i < len(v); i += width {
			r := failedRecord{fid: f.id(i, idx), jobID: f.id(i+1, idx), queue: queue}
			if full {
				r.uniq = f.str(i + 6)
				r.row = &backend.FailedJob{
					ID: r.fid, JobID: r.jobID, Queue: queue,
					Priority:  f.int(i + 3),
					Attempts:  f.int(i + 4),
					Error:     f.str(i + 5),
					UniqueKey: r.uniq,
					Metadata:  f.metadata(i + 7),
					CreatedAt: f.micros(i + 8),
					FailedAt:  idTime(r.fid),
					Errors:    f.attemptErrors(i + 9),
				}
				r.row.MaxAttempts, r.row.Type, r.row.Payload = f.record(i + 2)
				r.row.WorkflowID, r.row.Task = f.task(i+10, idx)
				r.row.Key, r.row.Turn = keyField(f.str(i + 12))
				r.typ = r.row.Type
			} else {
				r.typ, r.uniq = f.str(i+2), f.str(i+3)
			}
			out = append(out, r)
		}
		if f.err != nil {
			return nil, 0, f.err
		}
		cursor = f.str(0)
		if cursor == "" {
			return out, 0, nil
		}
	}
	next, err := parseTS(cursor, idx)
	return out, next, err
}

// FailedList lists failed jobs newest first: each queue's newest matches
// (one scan per queue), merged.
func (b *Backend) FailedList(ctx context.Context, params backend.FailedListParams) ([]*backend.FailedJob, error) {
	if err := b.begin("list failed jobs"); err != nil {
		return nil, err
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultFailedListLimit)
	if err == nil {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	out, err := b.failedList(ctx, params, limit)
	return out, b.fail("list failed jobs", err)
}

func (b *Backend) failedList(ctx context.Context, params backend.FailedListParams, limit int) ([]*backend.FailedJob, error) {
	queues, err := b.filterQueues(ctx, params.Filter)
	if err != nil {
		return nil, err
	}
	fa := newFilterArgs(params.Filter)
	var all []failedRecord
	for _, q := range queues {
		got, _, err := b.scanFailed(ctx, q, fa, params.BeforeID, limit, true)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(x, y failedRecord) int { return cmp.Compare(y.fid, x.fid) })
	out := make([]*backend.FailedJob, 0, min(limit, len(all)))
	for _, r := range all[:min(limit, len(all))] {
		out = append(out, r.row)
	}
	return out, nil
}

// failedOf finds the failed IDs of the jobs ids, of any queues, through
// the index of failed jobs by job ID (script "failedof", one call per
// queue in one pipeline): fids[i] is that of ids[i], 0 when job ids[i] is
// not failed. groups are the IDs by queue (see groupRefs), those of no
// known queue left out.
func (b *Backend) failedOf(ctx context.Context, ids []int64) (groups []*refGroup, fids []int64, err error) {
	groups, _, err = b.groupRefs(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	fids = make([]int64, len(ids))
	if len(groups) == 0 {
		return groups, fids, nil
	}
	calls := make([]*evalCall, len(groups))
	for i, g := range groups {
		args := make([]any, len(g.items))
		for k, j := range g.items {
			args[k] = tsHex(ids[j])
		}
		calls[i] = scriptFailedOf.on(g.q, args)
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, nil, err
	}
	for i, g := range groups {
		v, err := asSlice(calls[i].res)
		if err != nil || len(v) != len(g.items) {
			return nil, nil, fmt.Errorf("find failed jobs of %s: unexpected reply", g.q.name)
		}
		f := fields{v: v}
		for k, j := range g.items {
			if f.str(k) != "" {
				fids[j] = f.id(k, g.idx)
			}
		}
		if f.err != nil {
			return nil, nil, f.err
		}
	}
	return groups, fids, nil
}

// failedFields are the fields FailedGet reads.
var failedFields = []string{"j", "d", "pr", "a", "e", "u", "m", "c", "el", "w", "tn", "ky"}

// FailedGet returns the failed job of the job jobID, found through the
// index of failed jobs by job ID.
func (b *Backend) FailedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	if err := b.begin(fmt.Sprintf("get failed job %d", jobID)); err != nil {
		return nil, err
	}
	row, err := b.failedGet(ctx, jobID)
	if err != nil {
		return nil, b.fail(fmt.Sprintf("get failed job %d", jobID), err)
	}
	return row, nil
}

func (b *Backend) failedGet(ctx context.Context, jobID int64) (*backend.FailedJob, error) {
	_, fids, err := b.failedOf(ctx, []int64{jobID})
	if err != nil {
		return nil, err
	}
	id := fids[0]
	if id == 0 {
		return nil, backend.ErrNotFound
	}
	queue, f, err := b.readByID(ctx, id, (*queueKeys).failedJob, failedFields)
	if err != nil {
		return nil, err
	}
	row := &backend.FailedJob{
		ID: id, JobID: f.id(0, queueIndexOf(id)), Queue: queue,
		Priority:  f.int(2),
		Attempts:  f.int(3),
		Error:     f.str(4),
		UniqueKey: f.str(5),
		Metadata:  f.metadata(6),
		CreatedAt: f.micros(7),
		FailedAt:  idTime(id),
		Errors:    f.attemptErrors(8),
	}
	row.MaxAttempts, row.Type, row.Payload = f.record(1)
	row.WorkflowID, row.Task = f.task(9, queueIndexOf(id))
	row.Key, row.Turn = keyField(f.str(11))
	return row, f.err
}

// FailedReplay moves failed jobs back to ready. By job IDs: every named
// job must be failed (else ErrNotFound, nothing moved); by filter: per
// queue, in chunks of at most backend.ChunkSize. Jobs with a unique key
// get it reserved first; a key held by a live job leaves its job failed
// (Skipped).
func (b *Backend) FailedReplay(ctx context.Context, params backend.FailedReplayParams) (backend.ReplayResult, error) {
	if err := b.begin("replay failed jobs"); err != nil {
		return backend.ReplayResult{}, err
	}
	if len(params.IDs) == 0 {
		if err := backend.ValidateFilter(params.Filter); err != nil {
			return backend.ReplayResult{}, fmt.Errorf("replay failed jobs: %w", err)
		}
	}
	var counts replayCounts
	var err error
	if len(params.IDs) > 0 {
		err = b.replayIDs(ctx, params.IDs, &counts)
	} else {
		err = b.replayFilter(ctx, params.Filter, &counts)
	}
	if err != nil {
		return backend.ReplayResult{}, b.fail("replay failed jobs", err)
	}
	return counts.result(), nil
}

// replayCounts adds up a replay's chunks.
type replayCounts struct {
	replayed, skipped int
	byType            map[backend.TypeCount]int
}

func (c *replayCounts) moved(queue, typ string) {
	if c.byType == nil {
		c.byType = map[backend.TypeCount]int{}
	}
	c.byType[backend.TypeCount{Queue: queue, Type: typ}]++
	c.replayed++
}

func (c *replayCounts) result() backend.ReplayResult {
	res := backend.ReplayResult{Replayed: c.replayed, Skipped: c.skipped}
	for k, n := range c.byType {
		k.Count = n
		res.ByType = append(res.ByType, k)
	}
	return res
}

// replayIDs replays the failed jobs of the jobs ids, all or none.
func (b *Backend) replayIDs(ctx context.Context, ids []int64, counts *replayCounts) error {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	groups, fids, err := b.failedOf(ctx, ids)
	if err != nil {
		return err
	}
	if i := slices.Index(fids, 0); i >= 0 {
		return fmt.Errorf("failed job %d: %w", ids[i], backend.ErrNotFound)
	}
	// Read what the replay needs; a missing job refuses the whole call.
	// at[k] is the group and the index in ids of the job read by keys[k].
	type read struct {
		g *refGroup
		i int
	}
	var keys []string
	var at []read
	for _, g := range groups {
		for _, i := range g.items {
			keys = append(keys, g.q.failedJob(fids[i]))
			at = append(at, read{g, i})
		}
	}
	got, err := b.c.hmgetAll(ctx, keys, "j", "d", "u")
	if err != nil {
		return err
	}
	recs := make([]failedRecord, 0, len(got))
	for k, v := range got {
		g, i := at[k].g, at[k].i
		if v[0] == nil {
			return fmt.Errorf("failed job %d: %w", ids[i], backend.ErrNotFound)
		}
		f := fields{v: v}
		_, typ, _ := f.record(1)
		recs = append(recs, failedRecord{fid: fids[i], jobID: f.id(0, g.idx), queue: g.q.name, typ: typ, uniq: f.str(2)})
		if f.err != nil {
			return f.err
		}
	}
	return b.replayRecords(ctx, recs, true, counts)
}

func (b *Backend) replayFilter(ctx context.Context, filter backend.FailedFilter, counts *replayCounts) error {
	queues, err := b.filterQueues(ctx, filter)
	if err != nil {
		return err
	}
	fa := newFilterArgs(filter)
	for _, q := range queues {
		upper := int64(0)
		for {
			recs, next, err := b.scanFailed(ctx, q, fa, upper, backend.ChunkSize, false)
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				if err := b.replayRecords(ctx, recs, false, counts); err != nil {
					return err
				}
			}
			if next == 0 {
				break
			}
			upper = next
		}
	}
	return nil
}

// replayRecords replays failed jobs (at most a chunk): it reserves their
// unique keys, then moves the jobs whose keys it got, one script per
// queue. strict: all or nothing (a job gone meanwhile fails the call with
// ErrNotFound; other queues' scripts may have moved theirs).
//
// A replay sent again after its reply was lost finds its jobs live and
// their keys held by their own IDs: the keys stay theirs whatever the
// second replay does (reserveUnique tells such keys apart).
func (b *Backend) replayRecords(ctx context.Context, recs []failedRecord, strict bool, counts *replayCounts) error {
	var claims []uniqueClaim
	for _, r := range recs {
		if r.uniq != "" {
			claims = append(claims, uniqueClaim{key: r.uniq, id: r.jobID})
		}
	}
	if err := b.reserveUnique(ctx, claims, false); err != nil {
		return err
	}
	skip := map[int64]bool{}
	for _, c := range claims {
		if c.holder != 0 {
			skip[c.id] = true
		}
	}
	var order []string
	byQueue := map[string][]failedRecord{}
	for _, r := range recs {
		if skip[r.jobID] {
			counts.skipped++
			continue
		}
		if _, ok := byQueue[r.queue]; !ok {
			order = append(order, r.queue)
		}
		byQueue[r.queue] = append(byQueue[r.queue], r)
	}
	strictArg := "0"
	if strict {
		strictArg = "1"
	}
	calls := make([]*evalCall, len(order))
	for i, q := range order {
		k := b.keys.queue(q)
		keys := scriptReplay.keysFor(k, len(byQueue[q]))
		args := []any{k.channel, b.origin, strictArg}
		for _, r := range byQueue[q] {
			keys = scriptReplay.itemKeys(keys, k, r.fid, r.jobID)
			args = append(args, tsHex(r.fid), tsHex(r.jobID))
		}
		calls[i] = scriptReplay.call(keys, args)
	}
	callErr := b.c.evalAll(ctx, calls, false)
	// unmoved are the jobs known to be still failed: their replay never
	// reached the server, or its reply says it left them. A replay whose
	// reply was lost may have moved its jobs, which keep their keys.
	unmoved := map[int64]bool{}
	var missing error
	for i, call := range calls {
		if call.err != nil {
			if isNotSent(call.err) {
				for _, r := range byQueue[order[i]] {
					unmoved[r.jobID] = true
				}
			}
			continue
		}
		v, err := asSlice(call.res)
		if err != nil || len(v) < 2 {
			return fmt.Errorf("replay %s: unexpected reply", order[i])
		}
		f := fields{v: v}
		recs := byQueue[order[i]]
		if f.int(0) == -1 {
			r := recs[f.int(1)-1]
			missing = cmpErr(missing, fmt.Errorf("failed job %d: %w", r.jobID, backend.ErrNotFound))
			for _, r := range recs {
				unmoved[r.jobID] = true
			}
			continue
		}
		if len(v) < 3 {
			return fmt.Errorf("replay %s: unexpected reply", order[i])
		}
		moved := map[int]bool{}
		for j := 3; j < len(v); j++ {
			item := f.int(j)
			if item < 0 && -item <= len(recs) {
				// A negated item number: a task of a workflow a user
				// cancelled, left failed.
				counts.skipped++
				continue
			}
			k := item - 1
			if k < 0 || k >= len(recs) {
				return fmt.Errorf("replay %s: unexpected item number %v", order[i], v[j])
			}
			moved[k] = true
			counts.moved(recs[k].queue, recs[k].typ)
		}
		for k, r := range recs {
			if !moved[k] {
				unmoved[r.jobID] = true
			}
		}
		b.notifier.local(order[i], f.int(1) == 1, int64(f.int(2)))
		if f.err != nil {
			return f.err
		}
	}
	// Keys reserved for jobs that certainly did not move go back (and
	// never a key the job held before: see reserveUnique).
	var unused []uniqueClaim
	for _, c := range claims {
		if unmoved[c.id] {
			unused = append(unused, c)
		}
	}
	b.releaseUniqueBestEffort(ctx, unused)
	if callErr != nil {
		return callErr
	}
	return missing
}

// FailedPurge deletes failed jobs: by job IDs, one script per queue; by
// filter, per queue in chunks of at most backend.ChunkSize; with
// KeepNewest, after finding the failed ID of the KeepNewest-th newest
// match across the covered queues, every match below it.
func (b *Backend) FailedPurge(ctx context.Context, params backend.FailedPurgeParams) (int, error) {
	if err := b.begin("purge failed jobs"); err != nil {
		return 0, err
	}
	err := backend.ValidatePurge(params)
	if err == nil && len(params.IDs) == 0 {
		err = backend.ValidateFilter(params.Filter)
	}
	if err != nil {
		return 0, fmt.Errorf("purge failed jobs: %w", err)
	}
	var n int
	if len(params.IDs) > 0 {
		n, err = b.purgeIDs(ctx, params.IDs)
	} else {
		n, err = b.purgeFilter(ctx, params.Filter, params.KeepNewest)
	}
	return n, b.fail("purge failed jobs", err)
}

// purgeIDs deletes the failed jobs of the jobs ids; jobs that are not
// failed are not counted.
func (b *Backend) purgeIDs(ctx context.Context, ids []int64) (int, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	groups, fids, err := b.failedOf(ctx, ids)
	if err != nil {
		return 0, err
	}
	var calls []*evalCall
	for _, g := range groups {
		keys := scriptPurge.keysFor(g.q, len(g.items))
		args := make([]any, 0, len(g.items))
		for _, j := range g.items {
			if fids[j] != 0 {
				keys = scriptPurge.itemKeys(keys, g.q, fids[j])
				args = append(args, tsHex(fids[j]))
			}
		}
		if len(args) > 0 {
			calls = append(calls, scriptPurge.call(keys, args))
		}
	}
	if len(calls) == 0 {
		return 0, nil
	}
	err = b.c.evalAll(ctx, calls, false)
	n := 0
	for _, call := range calls {
		if call.err == nil {
			k, _ := asInt(call.res)
			n += int(k)
		}
	}
	return n, err
}

func (b *Backend) purgeFilter(ctx context.Context, filter backend.FailedFilter, keep int) (int, error) {
	queues, err := b.filterQueues(ctx, filter)
	if err != nil || len(queues) == 0 {
		return 0, err
	}
	fa := newFilterArgs(filter)
	upper := int64(0) // delete only below this failed ID; 0: everything
	if keep > 0 {
		// keep+1 from each queue: whether the newest keep across them
		// leave any behind, and which failed ID is the last kept.
		var newest []int64
		for _, q := range queues {
			got, _, err := b.scanFailed(ctx, q, fa, 0, keep+1, false)
			if err != nil {
				return 0, err
			}
			for _, r := range got {
				newest = append(newest, r.fid)
			}
		}
		if len(newest) <= keep {
			return 0, nil
		}
		slices.SortFunc(newest, func(x, y int64) int { return cmp.Compare(y, x) })
		upper = newest[keep-1]
	}
	total := 0
	for _, q := range queues {
		k := b.keys.queue(q)
		cursor := ""
		if upper > 0 {
			idx, ok, err := b.reg.lookup(ctx, q)
			if err != nil || !ok {
				return total, err
			}
			cursor = tsBelow(upper, idx)
		}
		for {
			res, err := scriptPurgeScan.eval(ctx, b.c, scriptPurgeScan.keysOf(k),
				[]any{cursor, fa.before, fa.older, fa.typ, backend.ChunkSize, scanBudget, fa.key, fa.keepHeld})
			if err != nil {
				return total, err
			}
			v, err := asSlice(res)
			if err != nil || len(v) != 2 {
				return total, fmt.Errorf("purge %s: unexpected reply", q)
			}
			f := fields{v: v}
			total += f.int(1)
			cursor = f.str(0)
			if f.err != nil {
				return total, f.err
			}
			if cursor == "" {
				break
			}
		}
	}
	return total, nil
}

// indexFailed indexes the failed records of every queue by job ID (the
// key failedByJob, which layouts before 7 lack), in calls of at most
// backend.ChunkSize records, so no call blocks the server for long.
func (b *Backend) indexFailed(ctx context.Context) error {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return err
	}
	for _, name := range queues {
		k := b.keys.queue(name)
		for cursor := ""; ; {
			res, err := scriptFailedIdx.eval(ctx, b.c, scriptFailedIdx.keysOf(k), []any{cursor, backend.ChunkSize})
			if err == nil {
				cursor, err = asString(res)
			}
			if err != nil {
				return fmt.Errorf("index failed jobs of queue %s: %w", name, err)
			}
			if cursor == "" {
				break
			}
		}
	}
	return nil
}
