package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// The keyed workload (Config.Keys): every job carries a key, on one of the
// run's keyed queues, whose rules the verifier sets before the first
// enqueue. On the ordered queue the verifier is also the operator: a head
// that failed for good holds its key (KeyHold), and the verifier replays
// it, as an operator would, so that the key goes on. The replayed head
// runs again first, in its place: the checks see its jobs complete in ID
// order all the same.

// evKeyReplay is the verifier's line for one replay of a held key's head:
// job, kq (its queue), key, res (as a replay line's), and err for an
// error. Its time is when the call began, before any claim of the head's
// next life.
const evKeyReplay = "key-replay"

// replayPurged is the result of a held head the replay skipped (a live
// job holds its unique key: the job a batch sent again after a lost reply
// inserted anew, since the first send's copy had already failed), which
// the verifier then discards, as an operator would: the live copy runs in
// its stead.
const replayPurged = "purged"

// keyFinal is what the backend holds of the keyed workload once the run
// has drained: the rules the verifier gave its queues, and the keys held.
type keyFinal struct {
	rules map[string]backend.KeyRules // by queue
	held  []backend.KeyInfo
}

// keyController is the backend's key control; an error wrapping
// jobq.ErrNotSupported when it keeps no keys.
func (r *verifier) keyController() (backend.KeyController, error) {
	kc, ok := backend.As[backend.KeyController](r.direct)
	if !ok {
		return nil, fmt.Errorf("verify: the keyed workload needs a backend that keeps keys, and %s does not: %w", schemeOf(r.db), jobq.ErrNotSupported)
	}
	return kc, nil
}

// setupKeys gives each keyed queue its rules before any job is enqueued,
// as a deployment sets them before its producers start.
func (r *verifier) setupKeys(ctx context.Context) error {
	if r.cfg.Keys == 0 {
		return nil
	}
	kc, err := r.keyController()
	if err != nil {
		return err
	}
	for _, q := range r.cfg.keyQueues(r.queue) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := kc.QueueSetKeys(cctx, q.name, q.rules)
		cancel()
		if errors.Is(err, backend.ErrNotSupported) {
			return fmt.Errorf("verify: the keyed workload needs a backend that keeps keys: %w", err)
		}
		if err != nil {
			return fmt.Errorf("verify: set the key rules of queue %s: %w", q.name, err)
		}
	}
	return nil
}

// orderedQueue is the keyed workload's ordered queue, "" when none.
func (r *verifier) orderedQueue() string {
	for _, q := range r.cfg.keyQueues(r.queue) {
		if q.rules.Ordered {
			return q.name
		}
	}
	return ""
}

// keyReplayer lists the ordered queue's held keys every ReplayEvery and
// replays the head of each (a call that failed is made again on the next
// tick, as is one for a head that fails again). A held key with no job
// waiting behind its head is left held: nothing of it waits, and a
// replay then could put a job back after the queue was seen drained.
func (r *verifier) keyReplayer(ctx context.Context) {
	kc, err := r.keyController()
	if err != nil {
		r.fleetFail(err) // setupKeys checked it: unreachable
		return
	}
	listed := map[int64]bool{}
	queue := r.orderedQueue()
	ticker.Loop(ctx, r.cfg.ReplayEvery, func(ctx context.Context) {
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		held, err := kc.KeyList(lctx, backend.KeyListParams{Queue: queue, Held: true, Limit: r.cfg.Keys})
		cancel()
		if err != nil {
			return // a restart may keep it from answering: next tick
		}
		for _, k := range held {
			if !k.Held || k.Pending == 0 {
				continue
			}
			if !listed[k.HeadID] {
				// The head's handler finds it there should the
				// attempt after the replay die (see replayedBy).
				if err := r.listReplay(k.HeadID); err != nil {
					r.fleetFail(err)
					return
				}
				listed[k.HeadID] = true
			}
			r.replayHead(ctx, k)
		}
	})
}

// replayHead replays the failed head of held key k and records the call.
func (r *verifier) replayHead(ctx context.Context, k backend.KeyInfo) {
	at := monoNow()
	fields := []field{num("job", k.HeadID), str("kq", k.Queue), str("key", k.Key)}
	out, errf := r.replayJob(ctx, k.HeadID)
	if out == replaySkipped {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		if _, err := r.direct.FailedPurge(cctx, backend.FailedPurgeParams{IDs: []int64{k.HeadID}}); err == nil {
			out = replayPurged
		}
		cancel()
	}
	r.events.writeAt(at, evKeyReplay, append(append(fields, errf...), str("res", out))...)
}

// keyState reads the keyed workload's final state: its queues' rules and
// held keys.
func (r *verifier) keyState(ctx context.Context) (*keyFinal, error) {
	kc, err := r.keyController()
	if err != nil {
		return nil, err
	}
	kf := &keyFinal{rules: map[string]backend.KeyRules{}}
	for _, q := range r.cfg.keyQueues(r.queue) {
		kf.rules[q.name] = q.rules
		if !q.rules.Ordered {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		held, err := kc.KeyList(cctx, backend.KeyListParams{Queue: q.name, Held: true, Limit: r.cfg.Keys})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("verify: list the held keys: %w", err)
		}
		kf.held = append(kf.held, held...)
	}
	return kf, nil
}
