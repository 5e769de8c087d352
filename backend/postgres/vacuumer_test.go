package postgres

import (
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestVacuumerCleansDeadRows: once dead rows pass the threshold, one pass
// of the vacuumer vacuums the jobs table; below it, nothing happens. The
// first vacuum also analyzes the never-analyzed table; the next one, within
// analyzeEvery, does not.
func TestVacuumerCleansDeadRows(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	ctx := t.Context()
	v := &vacuumer{b: b}
	stats := func() (dead, vacuums, analyzes int64) {
		// pg_stat_force_next_flush makes this session's counts visible now
		// instead of within a second.
		if _, err := b.pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		err := b.pool.QueryRow(ctx, `SELECT n_dead_tup, vacuum_count, analyze_count FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'jobs'`, b.Schema()).Scan(&dead, &vacuums, &analyzes)
		if err != nil {
			t.Fatal(err)
		}
		return dead, vacuums, analyzes
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
	if _, vacuums, _ := stats(); vacuums != 0 {
		t.Fatal("vacuumed below the dead-row threshold")
	}

	// Whether the dead rows can be removed depends on the oldest snapshot
	// any session of the server holds, so the test checks that the vacuum
	// ran, not what it could reclaim.
	// Each pooled session reports its counts within about a second.
	waitDead := func() {
		deadline := time.Now().Add(15 * time.Second)
		for {
			dead, _, _ := stats()
			if dead >= vacuumMinDead {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("statistics show %d dead rows after deleting %d", dead, vacuumMinDead)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	drain(vacuumMinDead)
	waitDead()
	v.runOnce(ctx)
	if _, vacuums, analyzes := stats(); vacuums != 1 || analyzes != 1 {
		t.Fatalf("after the first pass over the threshold: %d vacuums, %d analyzes; want 1 and 1 (never analyzed before)", vacuums, analyzes)
	}

	drain(vacuumMinDead)
	waitDead()
	v.runOnce(ctx)
	if _, vacuums, analyzes := stats(); vacuums != 2 || analyzes != 1 {
		t.Fatalf("after the second pass: %d vacuums, %d analyzes; want 2 and still 1 (analyzed %s ago at most)", vacuums, analyzes, analyzeEvery)
	}
}
