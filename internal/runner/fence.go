package runner

import (
	"context"

	"github.com/jobq/jobq/backend"
)

// unfence, set only in a build with the jobq_unfenced tag (unfenced.go),
// points each ref of a holder's write at the job's current claim before
// the write is sent, as a queue fenced by job ID alone would: a late
// outcome of a holder whose job was taken over then lands on the new
// holder's claim. It exists so that jobq verify can be shown to catch what
// the fence prevents; nil in every other build.
var unfence func(ctx context.Context, b backend.Backend, refs []*backend.JobRef)

// Unfenced reports whether this build switched the lease fence off (the
// jobq_unfenced build tag, for tests of jobq verify only).
func Unfenced() bool { return unfence != nil }

// unfenceItems applies unfence to the refs of items, in place, so that
// what the backend reports back still matches the items.
func unfenceItems(ctx context.Context, b backend.Backend, items []Item) {
	if unfence == nil {
		return
	}
	refs := make([]*backend.JobRef, len(items))
	for i := range items {
		refs[i] = &items[i].Outcome.Ref
	}
	unfence(ctx, b, refs)
}
