package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// Unique keys live in one hash (prefix:unique): key -> "<holder ID>@<µs
// reserved>", or "<holder ID>@0" once marked held by its kept completed
// job. See the package documentation for why a reservation, and when a
// holder that is not live is taken over.

// uniqueClaim is a job wanting a unique key.
type uniqueClaim struct {
	key string
	id  int64
	// item is the insert's item of the claim, judged against a live
	// holder's set (nil for a replay: judged as a plain insert).
	item *backend.InsertParams
	// holder is 0 once reserveUnique gave the key to id; otherwise the ID
	// of the job holding it, of which id is a duplicate.
	holder int64
	// inFlight: holder is not a live job but a reservation younger than
	// the grace period: its insert or replay may still land, or may never
	// have reached the server (see reserveUnique).
	inFlight bool
	// completed: holder is a kept completed job (backend.UniqueCompleted),
	// which no conflict mode changes.
	completed bool
	// had: id held the key before this reservation (a replay sent again
	// after its reply was lost, whose job is live again), so a failure of
	// the caller's write must not free it.
	had bool
	// value is what the reservation wrote ("<ID>@<µs>"), once known: a
	// failed write frees the key only while it still holds exactly that,
	// since a replay reuses its job's ID and another replay of the job may
	// have reserved the key again meanwhile.
	value string
}

// heldBy reads a value of the unique hash.
func heldBy(v string) (id int64, at int64, ok bool) {
	h, t, found := strings.Cut(v, "@")
	id, err := parseIDHex(h)
	if !found || err != nil {
		return 0, 0, false
	}
	at, err = strconv.ParseInt(t, 10, 64)
	return id, at, err == nil
}

// inFlightWait bounds how long reserveUnique waits for the job of a
// reservation in flight to appear: another insert of the same key usually
// lands within milliseconds.
const inFlightWait = time.Second

// reserveUnique gives each claim its key, or names the live job that
// holds it (setting claim.holder): a duplicate always names a job that
// exists. A key reserved for a job that is not live yet, by an insert or
// replay whose outcome is not known (in flight elsewhere, or whose reply
// was lost and which may never have run), is waited for, a little: once
// the job appears the claim is its duplicate, once the key is freed it is
// reserved again; if neither happens within inFlightWait the call fails
// with backend.ErrUnavailable, to be tried again (the reservation is
// taken over once older than the grace period). When it fails, the caller
// writes nothing, so the keys it reserved are freed again (best effort).
// fresh says the claims' IDs were minted for this call, so that no key
// was theirs before: then even a reservation whose reply was lost, and
// which may have run, is undone.
func (b *Backend) reserveUnique(ctx context.Context, claims []uniqueClaim, fresh bool) error {
	if err := b.reserveUniqueOnce(ctx, claims, fresh); err != nil {
		return err
	}
	deadline := time.Now().Add(inFlightWait)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		var pending []int
		for i := range claims {
			if claims[i].inFlight {
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || !ticker.Sleep(ctx, wait) {
			b.releaseUniqueBestEffort(ctx, claims)
			c := claims[pending[0]]
			return fmt.Errorf("reserve unique key %q: %w: it is reserved for job %d, which its insert or replay has not written (its reply may have been lost); try again: the key is taken over %s after its reservation if the job never appears",
				c.key, backend.ErrUnavailable, c.holder, b.grace)
		}
		sub := make([]uniqueClaim, len(pending))
		for j, i := range pending {
			sub[j] = claims[i]
			sub[j].holder, sub[j].inFlight, sub[j].completed = 0, false, false
		}
		if err := b.reserveUniqueOnce(ctx, sub, fresh); err != nil {
			b.releaseUniqueBestEffort(ctx, claims)
			return err
		}
		for j, i := range pending {
			claims[i] = sub[j]
		}
	}
}

// reserveUniqueOnce is one round of reserveUnique: it reserves the free
// keys, takes over the abandoned ones, and names the holders of the
// others, marking those not live yet inFlight.
func (b *Backend) reserveUniqueOnce(ctx context.Context, claims []uniqueClaim, fresh bool) (err error) {
	if len(claims) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(claims))
	for _, c := range claims {
		args = append(args, c.key, idHex(c.id))
	}
	res, err := scriptUReserve.eval(ctx, b.c, scriptUReserve.prefixKeys(b.keys), args)
	if err != nil {
		if fresh && !isNotSent(err) {
			b.releaseUniqueBestEffort(ctx, claims)
		}
		return err
	}
	defer func() {
		if err != nil {
			b.releaseUniqueBestEffort(ctx, claims)
		}
	}()
	v, err := asSlice(res)
	if err != nil || len(v) != 1+len(claims) {
		return fmt.Errorf("reserve unique keys: unexpected reply")
	}
	f := fields{v: v}
	now := int64(f.int(0))
	for i := range claims {
		claims[i].value = idHex(claims[i].id) + "@" + f.str(0)
	}
	// Keys held by other jobs: live holders keep them while in their set,
	// completed ones while kept; dead ones lose them once their
	// reservation is older than the grace period.
	var found []holder
	for i := range claims {
		s := f.str(1 + i)
		if s == "" {
			continue
		}
		if s == "=" {
			claims[i].had = true
			continue
		}
		h := holder{i: i, value: s}
		var ok bool
		if h.id, h.at, ok = heldBy(s); ok {
			name, known, err := b.reg.name(ctx, queueIndexOf(h.id))
			if err != nil {
				return err
			}
			if known {
				h.q = b.keys.queue(name)
			}
		}
		found = append(found, h)
	}
	if f.err != nil {
		return f.err
	}
	if len(found) == 0 {
		return nil
	}
	if err := b.readHolders(ctx, claims, found); err != nil {
		return err
	}
	at := time.UnixMicro(now)
	// steal is the keys to take over, and those to mark (h.mark), in one
	// call of usteal.
	var steal []holder
	for _, h := range found {
		c := &claims[h.i]
		switch {
		case h.id == 0:
			steal = append(steal, h)
		case h.kind == holderLive:
			if h.keeps(c.item, at) {
				c.holder = h.id
			} else {
				// Out of its set: the key is taken over at once.
				steal = append(steal, h)
			}
		case h.kind == holderCompleted:
			// Whatever the item: nothing takes the key from a completed
			// holder. Marked first, unless it is already (see usteal).
			c.holder, c.completed = h.id, true
			if h.at != 0 {
				h.mark = true
				steal = append(steal, h)
			}
		case h.kind == holderUnseen && h.at != 0 && now-h.at < b.grace.Microseconds():
			// Its insert or replay may be in flight.
			c.holder, c.inFlight = h.id, true
		default:
			// Ended (finished without holding the key, or a marked holder
			// pruned): no insert of it is in flight, so the key is free
			// at once; or a reservation past the grace period.
			steal = append(steal, h)
		}
	}
	if len(steal) == 0 {
		return nil
	}
	args = args[:0]
	for _, h := range steal {
		mode := ""
		if h.mark {
			mode = "0"
		}
		args = append(args, claims[h.i].key, h.value, idHex(claims[h.i].id), mode)
	}
	res, err = scriptUSteal.eval(ctx, b.c, scriptUSteal.prefixKeys(b.keys), args)
	if err != nil {
		for _, h := range steal {
			claims[h.i].value = "" // its reply lost, maybe taken: freed by ID
		}
		return err
	}
	v, err = asSlice(res)
	if err != nil || len(v) != 1+len(steal) {
		return fmt.Errorf("take over unique keys: unexpected reply")
	}
	f = fields{v: v}
	for i, h := range steal {
		c := &claims[h.i]
		c.value = idHex(c.id) + "@" + f.str(0)
		switch s := f.str(1 + i); s {
		case "0": // marked: the completed job holds it
		case "":
			c.holder, c.completed = 0, false // taken: a mark finds the key freed
		default:
			// Someone else got there first: theirs now.
			id, _, ok := heldBy(s)
			if !ok {
				return fmt.Errorf("unique key %q holds %q", c.key, s)
			}
			c.holder, c.completed = id, false
			c.inFlight = true // whether its job is written is checked again
		}
	}
	return f.err
}

// holderKind is what the job a unique key names was found to be.
type holderKind uint8

const (
	// holderUnseen is neither live nor finished: its insert or replay in
	// flight (or never written), or a job that ended (done and not kept,
	// failed, pruned) without its key freed, or of no known queue.
	holderUnseen holderKind = iota
	// holderLive is a live job: it holds the key while in its set.
	holderLive
	// holderCompleted is a kept completed job of a set with
	// backend.UniqueCompleted: it holds the key until it is pruned.
	holderCompleted
	// holderEnded is a finished job that holds nothing: cancelled, or
	// completed without UniqueCompleted in its set.
	holderEnded
)

// holder is the job a unique key was found held by, for one claim.
type holder struct {
	i     int    // the claim's index
	value string // the key's value, "<ID>@<µs>"
	id    int64  // 0 when the value is malformed
	at    int64  // µs reserved; 0 once marked held by its completed job
	q     *queueKeys
	kind  holderKind
	mark  bool // usteal marks the key as held by its completed job
	// The state of a live holder.
	states   backend.UniqueStates
	reserved bool
	attempts int
	due      time.Time
}

// keeps reports whether the live holder h keeps item out at now (a
// replay's item is nil: judged as a plain insert).
func (h *holder) keeps(item *backend.InsertParams, now time.Time) bool {
	if item == nil {
		item = &backend.InsertParams{}
	}
	return h.states.Keeps(item, h.reserved, h.attempts, h.due, now)
}

// holderFields are the fields readHolders reads of a holder's live job
// or finished record (the job's hash renamed, plus s): the live state a
// set is judged by, and whether the record holds the key.
var holderFields = []string{"d", "us", "lu", "a", "av", "c", "s", "u"}

// readHolders sets the kind (and a live one's state) of each holder
// found of a known queue: a marked key's holder completed, so its
// finished record alone is read; any other's job is read, then, if it is
// not live, its finished record (a job that completes moves from one to
// the other in one script, and a finished record is never live again, so
// the two reads in turn see it in one or the other). A key whose holder
// is neither costs an insert only these reads.
func (b *Backend) readHolders(ctx context.Context, claims []uniqueClaim, found []holder) error {
	var at []int
	var keys []string
	for k, h := range found {
		if h.q == nil || h.id == 0 {
			continue
		}
		at = append(at, k)
		if h.at == 0 {
			keys = append(keys, h.q.finishedJob(h.id))
		} else {
			keys = append(keys, h.q.job(h.id))
		}
	}
	if err := b.readHolderRows(ctx, claims, found, at, keys); err != nil {
		return err
	}
	at, keys = at[:0], keys[:0]
	for k, h := range found {
		if h.q != nil && h.id != 0 && h.at != 0 && h.kind == holderUnseen {
			at = append(at, k)
			keys = append(keys, h.q.finishedJob(h.id))
		}
	}
	return b.readHolderRows(ctx, claims, found, at, keys)
}

// readHolderRows reads keys[j], the live job or finished record of
// found[at[j]], and sets what it is.
func (b *Backend) readHolderRows(ctx context.Context, claims []uniqueClaim, found []holder, at []int, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	rows, err := b.c.hmgetAll(ctx, keys, holderFields...)
	if err != nil {
		return err
	}
	for j, k := range at {
		h := &found[k]
		f := fields{v: rows[j]}
		if rows[j][0] == nil {
			continue // neither: holderUnseen
		}
		states := backend.UniqueStates(f.int(1))
		switch s := f.str(6); {
		case s == "":
			h.kind, h.states, h.reserved, h.attempts = holderLive, states, f.str(2) != "", f.int(3)
			due := f.int64(4)
			if rows[j][4] == nil {
				due = f.int64(5)
			}
			h.due = time.UnixMicro(due)
		case s == string(backend.StateCompleted) && states.HoldsCompleted() && f.str(7) == claims[h.i].key:
			h.kind = holderCompleted
		default:
			h.kind = holderEnded
		}
		if f.err != nil {
			return fmt.Errorf("unique key holder %s: %w", keys[j], f.err)
		}
	}
	return nil
}

// uniqueHeld is a unique key a job held when it ended, or one reserved
// for a job that was not written.
type uniqueHeld struct {
	id  int64
	key string
	// value, when set, is the reservation to free: the key is freed only
	// while it holds exactly that. Unset, while it is held by id.
	value string
}

// readHeld reads a script's {ID, unique key, ...} list of the queue of
// index q.
func readHeld(v any, q int) ([]uniqueHeld, error) {
	s, err := asSlice(v)
	if err != nil {
		return nil, err
	}
	f := fields{v: s}
	out := make([]uniqueHeld, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		out = append(out, uniqueHeld{id: f.id(i, q), key: f.str(i + 1)})
	}
	return out, f.err
}

// releaseUnique frees the keys that jobs held when they ended. It is
// best effort: a key left behind is taken over later (see reserveUnique),
// so a failure is logged, not returned, as the jobs' outcomes are already
// written.
func (b *Backend) releaseUnique(ctx context.Context, held []uniqueHeld) {
	if len(held) == 0 {
		return
	}
	args := make([]any, 0, 2*len(held))
	for _, h := range held {
		if h.value != "" {
			args = append(args, h.key, h.value)
		} else {
			args = append(args, h.key, idHex(h.id))
		}
	}
	if _, err := scriptURelease.eval(ctx, b.c, scriptURelease.prefixKeys(b.keys), args); err != nil {
		b.opts.Logger.Warn("jobq redis: unique keys of ended or unwritten jobs not freed; they are taken over once found abandoned",
			"key_prefix", b.opts.KeyPrefix, "keys", len(held), "err", b.fail("free unique keys", err))
	}
}

// releaseUniqueBestEffort frees the keys reserved for jobs that were not
// written after all: only those this reservation gave them, never a key
// their ID held before it, and, once the reservation's value is known,
// only while the key still holds it.
func (b *Backend) releaseUniqueBestEffort(ctx context.Context, claims []uniqueClaim) {
	var held []uniqueHeld
	for _, c := range claims {
		if c.holder == 0 && !c.had {
			held = append(held, uniqueHeld{id: c.id, key: c.key, value: c.value})
		}
	}
	b.releaseUnique(context.WithoutCancel(ctx), held)
}
