package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

var _ backend.QueueController = (*Backend)(nil)

// Queue control lives in each queue's settings hash P:{Q}:s (see
// scripts.lua): the claim and peek scripts read it in the same atomic step
// that takes jobs, so every claimer of every process obeys it and, Redis
// running one script at a time per slot, none can overshoot a limit. A
// queue without settings pays one HMGET of a missing key per claim. A
// queue is registered (given one of its MaxQueues indexes) when it is first
// paused or limited, so QueueSettingsList finds it.

// limited applies a claim's report on queue's limits (ctl: "<concurrency
// limit> <next rate window µs>", both 0 when not limited or spent): rows
// of a concurrency-limited queue wake it when they end, and a spent rate
// window wakes it when the next one starts.
func (b *Backend) limited(queue, ctl string, now string, rows []*backend.JobRow) {
	cc, next, _ := strings.Cut(ctl, " ")
	if cc != "0" && cc != "" {
		b.limits.Claimed(queue, rows)
	}
	if next == "0" || next == "" {
		return
	}
	at, err1 := strconv.ParseInt(next, 10, 64)
	nowUS, err2 := strconv.ParseInt(now, 10, 64)
	if err1 == nil && err2 == nil {
		// By the server's clock, as the notifier's due times are.
		b.notifier.local(queue, false, max(at-nowUS, 0))
	}
}

// QueuePause implements backend.QueueController. Resuming wakes idle
// workers of every process at once (a message on the queue's channel).
func (b *Backend) QueuePause(ctx context.Context, queue string, paused bool) error {
	op := "pause queue " + queue
	flag := "1"
	if !paused {
		op, flag = "resume queue "+queue, "0"
	}
	if err := b.begin(op); err != nil {
		return err
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.fail(op, b.setControl(ctx, queue, !paused, "p", flag, "0", "0"))
}

// QueueSetLimits implements backend.QueueController; new limits wake idle
// workers of every process, since they may allow more than the old ones.
func (b *Backend) QueueSetLimits(ctx context.Context, queue string, limits backend.QueueLimits) error {
	op := "set limits of queue " + queue
	if err := b.begin(op); err != nil {
		return err
	}
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateQueueLimits(limits); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.fail(op, b.setControl(ctx, queue, true, "l", strconv.Itoa(limits.Concurrency), strconv.Itoa(limits.Rate),
		strconv.FormatInt(limits.RatePeriod.Microseconds(), 10)))
}

// setControl registers the queue and runs the qctl script; wake wakes this
// process's subscribers (the script tells the others).
func (b *Backend) setControl(ctx context.Context, queue string, wake bool, args ...string) error {
	if _, err := b.reg.index(ctx, queue); err != nil {
		return err
	}
	k := b.keys.queue(queue)
	argv := make([]any, 0, 6)
	for _, a := range args {
		argv = append(argv, a)
	}
	argv = append(argv, k.channel, b.origin)
	if _, err := scriptQCtl.eval(ctx, b.c, scriptQCtl.keysOf(k), argv); err != nil {
		return err
	}
	if wake {
		b.notifier.wake(queue)
	}
	return nil
}

// QueueSettingsList implements backend.QueueController: the settings of
// every registered queue, read in one pipeline.
func (b *Backend) QueueSettingsList(ctx context.Context) ([]backend.QueueSettings, error) {
	const op = "list queue settings"
	if err := b.begin(op); err != nil {
		return nil, err
	}
	queues, err := b.reg.all(ctx)
	if err != nil || len(queues) == 0 {
		return nil, b.fail(op, err)
	}
	keys := make([]string, len(queues))
	for i, q := range queues {
		keys[i] = b.keys.queue(q).settings
	}
	got, err := b.c.hmgetAll(ctx, keys, "p", "cc", "rl", "rp", "kl", "ko", "kp")
	if err != nil {
		return nil, b.fail(op, err)
	}
	var out []backend.QueueSettings
	for i, q := range queues { // sorted by reg.all
		f := fields{v: got[i]}
		s := backend.QueueSettings{Queue: q, Paused: f.str(0) == "1"}
		s.Concurrency, s.Rate = f.int(1), f.int(2)
		s.RatePeriod = time.Duration(f.int(3)) * time.Microsecond
		s.Keys = keyRulesOf(&f, 4, 5, 6)
		if f.err != nil {
			return nil, b.fail(op, fmt.Errorf("queue %s: %w", q, f.err))
		}
		if s.Paused || !s.QueueLimits.IsZero() || !s.Keys.IsZero() {
			out = append(out, s)
		}
	}
	return out, nil
}
