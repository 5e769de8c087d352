package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jobq/jobq/backend"
)

var _ backend.KeyController = (*Backend)(nil)

// Keys live in each queue's own keys (see "Keyed jobs" in scripts.lua):
// a keyed job waits among its key's ready jobs, not in the queue's ready
// set, and each key that may run a job now has its claimable job in the
// queue's sorted set Kk, which the claim script merges with the ready
// jobs without a key. Every script that readies, reserves, ends, fails,
// replays or purges a keyed job puts its key right in the same script, so
// a limit or an order holds across every claimer, and a key's next job is
// claimable in the step that ends the one before. The rules are fields of
// the queue's settings hash (kl, ko, kp), read by those scripts.

// keyField reads a job's field ky, "<turn> <key>": its key and turn, or
// none and 0 when it is "" (no key).
func keyField(s string) (key string, turn int64) {
	t, key, ok := strings.Cut(s, " ")
	if !ok {
		return "", 0
	}
	turn, _ = strconv.ParseInt(t, 10, 64)
	return key, turn
}

// QueueSetKeys implements backend.KeyController. It registers the queue
// (so QueueSettingsList finds it) and runs the script qkeys, which puts
// every key of the queue right under the new rules and wakes the workers
// of every process.
func (b *Backend) QueueSetKeys(ctx context.Context, queue string, rules backend.KeyRules) error {
	op := "set key rules of queue " + queue
	if err := b.begin(op); err != nil {
		return err
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateKeyRules(rules); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	idx, err := b.reg.index(ctx, queue)
	if err != nil {
		return b.fail(op, err)
	}
	k := b.keys.queue(queue)
	ordered := "0"
	if rules.Ordered {
		ordered = "1"
	}
	args := []any{strconv.Itoa(rules.Limit), ordered, string(rules.OnFailure), strconv.Itoa(idx), k.channel, b.origin}
	if _, err := scriptQKeys.eval(ctx, b.c, scriptQKeys.keysOf(k), args); err != nil {
		return b.fail(op, err)
	}
	b.notifier.wake(queue)
	return nil
}

// rekey converts the keyed structures of every queue from layout 8 to 9
// (see LayoutVersion), one script call per queue.
func (b *Backend) rekey(ctx context.Context) error {
	queues, err := b.reg.all(ctx)
	if err != nil {
		return err
	}
	for _, name := range queues {
		k := b.keys.queue(name)
		if _, err := scriptReKey.eval(ctx, b.c, scriptReKey.keysOf(k), nil); err != nil {
			return fmt.Errorf("convert the keys of queue %s: %w", name, err)
		}
	}
	return nil
}

// keyRulesOf reads key rules from settings fields kl, ko and kp.
func keyRulesOf(f *fields, kl, ko, kp int) backend.KeyRules {
	return backend.KeyRules{Limit: f.int(kl), Ordered: f.str(ko) == "1", OnFailure: backend.KeyPolicy(f.str(kp))}
}

// KeyList implements backend.KeyController: the keys of each queue (one
// script call per queue, which reads every key of it: an operator's
// call), merged, busiest first.
func (b *Backend) KeyList(ctx context.Context, params backend.KeyListParams) ([]backend.KeyInfo, error) {
	const op = "list keys"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	if params.Limit < 0 {
		return nil, fmt.Errorf("%s: %w", op, &backend.InputError{Field: "limit", Reason: fmt.Sprintf("%d is negative", params.Limit)})
	}
	limit := params.Limit
	if limit == 0 {
		limit = 100
	}
	out, err := b.keyList(ctx, params)
	if err != nil {
		return nil, b.fail(op, err)
	}
	slices.SortFunc(out, func(x, y backend.KeyInfo) int {
		if c := cmp.Compare(y.Pending+y.Reserved, x.Pending+x.Reserved); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Queue, y.Queue); c != 0 {
			return c
		}
		return cmp.Compare(x.Key, y.Key)
	})
	return out[:min(limit, len(out))], nil
}

func (b *Backend) keyList(ctx context.Context, params backend.KeyListParams) ([]backend.KeyInfo, error) {
	queues, err := b.listQueues(ctx, params.Queue)
	if err != nil || len(queues) == 0 {
		return nil, err
	}
	calls := make([]*evalCall, len(queues))
	settings := make([]string, len(queues))
	for i, name := range queues {
		q := b.keys.queue(name)
		calls[i] = scriptKeyList.on(q, nil)
		settings[i] = q.settings
	}
	if err := b.c.evalAll(ctx, calls, false); err != nil {
		return nil, err
	}
	rules, err := b.c.hmgetAll(ctx, settings, "kl", "ko", "kp")
	if err != nil {
		return nil, err
	}
	var out []backend.KeyInfo
	for i, name := range queues {
		v, err := asSlice(calls[i].res)
		if err != nil || len(v)%6 != 0 {
			return nil, fmt.Errorf("list keys of %s: unexpected reply", name)
		}
		if len(v) == 0 {
			continue
		}
		idx, _, err := b.reg.lookup(ctx, name)
		if err != nil {
			return nil, err
		}
		rf := fields{v: rules[i]}
		hold := keyRulesOf(&rf, 0, 1, 2).Policy() == backend.KeyHold
		f := fields{v: v}
		for j := 0; j < len(v); j += 6 {
			k := backend.KeyInfo{Queue: name, Key: f.str(j), Reserved: f.int64(j + 2), Failed: f.int64(j + 3)}
			k.Pending = f.int64(j+1) - k.Reserved
			if k.Failed > 0 && hold {
				k.Held, k.HeadID = true, f.id(j+4, idx)
				if fid := f.str(j + 5); fid != "" {
					k.HeldSince = idTime(f.id(j+5, idx))
				}
			}
			if !params.Held || k.Held {
				out = append(out, k)
			}
		}
		if err := cmp.Or(f.err, rf.err); err != nil {
			return nil, fmt.Errorf("list keys of %s: %w", name, err)
		}
	}
	return out, nil
}
