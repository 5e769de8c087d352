package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq/backend"
)

// claimFields is the number of reply values per claimed job, after
// claimHeader values about the claim.
const (
	claimFields = 14
	claimHeader = 7
)

// JobClaim reserves up to params.Max ready jobs in claim order: priority,
// then the time each became due, then ID. From one queue that is one
// script call. From several it is two pipelined rounds: the first looks at
// each queue's best jobs (promoting due delayed ones), the second claims
// from each queue its share of the best params.Max across them, so the
// order holds across queues as of the first round.
func (b *Backend) JobClaim(ctx context.Context, params backend.ClaimParams) ([]*backend.JobRow, error) {
	if err := b.begin("claim jobs"); err != nil {
		return nil, err
	}
	if err := backend.ValidateClaim(params); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	queues := slices.Compact(slices.Sorted(slices.Values(params.Queues)))
	lease := leaseMicros(params.Lease)
	var rows []*backend.JobRow
	var err error
	if len(queues) == 1 {
		rows, err = b.claimFrom(ctx, map[string]int{queues[0]: params.Max}, lease)
	} else {
		var shares map[string]int
		shares, err = b.shares(ctx, queues, params.Max)
		if err == nil && len(shares) > 0 {
			rows, err = b.claimFrom(ctx, shares, lease)
		}
	}
	if err != nil {
		return nil, b.fail("claim jobs", err)
	}
	if rows == nil {
		rows = []*backend.JobRow{}
	}
	return rows, nil
}

// shares decides how many jobs to claim from each queue: the queues'
// shares of the best max ready jobs across them.
func (b *Backend) shares(ctx context.Context, queues []string, max int) (map[string]int, error) {
	calls := make([]*evalCall, len(queues))
	for i, q := range queues {
		k := b.keys.queue(q)
		calls[i] = scriptPeek.on(k, []any{max, promoteLimit})
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	type best struct {
		queue string
		score float64 // -priority
		turn  int64   // 0 for a job without a key
		due   int64   // µs since 1970
		id    int64
	}
	var all []best
	for i, call := range calls {
		v, err := asSlice(call.res)
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			continue
		}
		idx, _, err := b.reg.lookup(ctx, queues[i])
		if err != nil {
			return nil, err
		}
		if len(v)%4 != 0 {
			return nil, fmt.Errorf("peek %s: unexpected reply", queues[i])
		}
		f := fields{v: v}
		for j := 0; j+3 < len(v); j += 4 {
			score, err1 := strconv.ParseFloat(f.str(j+1), 64)
			due, err2 := strconv.ParseInt(f.str(j+2), 10, 64)
			turn, err3 := strconv.ParseInt(f.str(j+3), 10, 64)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("peek %s: unexpected score %v, due time %v or turn %v", queues[i], v[j+1], v[j+2], v[j+3])
			}
			all = append(all, best{queue: queues[i], score: score, turn: turn, due: due, id: f.id(j, idx)})
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	// Claim order: scores are -priority; equal ones order by turn, due
	// time, then by ID (IDs grow with time across queues too).
	slices.SortFunc(all, func(x, y best) int {
		if c := cmp.Compare(x.score, y.score); c != 0 {
			return c
		}
		if c := cmp.Compare(x.turn, y.turn); c != 0 {
			return c
		}
		if c := cmp.Compare(x.due, y.due); c != 0 {
			return c
		}
		return cmp.Compare(x.id, y.id)
	})
	shares := map[string]int{}
	for _, e := range all[:min(max, len(all))] {
		shares[e.queue]++
	}
	return shares, nil
}

// claimFrom claims shares[q] jobs from each queue q, in one pipeline.
func (b *Backend) claimFrom(ctx context.Context, shares map[string]int, lease string) ([]*backend.JobRow, error) {
	queues := make([]string, 0, len(shares))
	calls := make([]*evalCall, 0, len(shares))
	for q, n := range shares {
		k := b.keys.queue(q)
		queues = append(queues, q)
		calls = append(calls, scriptClaim.on(k, []any{n, lease, promoteLimit, k.channel, b.origin}))
	}
	err := b.c.evalAll(ctx, calls, false)
	var rows []*backend.JobRow
	var first error
	for i, call := range calls {
		if call.err != nil {
			continue
		}
		// A claim that ran hands out its jobs even when another queue's
		// failed: dropping them would leave them reserved until the lease
		// runs out.
		got, left, err := b.readClaim(ctx, queues[i], call.res)
		if err != nil && first == nil {
			first = err
		}
		rows = append(rows, got...)
		if len(got) < shares[queues[i]] && left > 0 && len(shares) > 1 {
			// Jobs came in after the first round: let idle workers know.
			b.notifier.local(queues[i], true, -1)
		}
	}
	if len(rows) > 0 {
		if len(shares) > 1 {
			backend.SortClaimOrder(rows)
		}
		return rows, first
	}
	if err != nil {
		return nil, err
	}
	return nil, first
}

// readClaim reads a claim script's reply: the claimed rows and how many
// ready jobs are left in the queue. It tells the notifier the queue's next
// due time.
func (b *Backend) readClaim(ctx context.Context, queue string, res any) ([]*backend.JobRow, int, error) {
	v, err := asSlice(res)
	if err != nil || len(v) < claimHeader || (len(v)-claimHeader)%claimFields != 0 {
		return nil, 0, fmt.Errorf("claim %s: unexpected reply", queue)
	}
	expired, ok := v[5].([]any)
	if !ok {
		return nil, 0, fmt.Errorf("claim %s: unexpected reply", queue)
	}
	idx := 0
	if len(v) > claimHeader || len(expired) > 0 {
		// The queue has jobs, so it is registered (usually known here).
		var ok bool
		if idx, ok, err = b.reg.lookup(context.WithoutCancel(ctx), queue); err != nil || !ok {
			return nil, 0, fmt.Errorf("claim %s: queue index: %v", queue, err)
		}
	}
	var expErr error
	if len(expired) > 0 {
		expErr = b.claimExpired(ctx, queue, idx, expired, v[6])
	}
	f := fields{v: v}
	now, lease, left := f.str(0), f.micros(1), f.int(2)
	if next := f.str(3); next != "" {
		due, err1 := strconv.ParseFloat(next, 64)
		at, err2 := strconv.ParseInt(now, 10, 64)
		if err1 == nil && err2 == nil {
			// Due already (more than one claim promotes): wake at once.
			b.notifier.local(queue, false, max(int64(due)-at, 0))
		}
	}
	reserved := f.micros(0)
	rows := make([]*backend.JobRow, 0, (len(v)-claimHeader)/claimFields)
	for i := claimHeader; i < len(v); i += claimFields {
		row := &backend.JobRow{
			ID:          f.id(i, idx),
			Queue:       queue,
			Priority:    f.int(i + 2),
			Attempts:    f.int(i + 3),
			Releases:    f.int(i + 4),
			AvailableAt: f.micros(i + 5),
			CreatedAt:   f.micros(i + 6),
			LastError:   f.str(i + 7),
			UniqueKey:   f.str(i + 8),
			Metadata:    f.metadata(i + 9),
			Token:       f.int64(i + 10),
			Status:      backend.StateReserved,
			ReservedAt:  reserved,
			LeaseUntil:  lease,
		}
		row.MaxAttempts, row.Type, row.Payload = f.record(i + 1)
		row.WorkflowID, row.Task = f.task(i+11, idx)
		row.Key, row.Turn = keyField(f.str(i + 13))
		rows = append(rows, row)
	}
	if ctl := f.str(4); ctl != "" {
		b.limited(queue, ctl, now, rows)
	}
	return rows, left, cmpErr(f.err, expErr)
}

// jobFields are the fields JobGet reads.
var jobFields = []string{"d", "pr", "a", "r", "av", "c", "e", "u", "m", "ra", "lu", "cx", "k", "el", "w", "tn", "ky",
	"pk", "pp", "pm", "pa", "dl"}

// JobGet returns one live job by ID.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if err := b.begin(fmt.Sprintf("get job %d", id)); err != nil {
		return nil, err
	}
	row, err := b.jobGet(ctx, id)
	if err != nil {
		return nil, b.fail(fmt.Sprintf("get job %d", id), err)
	}
	return row, nil
}

func (b *Backend) jobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	queue, f, err := b.readByID(ctx, id, (*queueKeys).job, jobFields)
	if err != nil {
		return nil, err
	}
	row := &backend.JobRow{
		ID:          id,
		Queue:       queue,
		Priority:    f.int(1),
		Attempts:    f.int(2),
		Releases:    f.int(3),
		AvailableAt: f.micros(4),
		CreatedAt:   f.micros(5),
		LastError:   f.str(6),
		UniqueKey:   f.str(7),
		Metadata:    f.metadata(8),
		ReservedAt:  f.micros(9),
		LeaseUntil:  f.micros(10),
		Token:       f.int64(12),
		Errors:      f.attemptErrors(13),
		Deadline:    f.micros(21),
		Status:      backend.StatePending,
	}
	row.MaxAttempts, row.Type, row.Payload = f.record(0)
	row.WorkflowID, row.Task = f.task(14, queueIndexOf(id))
	row.Key, row.Turn = keyField(f.str(16))
	if row.AvailableAt.IsZero() {
		row.AvailableAt = row.CreatedAt // not stored when the same
	}
	if !row.LeaseUntil.IsZero() {
		row.Status = backend.StateReserved
		if f.str(11) != "" {
			row.Status = backend.StateCancelling
		}
		// Progress counts only while the claim that reported it holds
		// the job (see progress in scripts.lua).
		if pk := f.str(17); pk != "" && pk == f.str(12) {
			row.Progress = &backend.Progress{Percent: f.int(18), Message: f.str(19), At: f.micros(20)}
		}
	}
	return row, f.err
}

// readByID reads fields of the hash that key names for the ID id in its
// queue: backend.ErrNotFound when the ID names no known queue or the hash
// does not exist (its first field is missing).
func (b *Backend) readByID(ctx context.Context, id int64, key func(*queueKeys, int64) string, names []string) (string, *fields, error) {
	queue, ok, err := b.reg.name(ctx, queueIndexOf(id))
	if err != nil {
		return "", nil, err
	}
	if !ok || id <= 0 {
		return "", nil, backend.ErrNotFound
	}
	got, err := b.c.hmgetAll(ctx, []string{key(b.keys.queue(queue), id)}, names...)
	if err != nil {
		return "", nil, err
	}
	if got[0][0] == nil {
		return "", nil, backend.ErrNotFound
	}
	return queue, &fields{v: got[0]}, nil
}

// leaseMicros is a lease as whole µs for a script.
func leaseMicros(d time.Duration) string { return strconv.FormatInt(microsCeil(d), 10) }

// adoptLimit bounds the jobs one call of the script "adopt" moves, and
// one of "expired", which moves those a layout-4 process still running
// readied since, on every lease sweep (see adopt in scripts.lua).
const adoptLimit = 1000

// adoptReady moves the ready jobs of every queue from the ready set of
// layout 4 into that of layout 5 (see LayoutVersion), in calls of at most
// adoptLimit jobs, so no call blocks the server for long.
func (b *Backend) adoptReady(ctx context.Context) error {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return err
	}
	for _, name := range queues {
		k := b.keys.queue(name)
		for {
			res, err := scriptAdopt.eval(ctx, b.c, scriptAdopt.keysOf(k), []any{adoptLimit})
			if err != nil {
				return fmt.Errorf("queue %s: %w", name, err)
			}
			n, err := asInt(res)
			if err != nil {
				return fmt.Errorf("queue %s: %w", name, err)
			}
			if n < adoptLimit {
				break
			}
		}
	}
	return nil
}
