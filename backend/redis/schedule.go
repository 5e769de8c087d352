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

// Schedules (backend.ScheduleStore). A schedule's definition lives in the
// prefix-wide hash P:schedules, for listing; its last tick lives in the
// hash P:{Q}:ts of the queue Q its jobs go to, so that the script "tick"
// can compare-and-set it and insert the tick's job in one slot, atomically.
// When a schedule is re-registered with another queue, its record is
// carried into the new queue's hash (script "tickmove", which keeps a later
// tick already there); until every process runs the new definition, those
// with the old one still tick into the old queue, so a tick may then be
// enqueued once in each queue.

var _ backend.ScheduleStore = (*Backend)(nil)

// ScheduleUpsert implements backend.ScheduleStore: one script call writes
// every definition, then the last ticks are read from their queues.
func (b *Backend) ScheduleUpsert(ctx context.Context, defs []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	const op = "register schedules"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	for _, d := range defs {
		if err := backend.ValidateScheduleDef(d); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	if len(defs) == 0 {
		return []backend.ScheduleRow{}, nil
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	old, err := b.c.hmget(ctx, b.keys.schedules, names)
	if err != nil {
		return nil, b.fail(op, err)
	}
	args := make([]any, 0, 1+4*len(defs))
	args = append(args, len(defs))
	for _, d := range defs {
		args = append(args, d.Name, d.Queue, d.Type, d.Spec)
	}
	res, err := scriptSchedule.eval(ctx, b.c, scriptSchedule.prefixKeys(b.keys), args)
	if err != nil {
		return nil, b.fail(op, err)
	}
	v, err := asSlice(res)
	if err != nil || len(v) != len(defs) {
		return nil, b.fail(op, fmt.Errorf("unexpected reply %v", res))
	}
	recs := make(map[string]string, len(defs))
	for i, d := range defs {
		s, err := asString(v[i])
		if err != nil {
			return nil, b.fail(op, err)
		}
		recs[d.Name] = s
	}
	for i, d := range defs {
		if old[i] == "" {
			continue
		}
		prev, err := parseScheduleRecord(d.Name, old[i])
		if err != nil {
			return nil, b.fail(op, err)
		}
		if prev.Queue != d.Queue {
			if err := b.moveTick(ctx, d.Name, prev.Queue, d.Queue); err != nil {
				return nil, b.fail(op, err)
			}
		}
	}
	rows, err := b.scheduleRows(ctx, recs)
	if err != nil {
		return nil, b.fail(op, err)
	}
	out := make([]backend.ScheduleRow, len(defs))
	for i, d := range defs {
		out[i] = rows[d.Name]
	}
	return out, nil
}

// moveTick carries schedule name's last-tick record from queue from's hash
// into queue to's.
func (b *Backend) moveTick(ctx context.Context, name, from, to string) error {
	recs, err := b.c.hgetEach(ctx, []string{b.keys.queue(from).ticks}, []string{name})
	if err != nil || recs[0] == "" {
		return err
	}
	_, err = scriptTickMove.eval(ctx, b.c, scriptTickMove.keysOf(b.keys.queue(to)), []any{name, recs[0]})
	return err
}

// ScheduleTick implements backend.ScheduleStore with the script "tick".
// The schedule's existence is checked first, apart: definitions are never
// deleted, so the check cannot go stale.
func (b *Backend) ScheduleTick(ctx context.Context, p backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	op := "enqueue tick of schedule " + p.Name
	var res backend.ScheduleTickResult
	if err := b.begin(op); err != nil {
		return res, err
	}
	if err := backend.ValidateScheduleTick(p); err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	exists, err := b.c.existsField(ctx, b.keys.schedules, p.Name)
	if err != nil {
		return res, b.fail(op, err)
	}
	if !exists {
		return res, fmt.Errorf("%s: %w (a scheduler registers it first)", op, backend.ErrNotFound)
	}
	j := p.Job
	idx, err := b.reg.index(ctx, j.Queue)
	if err != nil {
		return res, b.fail(op, err)
	}
	q := b.keys.queue(j.Queue)
	delay, md := "", ""
	if !j.RunAt.IsZero() {
		// A scheduled job has no RunAt (the runtime refuses it); should a
		// caller set one, it becomes the delay from now.
		if d := time.Until(j.RunAt); d > 0 {
			delay = strconv.FormatInt(microsCeil(d), 10)
		}
	} else if j.Delay > 0 {
		delay = strconv.FormatInt(microsCeil(j.Delay), 10)
	}
	if len(j.Metadata) > 0 {
		md = jsonstr.Object(j.Metadata)
	}
	args := []any{q.channel, b.origin, p.Name, micro(p.Tick), appendRecord(nil, &j), j.Priority, delay, md, j.Queue, j.Key}
	reply, err := scriptTick.eval(ctx, b.c, scriptTick.keysOf(q), args)
	if err != nil {
		return res, b.fail(op, err)
	}
	v, err := asSlice(reply)
	if err != nil || len(v) < 2 {
		return res, b.fail(op, fmt.Errorf("unexpected reply %v", reply))
	}
	f := fields{v: v}
	if f.int(0) == 0 {
		res.LastTick = f.micros(1)
		return res, b.fail(op, f.err)
	}
	if len(v) != 4 {
		return res, b.fail(op, fmt.Errorf("unexpected reply %v", reply))
	}
	ts, woke, due := int64(f.int(1)), f.int(2), int64(f.int(3))
	if f.err != nil {
		return res, b.fail(op, f.err)
	}
	b.notifier.local(q.name, woke == 1, due)
	return backend.ScheduleTickResult{Enqueued: true, JobID: makeID(ts, idx), LastTick: time.UnixMicro(p.Tick.UnixMicro())}, nil
}

// ScheduleList implements backend.ScheduleStore. It only reads: queues
// named by schedules but never registered have no ticks to read.
func (b *Backend) ScheduleList(ctx context.Context) ([]backend.ScheduleRow, error) {
	const op = "list schedules"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	recs, err := b.c.hgetAll(ctx, b.keys.schedules)
	if err != nil {
		return nil, b.fail(op, err)
	}
	rows, err := b.scheduleRows(ctx, recs)
	if err != nil {
		return nil, b.fail(op, err)
	}
	out := make([]backend.ScheduleRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	sortSchedules(out)
	return out, nil
}

// scheduleRows reads definitions (name -> record of P:schedules) and
// their last ticks, in one pipeline over the queues' hashes.
func (b *Backend) scheduleRows(ctx context.Context, recs map[string]string) (map[string]backend.ScheduleRow, error) {
	rows := make(map[string]backend.ScheduleRow, len(recs))
	names := make([]string, 0, len(recs))
	keys := make([]string, 0, len(recs))
	for name, rec := range recs {
		r, err := parseScheduleRecord(name, rec)
		if err != nil {
			return nil, err
		}
		rows[name] = r
		names = append(names, name)
		keys = append(keys, b.keys.queue(r.Queue).ticks)
	}
	if len(keys) == 0 {
		return rows, nil
	}
	ticks, err := b.c.hgetEach(ctx, keys, names)
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if ticks[i] == "" {
			continue
		}
		r := rows[name]
		if err := b.parseTickRecord(ctx, &r, ticks[i]); err != nil {
			return nil, err
		}
		rows[name] = r
	}
	return rows, nil
}

// parseScheduleRecord reads "<created µs> <registered µs> <queue>\n<type>\n<spec>".
func parseScheduleRecord(name, rec string) (backend.ScheduleRow, error) {
	head, rest, ok1 := strings.Cut(rec, "\n")
	typ, spec, ok2 := strings.Cut(rest, "\n")
	parts := strings.Split(head, " ")
	if !ok1 || !ok2 || len(parts) != 3 {
		return backend.ScheduleRow{}, fmt.Errorf("malformed schedule record %.60q", rec)
	}
	created, err1 := strconv.ParseInt(parts[0], 10, 64)
	registered, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return backend.ScheduleRow{}, fmt.Errorf("malformed schedule record %.60q", rec)
	}
	return backend.ScheduleRow{Name: name, Spec: spec, Queue: parts[2], Type: typ,
		CreatedAt: time.UnixMicro(created), RegisteredAt: time.UnixMicro(registered)}, nil
}

// parseTickRecord reads "<last tick µs> <job ts hex> <enqueued µs> <job's
// queue>" into r.
func (b *Backend) parseTickRecord(ctx context.Context, r *backend.ScheduleRow, rec string) error {
	parts := strings.Split(rec, " ")
	if len(parts) != 4 {
		return fmt.Errorf("malformed tick record %.60q", rec)
	}
	tick, err1 := strconv.ParseInt(parts[0], 10, 64)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("malformed tick record %.60q", rec)
	}
	r.LastTick, r.LastEnqueuedAt = time.UnixMicro(tick), time.UnixMicro(at)
	// The job's queue was registered before the tick was written.
	idx, ok, err := b.reg.lookup(ctx, parts[3])
	if err != nil {
		return err
	}
	if ok {
		if r.LastJobID, err = parseTS(parts[1], idx); err != nil {
			return err
		}
	}
	return nil
}

func sortSchedules(rows []backend.ScheduleRow) {
	slices.SortFunc(rows, func(x, y backend.ScheduleRow) int { return strings.Compare(x.Name, y.Name) })
}
