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
// claim index, and a drain slowed to a fraction of its speed
// (docs/performance.md, "Why the code is shaped this way"). A claim's cost
// grows with the dead entries it walks past, not with the live rows, so the
// vacuumer checks the table's dead-row count every vacuumInterval and
// vacuums once it passes vacuumMinDead, however many live rows there are.
//
// The vacuum also analyzes when the table has no column statistics yet, or
// its last analysis is older than analyzeEvery, not every time: an ANALYZE
// reads a sample of the table and invalidates every session's cached plans
// of it, and analyzing at every vacuum (about once a second under load) cost
// the steady benchmark a sizeable share of its throughput
// (docs/performance.md). Claims do not depend on fresh statistics (see
// sqlClaimPlan), and outcome writes find their jobs by primary key.
//
// Every worker process has a vacuumer, but one vacuum at a time is enough:
// a vacuum runs under a session advisory lock named after the schema
// (vacuumLockPrefix), and a process that does not get it at once skips
// that round. A role that may not vacuum the table (it does not own it)
// makes the server skip the table with a mere warning the driver drops, so
// the vacuumer asks first; when it may not, it says so once, with what to
// do, and looks again only every vacuumDeniedPause.
const (
	vacuumInterval     = time.Second
	vacuumMinDead      = 5000
	analyzeEvery       = 5 * time.Minute
	vacuumTimeout      = time.Minute
	vacuumDeniedPause  = 10 * time.Minute
	vacuumWarnEvery    = time.Minute // spaces repeated warnings of failures
	vacuumLockPrefix   = "jobq vacuum "
	vacuumUnlockWithin = 5 * time.Second
)

// vacuumer decides and runs the jobs table's vacuums. Its state belongs to
// its one loop.
type vacuumer struct {
	b           *Backend
	minDead     int64         // vacuumMinDead; tests lower it
	deniedPause time.Duration // vacuumDeniedPause; tests shorten it
	lockName    string

	idleUntil  time.Time // the role may not vacuum: skip rounds until then
	denied     bool      // that was logged and still holds
	lastWarn   time.Time // of the last failure warning
	suppressed int       // failure warnings left out since
}

func newVacuumer(b *Backend) *vacuumer {
	return &vacuumer{b: b, minDead: vacuumMinDead, deniedPause: vacuumDeniedPause, lockName: vacuumLockPrefix + b.opts.Schema}
}

// run is the vacuumer's loop: a round every vacuumInterval until ctx ends.
func (v *vacuumer) run(ctx context.Context) {
	ticker.Loop(ctx, vacuumInterval, v.runOnce)
}

// runOnce vacuums if the table needs it and this role may. Failures are
// logged (at most every vacuumWarnEvery) and the next round tries again: a
// missed vacuum only costs speed.
func (v *vacuumer) runOnce(ctx context.Context) {
	if time.Now().Before(v.idleUntil) {
		return
	}
	var (
		dead        int64
		analyzedAgo *float64 // seconds; nil: never analyzed
		allowed     bool
		role        string
	)
	err := v.b.do(ctx, "read jobs table statistics", func(ctx context.Context) error {
		return v.b.pool.QueryRow(ctx, v.b.q.deadTuples, v.b.opts.Schema).Scan(&dead, &analyzedAgo, &allowed, &role)
	})
	if err != nil {
		v.warn(ctx, "jobq postgres vacuumer: cannot read the jobs table's statistics", "err", err)
		return
	}
	if dead < v.minDead {
		return
	}
	log := v.b.opts.Logger.With("schema", v.b.opts.Schema, "role", role, "dead_rows", dead)
	if !allowed {
		v.idleUntil = time.Now().Add(v.deniedPause)
		if !v.denied {
			v.denied = true
			log.Warn("jobq postgres vacuumer: this role may not vacuum the jobs table, so its dead rows slow every claim unless autovacuum keeps up. "+
				"Run workers as the table's owner (the role that ran jobq migrate) or a member of it, grant it MAINTAIN on the table (PostgreSQL 17 and later), "+
				"or set Options.NoVacuum and tune autovacuum for the table. Not vacuuming; looking again every "+v.deniedPause.String(),
				"table", v.b.opts.Schema+".jobs")
		}
		return
	}
	if v.denied {
		v.denied = false
		log.Info("jobq postgres vacuumer: this role may vacuum the jobs table now; vacuuming again")
	}
	query := v.b.q.vacuum
	if analyzedAgo == nil || *analyzedAgo > analyzeEvery.Seconds() {
		query = v.b.q.vacuumAnalyze
	}
	ran, err := v.vacuum(ctx, query)
	switch {
	case err != nil:
		v.warn(ctx, "jobq postgres vacuumer: vacuum failed", "schema", v.b.opts.Schema, "dead_rows", dead, "err", err)
	case !ran:
		log.Debug("jobq postgres vacuumer: another process is vacuuming the schema; skipped")
	}
}

// vacuum runs query (sqlVacuum or sqlVacuumAnalyze) under the schema's
// vacuum lock, on one connection since the lock is the session's. It
// reports false, running nothing, when another process holds the lock.
func (v *vacuumer) vacuum(ctx context.Context, query string) (ran bool, err error) {
	err = v.b.run(ctx, "vacuum jobs table", 1, vacuumTimeout, func(ctx context.Context) error {
		conn, err := v.b.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		var locked bool
		if err := conn.QueryRow(ctx, v.b.q.vacuumLock, v.lockName).Scan(&locked); err != nil || !locked {
			return err
		}
		_, err = conn.Exec(ctx, query)
		ran = err == nil
		// Give the lock back whether or not the vacuum worked, even past
		// ctx; when that fails, close the connection (which ends the
		// session and its lock) rather than pool it still holding the
		// lock and keep every process from vacuuming.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), vacuumUnlockWithin)
		defer cancel()
		var unlocked bool
		if uerr := conn.QueryRow(uctx, v.b.q.vacuumUnlock, v.lockName).Scan(&unlocked); uerr != nil || !unlocked {
			_ = conn.Conn().Close(uctx)
		}
		return err
	})
	return ran, err
}

// warn logs a failure, at most once every vacuumWarnEvery (with the number
// left out since), so a server that stays down does not fill the log with
// a line a second. Nothing is logged once ctx has ended (Close).
func (v *vacuumer) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	if !v.lastWarn.IsZero() && now.Sub(v.lastWarn) < vacuumWarnEvery {
		v.suppressed++
		return
	}
	if v.suppressed > 0 {
		args = append(args, "similar_warnings_left_out", v.suppressed)
	}
	v.lastWarn, v.suppressed = now, 0
	v.b.opts.Logger.Warn(msg, args...)
}
