package inline

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/backend"
)

var _ backend.QueueController = (*Backend)(nil)

// errNoQueues explains why queue control is refused: there is no queue.
const errNoQueues = "the sync backend runs each job inside Enqueue and keeps no queue to pause or limit; use memory:, sqlite:, postgres:// or redis://"

// QueuePause implements backend.QueueController by refusing: an error
// wrapping backend.ErrNotSupported.
func (b *Backend) QueuePause(ctx context.Context, queue string, paused bool) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	op := "pause queue " + queue
	if !paused {
		op = "resume queue " + queue
	}
	return fmt.Errorf("%s: %w: %s", op, backend.ErrNotSupported, errNoQueues)
}

// QueueSetLimits implements backend.QueueController by refusing: an error
// wrapping backend.ErrNotSupported.
func (b *Backend) QueueSetLimits(ctx context.Context, queue string, _ backend.QueueLimits) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	return fmt.Errorf("set limits of queue %s: %w: %s", queue, backend.ErrNotSupported, errNoQueues)
}

// QueueSettingsList implements backend.QueueController: no queue is ever
// paused or limited.
func (b *Backend) QueueSettingsList(ctx context.Context) ([]backend.QueueSettings, error) {
	return nil, b.check(ctx)
}
