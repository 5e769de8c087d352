package backend

import (
	"cmp"
	"slices"
)

// CompareClaimOrder orders two jobs as JobClaim takes them: higher
// priority first, then the lower turn (JobRow.Turn: 0 for a job without a
// key, see KeyController), then the one due earlier (AvailableAt: a retried or
// released job goes behind the jobs due before it came back), then the
// lower ID. It returns a negative number when a goes first. Backends sort
// what one claim returned with it; tests state the order with it.
func CompareClaimOrder(a, b *JobRow) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Turn, b.Turn); c != 0 {
		return c
	}
	if c := a.AvailableAt.Compare(b.AvailableAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// SortClaimOrder sorts rows in claim order (see CompareClaimOrder).
func SortClaimOrder(rows []*JobRow) { slices.SortFunc(rows, CompareClaimOrder) }
