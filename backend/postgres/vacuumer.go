package postgres

import (
	"context"
	"time"

	"github.com/jobq/jobq/internal/ticker"
)

// Every job row is inserted, updated and deleted within seconds, so the
// jobs table and its claim index fill with dead rows far faster than a
// default autovacuum cleans them (and some servers run with autovacuum
// off): each claim then walks past every dead entry at the front of the
// claim index, and draining 50,000 jobs fell from 17,000 to 1,500 jobs/s
// on this project's test server. A claim's cost grows with the dead
// entries it walks past, not with the live rows, so the vacuumer checks the
// table's dead-row count every vacuumInterval and vacuums once it passes
// vacuumMinDead, however many live rows there are.
//
// The vacuum also analyzes when the table has no column statistics yet, or
// its last analysis is older than analyzeEvery, not every time: an ANALYZE
// reads a sample of the table and invalidates every session's cached plans
// of it, and analyzing at every vacuum (about once a second under load) cost
// the steady benchmark a fifth of its throughput (7,500 against 9,400 jobs/s
// here). Claims do not depend on fresh statistics (see sqlClaimPlan), and
// outcome writes find their jobs by primary key.
const (
	vacuumInterval = time.Second
	vacuumMinDead  = 5000
	analyzeEvery   = 5 * time.Minute
)

// vacuumer decides and runs the jobs table's vacuums.
type vacuumer struct{ b *Backend }

// startVacuumer runs the vacuum check every vacuumInterval until the
// returned stop is called.
func startVacuumer(b *Backend) (stop func()) {
	return ticker.Background(vacuumInterval, (&vacuumer{b: b}).runOnce)
}

// runOnce vacuums if the table needs it. Errors are logged and the next
// tick tries again: a missed vacuum only costs speed.
func (v *vacuumer) runOnce(ctx context.Context) {
	var dead int64
	var analyzedAgo *float64 // seconds; nil: never analyzed
	err := v.b.do(ctx, "read jobs table statistics", func(ctx context.Context) error {
		return v.b.pool.QueryRow(ctx, v.b.q.deadTuples, v.b.opts.Schema).Scan(&dead, &analyzedAgo)
	})
	if err != nil || dead < vacuumMinDead {
		if err != nil && ctx.Err() == nil {
			v.b.opts.Logger.Warn("read jobs table statistics", "err", err)
		}
		return
	}
	query := v.b.q.vacuum
	if analyzedAgo == nil || *analyzedAgo > analyzeEvery.Seconds() {
		query = v.b.q.vacuumAnalyze
	}
	err = v.b.run(ctx, "vacuum jobs table", 1, time.Minute, func(ctx context.Context) error {
		_, err := v.b.pool.Exec(ctx, query)
		return err
	})
	if err != nil && ctx.Err() == nil {
		v.b.opts.Logger.Warn("vacuum jobs table", "dead_rows", dead, "err", err)
	}
}
