package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

var _ backend.KeyController = (*Backend)(nil)

// keyPageNext is how many jobs a keyed claim reads on from the cursor an
// earlier claim left (see sqlClaimKeyed): enough that jobs behind a long
// run of blocked ones are reached within a few claims, few enough that
// one claim's reads stay short (index entries, and up to three probes
// for each job weighed among them).
const keyPageNext = 512

// keyPageFirst is how many jobs a keyed claim of room jobs reads from the
// start of its queue: room plus slack for the jobs of busy, held or
// limited keys among the first ones, which it passes over.
func keyPageFirst(room int) int { return 4*room + 64 }

// QueueSetKeys implements backend.KeyController: the rules live in the
// queue's settings row, beside its paused flag and limits, which it
// keeps. New rules wake idle workers everywhere, since they may let jobs
// go that the old ones held back.
func (b *Backend) QueueSetKeys(ctx context.Context, queue string, rules backend.KeyRules) error {
	op := "set key rules of queue " + queue
	if err := backend.ValidateQueue(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := backend.ValidateKeyRules(rules); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := b.settingsWrite(ctx, op, queue, b.kq.setKeys, queue, int32(rules.Limit), rules.Ordered, string(rules.OnFailure))
	if err != nil {
		return err
	}
	b.wake([]string{queue})
	return nil
}

// KeyList implements backend.KeyController in one statement (see
// sqlKeyList).
func (b *Backend) KeyList(ctx context.Context, params backend.KeyListParams) ([]backend.KeyInfo, error) {
	const op = "list keys"
	limit, err := backend.PageLimit(params.Limit, backend.DefaultListLimit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var queue any // NULL: every queue
	if params.Queue != "" {
		if err := backend.ValidateQueue(params.Queue); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		queue = params.Queue
	}
	var out []backend.KeyInfo
	err = b.do(ctx, op, func(ctx context.Context) error {
		out = out[:0]
		rows, err := b.pool.Query(ctx, b.kq.keyList, queue, params.Held, limit)
		if err != nil {
			return err
		}
		var k backend.KeyInfo
		var head pgtype.Int8
		var since pgtype.Timestamptz
		_, err = pgx.ForEachRow(rows, []any{&k.Queue, &k.Key, &k.Pending, &k.Reserved, &k.Failed, &k.Held, &head, &since}, func() error {
			k.HeadID, k.HeldSince = 0, time.Time{}
			if k.Held {
				k.HeadID, k.HeldSince = head.Int64, since.Time
			}
			out = append(out, k)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// wakeHeld wakes the queues whose keys can be held (ordered under hold)
// after failed jobs were purged: a held key goes on once its failed head
// is gone, and the workers of those queues may be idle. Only a hint: when
// the lookup fails, the workers find the key free at their next poll.
func (b *Backend) wakeHeld(ctx context.Context) {
	var queues []string
	err := b.do(ctx, "wake held keys", func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, b.kq.heldQueues)
		if err != nil {
			return err
		}
		queues, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err == nil {
		b.wake(queues)
	}
}
