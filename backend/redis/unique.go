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
// reserved>". See the package documentation for why a reservation, and
// when a holder that is not live is taken over.

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
			sub[j].holder, sub[j].inFlight = 0, false
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
	// Keys held by other jobs: live holders keep them; dead ones lose them
	// once their reservation is older than the grace period.
	type held struct {
		i     int
		value string
		id    int64
		at    int64
		key   string // the holder's job key, "" when its queue is unknown
	}
	var found []held
	for i := range claims {
		s := f.str(1 + i)
		if s == "" {
			continue
		}
		if s == "=" {
			claims[i].had = true
			continue
		}
		h := held{i: i, value: s}
		var ok bool
		if h.id, h.at, ok = heldBy(s); ok {
			name, known, err := b.reg.name(ctx, queueIndexOf(h.id))
			if err != nil {
				return err
			}
			if known {
				h.key = b.keys.queue(name).job(h.id)
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
	var jobKeys []string
	for _, h := range found {
		if h.key != "" {
			jobKeys = append(jobKeys, h.key)
		}
	}
	// A live holder keeps the key while its state is in its set
	// (backend.UniqueStates); out of it, the key is taken over at once.
	live := map[string]bool{}
	type state struct {
		states   backend.UniqueStates
		reserved bool
		attempts int
		due      time.Time
	}
	states := map[string]state{}
	if len(jobKeys) > 0 {
		rows, err := b.c.hmgetAll(ctx, jobKeys, "d", "us", "lu", "a", "av", "c")
		if err != nil {
			return err
		}
		for i, k := range jobKeys {
			f := fields{v: rows[i]}
			if live[k] = rows[i][0] != nil; !live[k] {
				continue
			}
			due := f.int64(4)
			if rows[i][4] == nil {
				due = f.int64(5)
			}
			states[k] = state{backend.UniqueStates(f.int(1)), f.str(2) != "", f.int(3), time.UnixMicro(due)}
			if f.err != nil {
				return fmt.Errorf("unique key holder %s: %w", k, f.err)
			}
		}
	}
	at := time.UnixMicro(now)
	keeps := func(h held) bool {
		item := claims[h.i].item
		if item == nil {
			item = &backend.InsertParams{}
		}
		s := states[h.key]
		return live[h.key] && s.states.Keeps(item, s.reserved, s.attempts, s.due, at)
	}
	var steal []held
	for _, h := range found {
		if h.id != 0 && (keeps(h) || !live[h.key] && now-h.at < b.grace.Microseconds()) {
			claims[h.i].holder = h.id
			claims[h.i].inFlight = !live[h.key]
			continue
		}
		steal = append(steal, h)
	}
	if len(steal) == 0 {
		return nil
	}
	args = args[:0]
	for _, h := range steal {
		args = append(args, claims[h.i].key, h.value, idHex(claims[h.i].id))
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
		claims[h.i].value = idHex(claims[h.i].id) + "@" + f.str(0)
		if s := f.str(1 + i); s != "" {
			// Someone else got there first: theirs now.
			id, _, ok := heldBy(s)
			if !ok {
				return fmt.Errorf("unique key %q holds %q", claims[h.i].key, s)
			}
			claims[h.i].holder = id
			claims[h.i].inFlight = true // whether its job is written is checked again
		}
	}
	return f.err
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
