package jobq

import "context"

// Skip records that the caller reached the point where it would enqueue a
// job of type typ and decided not to (the image is already small, the
// user opted out): nothing is stored, but the client's hooks hear of it
// (ClientHooks.Skipped), so a log, a metric or a test (package jobqtest)
// can tell "on the request's path but skipped" from "never wired". opts
// are read only for the queue and metadata they name. reason is free text
// for people; keep secrets out of it.
func (c *Client) Skip(ctx context.Context, typ, reason string, opts ...EnqueueOption) {
	o := enqueueOptions{queue: "default"}
	for _, opt := range opts {
		opt(&o)
	}
	for _, h := range c.cfg.Hooks {
		if h.Skipped == nil {
			continue
		}
		h.Skipped(ctx, EnqueueInfo{Type: typ, Queue: o.queue, Metadata: o.metadata, Context: ctx}, reason)
	}
}
