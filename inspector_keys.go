package jobq

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/backend"
)

type (
	// KeyRules are a queue's rules for its keyed jobs: a limit of jobs of
	// one key running at once, or ordered keys run one at a time in
	// enqueue order with a policy for a head that fails. See
	// backend.KeyController.
	KeyRules = backend.KeyRules
	// KeyPolicy is what an ordered key does when its head fails for good
	// or is cancelled: KeyHold, KeyContinue or KeyHalt.
	KeyPolicy = backend.KeyPolicy
	// KeyInfo is one key of one queue: its job counts and whether a
	// failed head holds it.
	KeyInfo = backend.KeyInfo
	// KeyListParams selects the keys Inspector.Keys lists.
	KeyListParams = backend.KeyListParams
)

// The policies of an ordered key (see backend.KeyHold and its siblings).
const (
	KeyHold     = backend.KeyHold
	KeyContinue = backend.KeyContinue
	KeyHalt     = backend.KeyHalt
)

// keys returns the backend's key control, or ErrNotSupported naming op.
func (i *Inspector) keys(op string) (backend.KeyController, error) {
	c, ok := backend.As[backend.KeyController](i.b)
	if !ok {
		return nil, fmt.Errorf("%s: %w: this backend keeps no keys", op, ErrNotSupported)
	}
	return c, nil
}

// keyFilter refuses a filter naming a key on a backend that keeps no keys:
// it would ignore the key and act on every job of the rest of the filter
// (a purge by key would empty the queue's failed jobs).
func (i *Inspector) keyFilter(op, key string) error {
	if key == "" {
		return nil
	}
	if _, err := i.keys(op + " of key " + key); err != nil {
		return err
	}
	return nil
}

// SetQueueKeys replaces a queue's key rules, for every worker at once; the
// zero KeyRules clears them. A bad value is ErrInvalidInput naming the
// field. The queue need not exist yet.
func (i *Inspector) SetQueueKeys(ctx context.Context, queue string, rules KeyRules) error {
	c, err := i.keys("set key rules of queue " + queue)
	if err != nil {
		return err
	}
	return c.QueueSetKeys(ctx, queue, rules)
}

// Keys lists the keys with live or failed jobs, busiest first; a held
// key names the failed job that holds it (KeyInfo.HeadID).
func (i *Inspector) Keys(ctx context.Context, params KeyListParams) ([]KeyInfo, error) {
	c, err := i.keys("list keys")
	if err != nil {
		return nil, err
	}
	return c.KeyList(ctx, params)
}
