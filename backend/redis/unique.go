package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Unique keys live in one hash (prefix:unique): key -> "<holder ID>@<µs
// reserved>". See the package documentation for why a reservation, and
// when a holder that is not live is taken over.

// uniqueClaim is a job wanting a unique key.
type uniqueClaim struct {
	key string
	id  int64
	// holder is 0 once reserveUnique gave the key to id; otherwise the ID
	// of the job holding it, of which id is a duplicate.
	holder int64
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

// reserveUnique gives each claim its key, or names the holder that keeps
// it (setting claim.holder).
func (b *Backend) reserveUnique(ctx context.Context, claims []uniqueClaim) error {
	if len(claims) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(claims))
	for _, c := range claims {
		args = append(args, c.key, idHex(c.id))
	}
	res, err := b.c.eval(ctx, scriptUReserve, []string{b.keys.unique}, args)
	if err != nil {
		return err
	}
	v, err := asSlice(res)
	if err != nil || len(v) != 1+len(claims) {
		return fmt.Errorf("reserve unique keys: unexpected reply")
	}
	f := fields{v: v}
	now := int64(f.int(0))
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
	live := map[string]bool{}
	if len(jobKeys) > 0 {
		exists, err := b.c.existAll(ctx, jobKeys)
		if err != nil {
			return err
		}
		for i, k := range jobKeys {
			live[k] = exists[i]
		}
	}
	var steal []held
	for _, h := range found {
		if h.id != 0 && (live[h.key] || now-h.at < b.grace.Microseconds()) {
			claims[h.i].holder = h.id
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
	res, err = b.c.eval(ctx, scriptUSteal, []string{b.keys.unique}, args)
	if err != nil {
		return err
	}
	v, err = asSlice(res)
	if err != nil || len(v) != len(steal) {
		return fmt.Errorf("take over unique keys: unexpected reply")
	}
	f = fields{v: v}
	for i, h := range steal {
		if s := f.str(i); s != "" {
			// Someone else got there first: theirs now.
			id, _, ok := heldBy(s)
			if !ok {
				return fmt.Errorf("unique key %q holds %q", claims[h.i].key, s)
			}
			claims[h.i].holder = id
		}
	}
	return f.err
}

// uniqueHeld is a unique key a job held when it ended.
type uniqueHeld struct {
	id  int64
	key string
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
		args = append(args, h.key, idHex(h.id))
	}
	if _, err := b.c.eval(ctx, scriptURelease, []string{b.keys.unique}, args); err != nil {
		b.opts.Logger.Warn("jobq redis: unique keys of ended jobs not freed; they are taken over once found abandoned",
			"key_prefix", b.opts.KeyPrefix, "keys", len(held), "err", b.fail("free unique keys", err))
	}
}

// releaseUniqueBestEffort frees the keys reserved for jobs that were not
// written after all.
func (b *Backend) releaseUniqueBestEffort(ctx context.Context, claims []uniqueClaim) {
	var held []uniqueHeld
	for _, c := range claims {
		if c.holder == 0 {
			held = append(held, uniqueHeld{id: c.id, key: c.key})
		}
	}
	b.releaseUnique(context.WithoutCancel(ctx), held)
}
