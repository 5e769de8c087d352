package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jobq/jobq/backend"
)

var _ backend.KeyController = (*Backend)(nil)

// nullString is s as a column value: NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes is b as a column value: NULL for nil, so a job kept without
// a result reads back none rather than an empty one.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// turns hands out the turns of the keyed jobs of one insert (see
// backend.KeyController): one more than the highest turn among the live
// jobs of the key and than the lowest turn among the queue's pending keyed
// jobs. Both are read once per key and per queue, then kept up to date
// with the batch's own jobs, so a batch gets the turns its jobs would get
// inserted one by one, in order.
type turns struct {
	ctx     context.Context
	tx      *sql.Tx
	maxTurn map[[2]string]int64 // by queue and key
	minTurn map[string]int64    // by queue; 0: no pending keyed job
	// qQueueMinTurn, prepared on the transaction (which closes it) at the
	// first keyed job of the insert.
	minStmt *sql.Stmt
}

// prefetch reads the highest turns of the keys of params' jobs (those of
// idx with a key) that it has not read yet, in one statement per queue:
// next then finds them (see qKeysMaxTurn).
func (t *turns) prefetch(params []backend.InsertParams, idx []int) error {
	if err := t.prepare(); err != nil {
		return err
	}
	want := map[string][]string{}
	for _, i := range idx {
		p := params[i]
		if p.Key == "" {
			continue
		}
		k := [2]string{p.Queue, p.Key}
		if _, ok := t.maxTurn[k]; !ok {
			t.maxTurn[k] = 0 // no live job unless the statement says otherwise
			want[p.Queue] = append(want[p.Queue], p.Key)
		}
	}
	for queue, keys := range want {
		list, err := json.Marshal(keys)
		if err != nil {
			return fmt.Errorf("read the turns of queue %s's keys: %w", queue, err)
		}
		rows, err := t.tx.QueryContext(t.ctx, qKeysMaxTurn, queue, string(list))
		if err != nil {
			return fmt.Errorf("read the turns of queue %s's keys: %w", queue, err)
		}
		for rows.Next() {
			var key string
			var turn int64
			if err := rows.Scan(&key, &turn); err != nil {
				_ = rows.Close()
				return fmt.Errorf("read the turns of queue %s's keys: %w", queue, err)
			}
			t.maxTurn[[2]string{queue, key}] = turn
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read the turns of queue %s's keys: %w", queue, err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the turns of queue %s's keys: %w", queue, err)
		}
	}
	return nil
}

// prepare makes the maps and statements at the first keyed job.
func (t *turns) prepare() error {
	if t.maxTurn != nil {
		return nil
	}
	t.maxTurn, t.minTurn = map[[2]string]int64{}, map[string]int64{}
	var err error
	if t.minStmt, err = t.tx.PrepareContext(t.ctx, qQueueMinTurn); err != nil {
		return fmt.Errorf("prepare the turn lookups: %w", err)
	}
	return nil
}

// next returns the turn of the next job of key in queue.
func (t *turns) next(queue, key string) (int64, error) {
	if err := t.prepare(); err != nil {
		return 0, err
	}
	k := [2]string{queue, key}
	top, ok := t.maxTurn[k]
	if !ok {
		return 0, fmt.Errorf("turn of key %q of queue %s: its key was not read first (prefetch)", key, queue)
	}
	low, ok := t.minTurn[queue]
	if !ok {
		if err := t.minStmt.QueryRowContext(t.ctx, queue).Scan(&low); err != nil {
			return 0, fmt.Errorf("read the turns of queue %s: %w", queue, err)
		}
	}
	turn := max(top, low) + 1
	t.maxTurn[k] = turn
	if low == 0 || turn < low {
		low = turn
	}
	t.minTurn[queue] = low
	return turn, nil
}

// keyWalkBudget is how many entries of the claim order a claim of a queue
// with key rules reads for a claim of want jobs before it turns to the
// keys one by one (see claimKeyed).
func keyWalkBudget(want int) int { return 2*want + 64 }

// keyClaim is one claim of a queue with key rules, inside the claim's
// write transaction: every count it reads is the file's, under the write
// lock, so no other claimer (of any process) can take a slot it sees
// free.
type keyClaim struct {
	ctx   context.Context
	tx    *sql.Tx
	st    *stmts
	queue string
	rules backend.KeyRules
	now   int64
	keys  map[string]*keyState
	// reserved counts the reserved jobs of every key that has some, read
	// in one statement when the claim first needs a key's state: one
	// probe per key walked cost a claim of 100 keyed jobs 100 statements.
	reserved map[string]int
	// The probes of state, bound to the transaction once per claim.
	head, failed *sql.Stmt
}

// keyState is what a claim knows of one key: its reserved jobs (those it
// takes included) and, for an ordered key, its head and whether it is
// held.
type keyState struct {
	reserved int
	head     int64
	held     bool
}

// state reads the state of key once per claim.
func (c *keyClaim) state(key string) (*keyState, error) {
	if s, ok := c.keys[key]; ok {
		return s, nil
	}
	s := &keyState{}
	if c.head == nil {
		c.head = c.tx.StmtContext(c.ctx, c.st.keyHead)
		c.failed = c.tx.StmtContext(c.ctx, c.st.keyFailed)
	}
	if err := c.readReserved(); err != nil {
		return nil, err
	}
	s.reserved = c.reserved[key]
	// An ordered key with a job reserved is blocked whatever its head.
	if c.rules.Ordered && s.reserved == 0 {
		err := c.head.QueryRowContext(c.ctx, c.queue, key).Scan(&s.head)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("read the head of key %q: %w", key, err)
		}
		if c.rules.Policy() == backend.KeyHold {
			var one int
			switch err := c.failed.QueryRowContext(c.ctx, c.queue, key).Scan(&one); {
			case err == nil:
				s.held = true
			case !errors.Is(err, sql.ErrNoRows):
				return nil, fmt.Errorf("read the failed jobs of key %q: %w", key, err)
			}
		}
	}
	c.keys[key] = s
	return s, nil
}

// readReserved reads the reserved counts of the queue's keys, once per
// claim (until a fallback clears them).
func (c *keyClaim) readReserved() error {
	if c.reserved != nil {
		return nil
	}
	rows, err := c.tx.StmtContext(c.ctx, c.st.keyReserved).QueryContext(c.ctx, c.queue)
	type count struct {
		key string
		n   int
	}
	counts, err := scanAll(queried{rows, err}, func(r *sql.Rows) (k count, err error) { return k, r.Scan(&k.key, &k.n) })
	if err != nil {
		return fmt.Errorf("count the reserved jobs of queue %s's keys: %w", c.queue, err)
	}
	c.reserved = make(map[string]int, len(counts))
	for _, k := range counts {
		c.reserved[k.key] = k.n
	}
	return nil
}

// allows reports whether the rules let the claim take job id of a key in
// state s: an ordered key's head when none of its jobs is reserved and it
// is not held, else a job while the key is under its limit.
func (c *keyClaim) allows(s *keyState, id int64) bool {
	if c.rules.Ordered {
		return s.reserved == 0 && !s.held && s.head == id
	}
	return s.reserved < c.rules.Limit
}

// claimKeyed claims up to want due jobs of queue q, whose key rules are
// rules, in claim order, skipping the jobs their keys' rules hold back;
// jobs without a key are taken as they come. base holds the claim's
// reserved_at (the time due jobs are due by) and lease_until.
//
// It first walks the start of the claim order (keyWalkBudget entries),
// which is enough when most keys can run: keys take turns, so a blocked
// key has about one entry per turn among the others'. When the walk ends
// short of want with more entries behind (a blocked key's backlog filling
// the start of the order, as when the queue holds little else), the rest
// is taken key by key: the next jobs of each key that can run and of the
// jobs without a key at each priority, merged in claim order. Either way
// no claim reads a blocked key's whole backlog.
func claimKeyed(ctx context.Context, tx *sql.Tx, st *stmts, q string, rules backend.KeyRules, want int,
	base []any, claimed *backend.JobRow, jobs []*backend.JobRow) ([]*backend.JobRow, error) {
	c := &keyClaim{ctx: ctx, tx: tx, st: st, queue: q, rules: rules, now: base[0].(int64), keys: map[string]*keyState{}}
	budget := keyWalkBudget(want)
	take, walked, err := c.walk(st, want, budget)
	if err != nil {
		return jobs, err
	}
	n := len(jobs)
	if jobs, err = claimIDs(ctx, tx, st, base, take, claimed, jobs); err != nil {
		return jobs, err
	}
	if len(jobs)-n == want || walked < budget {
		return jobs, nil
	}
	// The walk's reservations are written: the keys' states are read
	// again from the file.
	clear(c.keys)
	c.reserved = nil
	more, err := c.byKey(want - (len(jobs) - n))
	if err != nil {
		return jobs, err
	}
	return claimIDs(ctx, tx, st, base, more, claimed, jobs)
}

// walk reads the start of the claim order, at most budget entries, and
// returns the IDs the rules let the claim take, up to want, and how many
// entries it read. It stops reading once it has want: with most keys
// free, that is little more than want entries, not the whole budget.
func (c *keyClaim) walk(st *stmts, want, budget int) (take []int64, walked int, err error) {
	// The reserved counts are read before the walk's rows are open, so a
	// limit costs no statement in between.
	if err := c.readReserved(); err != nil {
		return nil, 0, err
	}
	rows, err := c.tx.StmtContext(c.ctx, st.keyWalk).QueryContext(c.ctx, c.queue, c.now, int64(budget))
	if err != nil {
		return nil, 0, fmt.Errorf("walk the due jobs of queue %s: %w", c.queue, err)
	}
	defer rows.Close()
	take = make([]int64, 0, want)
	var (
		id  int64
		key sql.NullString
	)
	for len(take) < want && rows.Next() {
		walked++
		if err := rows.Scan(&id, &key); err != nil {
			return nil, 0, fmt.Errorf("walk the due jobs of queue %s: %w", c.queue, err)
		}
		if !key.Valid {
			take = append(take, id)
			continue
		}
		s, err := c.state(key.String)
		if err != nil {
			return nil, 0, err
		}
		if c.allows(s, id) {
			take = append(take, id)
			s.reserved++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("walk the due jobs of queue %s: %w", c.queue, err)
	}
	return take, walked, nil
}

// query runs query in the claim's transaction.
func (c *keyClaim) query(query string, args ...any) queried {
	rows, err := c.tx.QueryContext(c.ctx, query, args...)
	return queried{rows, err}
}

// candidate is a due pending job with its place in the claim order.
type candidate struct {
	row backend.JobRow // ID, Priority, Turn and AvailableAt
	key string
}

// byKey returns the IDs of up to want jobs the rules let the claim take,
// in claim order, gathered key by key: the distinct priorities of the
// queue and the distinct keys of its pending jobs are each found by one
// index probe per value, never by reading a key's backlog.
func (c *keyClaim) byKey(want int) ([]int64, error) {
	scanCand := func(r *sql.Rows) (candidate, error) {
		var k candidate
		var avail int64
		err := r.Scan(&k.row.ID, &k.row.Priority, &k.row.Turn, &avail)
		k.row.AvailableAt = fromMicros(avail)
		return k, err
	}
	var cands []candidate
	prios, err := scanAll(c.query(qQueuePriorities, c.queue), scanInt)
	if err != nil {
		return nil, fmt.Errorf("read the priorities of queue %s: %w", c.queue, err)
	}
	for _, p := range prios {
		got, err := scanAll(c.query(qUnkeyedDue, c.queue, p, c.now, int64(want)), scanCand)
		if err != nil {
			return nil, fmt.Errorf("read the due jobs without a key of queue %s: %w", c.queue, err)
		}
		cands = append(cands, got...)
	}
	keys, err := scanAll(c.query(qQueueKeys, c.queue), func(r *sql.Rows) (k string, err error) { return k, r.Scan(&k) })
	if err != nil {
		return nil, fmt.Errorf("read the keys of queue %s: %w", c.queue, err)
	}
	for _, key := range keys {
		s, err := c.state(key)
		if err != nil {
			return nil, err
		}
		var got []candidate
		switch {
		case c.rules.Ordered && c.allows(s, s.head):
			got, err = scanAll(c.query(qJobDue, s.head, c.now), scanCand)
		case !c.rules.Ordered && c.allows(s, 0):
			got, err = c.keyDue(key, min(want, c.rules.Limit-s.reserved), scanCand)
		}
		if err != nil {
			return nil, fmt.Errorf("read the due jobs of key %q: %w", key, err)
		}
		for i := range got {
			got[i].key = key
		}
		cands = append(cands, got...)
	}
	slices.SortFunc(cands, func(a, b candidate) int { return backend.CompareClaimOrder(&a.row, &b.row) })
	ids := make([]int64, 0, min(want, len(cands)))
	for _, k := range cands {
		if len(ids) == want {
			break
		}
		if k.key != "" {
			// Per key the candidates are at most what it allows, but a
			// limit counts every job taken.
			s := c.keys[k.key]
			if !c.rules.Ordered && s.reserved >= c.rules.Limit {
				continue
			}
			s.reserved++
		}
		ids = append(ids, k.row.ID)
	}
	return ids, nil
}

// keyDue returns the first n due pending jobs of key in claim order,
// priority by priority (qKeyDue).
func (c *keyClaim) keyDue(key string, n int, scan func(*sql.Rows) (candidate, error)) ([]candidate, error) {
	prios, err := scanAll(c.query(qKeyPriorities, c.queue, key), scanInt)
	if err != nil {
		return nil, err
	}
	var got []candidate
	for _, p := range prios {
		more, err := scanAll(c.query(qKeyDue, c.queue, key, p, c.now, int64(n-len(got))), scan)
		if got = append(got, more...); err != nil || len(got) == n {
			return got, err
		}
	}
	return got, nil
}

// claimIDs reserves the pending jobs ids (one statement) and appends them.
func claimIDs(ctx context.Context, tx *sql.Tx, st *stmts, base []any, ids []int64,
	claimed *backend.JobRow, jobs []*backend.JobRow) ([]*backend.JobRow, error) {
	if len(ids) == 0 {
		return jobs, nil
	}
	return claimRows(ctx, tx.StmtContext(ctx, st.claimIDs), []any{base[0], base[1], jsonInts(ids)}, claimed, jobs)
}

// queried is what QueryContext returned.
type queried struct {
	rows *sql.Rows
	err  error
}

// scanAll scans every row of q with scan, and closes them.
func scanAll[T any](q queried, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if q.err != nil {
		return nil, q.err
	}
	rows := q.rows
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// keyEnds applies KeyHalt inside a write transaction that moved a job to
// failed_jobs or ended it cancelled: when the job was the head of an
// ordered key whose queue halts (no live job of the key has a lower ID),
// every pending job of the key above it ends cancelled, its last error
// naming the head, in that same transaction. The queues' rules are read
// once per transaction, at its first such end, so the completion of a job
// that ends well never reads them.
type keyEnds struct {
	ctx     context.Context
	tx      *sql.Tx
	st      *stmts
	now     int64
	wt      *wfTx // ends the task of a halted task's job
	read    bool
	halting map[string]bool // queues whose ordered keys halt
}

// failed is called after job id moved to failed_jobs.
func (k *keyEnds) failed(id int64) error { return k.ended(id, qFailedKeyOf) }

// cancelled is called after job id ended cancelled.
func (k *keyEnds) cancelled(id int64) error { return k.ended(id, qFinishedKeyOf) }

func (k *keyEnds) ended(id int64, lookup string) error {
	if !k.read {
		k.read = true
		var stmt *sql.Stmt
		if k.st != nil {
			stmt = k.tx.StmtContext(k.ctx, k.st.settings)
		} else {
			var err error
			if stmt, err = k.tx.PrepareContext(k.ctx, qQueueSettings); err != nil {
				return fmt.Errorf("read key rules: %w", err)
			}
			defer stmt.Close()
		}
		settings, err := readSettings(k.ctx, stmt)
		if err != nil {
			return fmt.Errorf("read key rules: %w", err)
		}
		for q, s := range settings {
			if s.Keys.Policy() == backend.KeyHalt {
				if k.halting == nil {
					k.halting = map[string]bool{}
				}
				k.halting[q] = true
			}
		}
	}
	if len(k.halting) == 0 {
		return nil
	}
	var queue string
	var key sql.NullString
	switch err := k.tx.QueryRowContext(k.ctx, lookup, id).Scan(&queue, &key); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read the key of job %d: %w", id, err)
	}
	if !key.Valid || !k.halting[queue] {
		return nil
	}
	var one int
	switch err := k.tx.QueryRowContext(k.ctx, qKeyLower, queue, key.String, id).Scan(&one); {
	case err == nil:
		return nil // not the head: the key's head is still live
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("read the head of key %q: %w", key.String, err)
	}
	rows, err := k.tx.QueryContext(k.ctx, qKeyPendingAfter, queue, key.String, id)
	ids, err := scanAll(queried{rows, err}, scanInt)
	if err != nil {
		return fmt.Errorf("read the jobs of key %q: %w", key.String, err)
	}
	reason := backend.HaltedError(key.String, id)
	for _, v := range ids {
		r, err := k.tx.ExecContext(k.ctx, qFinishHalted, v, reason, k.now)
		if err != nil {
			return fmt.Errorf("halt job %d of key %q: %w", v, key.String, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			continue
		}
		wf, err := deleteJob(k.ctx, k.tx, nil, v)
		if err != nil {
			return err
		}
		if wf != 0 {
			if err := k.wt.jobCancelled(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteKeyQueues records which queues of settings have key rules that
// limit or order their keys.
func (b *Backend) noteKeyQueues(settings map[string]settingsRow) {
	var qs map[string]struct{}
	for q, s := range settings {
		if !s.Keys.IsZero() {
			if qs == nil {
				qs = map[string]struct{}{}
			}
			qs[q] = struct{}{}
		}
	}
	if old := b.keyQueues.Load(); qs == nil && (old == nil || len(*old) == 0) {
		return
	}
	b.keyQueues.Store(&qs)
}

// wakeKeyQueues wakes this process's subscribers of the queues with key
// rules after a commit that ended reservations: the end of a key's job
// may make the next one claimable at once, which a worker idle because
// the key was blocked would otherwise find only at its next poll. The
// completion paths do not read which queues their jobs were in, so every
// such queue is woken; a wake-up is coalesced per subscriber and costs at
// most one claim. Other processes' subscribers are woken by their
// watcher, which sees the commit (notify.go).
func (b *Backend) wakeKeyQueues() {
	if qs := b.keyQueues.Load(); qs != nil && len(*qs) > 0 {
		b.hub.notify(*qs)
	}
}

// QueueSetKeys implements backend.KeyController. New rules wake this
// process's idle workers, since they may allow more than the old ones.
func (b *Backend) QueueSetKeys(ctx context.Context, queue string, rules backend.KeyRules) error {
	op := "set key rules of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateKeyRules(rules); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := b.write(ctx, op, func(tx *sql.Tx, _ *stmts) error {
		if _, err := tx.ExecContext(ctx, qQueueSetKeys, queue, rules.Limit, rules.Ordered,
			string(rules.OnFailure), micros(b.now())); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, qQueuePrune, queue)
		return err
	})
	if err != nil {
		return err
	}
	if !rules.IsZero() {
		qs := map[string]struct{}{queue: {}}
		if old := b.keyQueues.Load(); old != nil {
			for q := range *old {
				qs[q] = struct{}{}
			}
		}
		b.keyQueues.Store(&qs)
	}
	b.hub.notify(map[string]struct{}{queue: {}})
	return nil
}

// KeyList implements backend.KeyController on the read connections, from
// one snapshot.
func (b *Backend) KeyList(ctx context.Context, params backend.KeyListParams) ([]backend.KeyInfo, error) {
	const op = "list keys"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	limit, err := backend.PageLimit(params.Limit, backend.DefaultListLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	where, args := "1", []any(nil)
	if params.Queue != "" {
		where, args = "queue = ?", []any{params.Queue, params.Queue}
	}
	out := []backend.KeyInfo{}
	err = b.read(ctx, func(tx *sql.Tx) error {
		rules := map[string]backend.KeyRules{}
		rows, err := tx.QueryContext(ctx, qQueueSettings)
		if err != nil {
			return err
		}
		for rows.Next() {
			var s settingsRow
			var period int64
			var policy string
			if err := rows.Scan(&s.Queue, &s.Paused, &s.Concurrency, &s.Rate, &period, &s.window, &s.count,
				&s.Keys.Limit, &s.Keys.Ordered, &policy); err != nil {
				_ = rows.Close()
				return err
			}
			s.Keys.OnFailure = backend.KeyPolicy(policy)
			rules[s.Queue] = s.Keys
		}
		if err := closeRows(rows); err != nil {
			return err
		}
		if rows, err = tx.QueryContext(ctx, keyListSQL(where), args...); err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k backend.KeyInfo
			var head, at sql.NullInt64
			if err := rows.Scan(&k.Queue, &k.Key, &k.Pending, &k.Reserved, &k.Failed, &head, &at); err != nil {
				return err
			}
			if k.Failed > 0 && rules[k.Queue].Policy() == backend.KeyHold {
				k.Held, k.HeadID, k.HeldSince = true, head.Int64, fromMicros(at.Int64)
			}
			if params.Held && !k.Held {
				continue
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, b.mapErr(ctx, op, err)
	}
	slices.SortFunc(out, func(a, b backend.KeyInfo) int {
		if c := cmp.Compare(b.Pending+b.Reserved, a.Pending+a.Reserved); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
