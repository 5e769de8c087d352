package postgres

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestVacuumerCleansDeadRows: once dead rows pass the threshold, one pass
// of the vacuumer vacuums the jobs table; below it, nothing happens.
func TestVacuumerCleansDeadRows(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	v := &vacuumer{b: b}
	stats := func() (dead int64, vacuumed bool) {
		// pg_stat_force_next_flush makes this session's counts visible now
		// instead of within a second.
		if _, err := b.pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		err := b.pool.QueryRow(ctx, `SELECT n_dead_tup, last_vacuum IS NOT NULL FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'jobs'`, b.Schema()).Scan(&dead, &vacuumed)
		if err != nil {
			t.Fatal(err)
		}
		return dead, vacuumed
	}
	drain := func(n int) {
		insertN(t, b, "q", n)
		for done := 0; done < n; {
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1000, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			out := make([]backend.Outcome, len(rows))
			for i, r := range rows {
				out[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
			}
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: out}); err != nil {
				t.Fatal(err)
			}
			done += len(rows)
		}
	}

	drain(vacuumMinDead / 10)
	stats()
	v.runOnce(ctx)
	if _, vacuumed := stats(); vacuumed {
		t.Fatal("vacuumed below the dead-row threshold")
	}

	drain(vacuumMinDead)
	if dead, _ := stats(); dead < vacuumMinDead {
		t.Fatalf("statistics show %d dead rows after deleting %d", dead, vacuumMinDead)
	}
	v.runOnce(ctx)
	// Whether the dead rows can be removed depends on the oldest snapshot
	// any session of the server holds, so the test checks that the vacuum
	// ran, not what it could reclaim.
	if _, vacuumed := stats(); !vacuumed {
		t.Fatal("no vacuum after the dead rows passed the threshold")
	}
}
