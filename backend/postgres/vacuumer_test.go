package postgres

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	v := newVacuumer(b)
	stats := func() (dead, vacuums, analyzes int64) { return jobsTableStats(t, b) }
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

// jobsTableStats reads the jobs table's dead rows and how often it was
// vacuumed and analyzed.
func jobsTableStats(t *testing.T, b *Backend) (dead, vacuums, analyzes int64) {
	t.Helper()
	ctx := t.Context()
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

// makeDead leaves n dead rows in b's jobs table and waits until the
// statistics show them.
func makeDead(t *testing.T, b *Backend, n int) {
	t.Helper()
	insertN(t, b, "q", n)
	execTest(t, "DELETE FROM "+quoteIdent(b.Schema())+".jobs")
	waitFor(t, time.Minute, "the statistics to show the dead rows", func() bool {
		dead, _, _ := jobsTableStats(t, b)
		return dead >= int64(n)
	})
}

// TestVacuumerNotOwnerWarnsOnce: a role that does not own the jobs table
// cannot vacuum it (the server skips it with a warning the driver drops).
// The vacuumer says so once, with what to do, then stays quiet, also when
// it looks again after its pause; once the role owns the table it vacuums
// again and says so.
func TestVacuumerNotOwnerWarnsOnce(t *testing.T) {
	t.Parallel()
	owner := openTest(t, Options{NoVacuum: true})
	role, roleURL := testRole(t, owner.Schema())
	logs, logger := newLogRecords()
	b := openSchema(t, roleURL, Options{Schema: owner.Schema(), NoVacuum: true, Logger: logger})
	makeDead(t, owner, 10)
	v := newVacuumer(b)
	v.minDead = 1
	for range 3 {
		v.runOnce(t.Context())
	}
	warnings := logs.at(slog.LevelWarn)
	if len(warnings) != 1 {
		t.Fatalf("after 3 rounds: %d warnings %v, want 1", len(warnings), warnings)
	}
	w := warnings[0]
	for _, want := range []string{"may not vacuum", "owner", "MAINTAIN", "NoVacuum"} {
		if !strings.Contains(w.Msg, want) {
			t.Errorf("warning %q does not say %q", w.Msg, want)
		}
	}
	if w.Attrs["role"] != role || w.Attrs["schema"] != b.Schema() {
		t.Errorf("warning attributes %v, want role %s and schema %s", w.Attrs, role, b.Schema())
	}
	if _, vacuums, _ := jobsTableStats(t, owner); vacuums != 0 {
		t.Fatalf("%d vacuums by a role that may not vacuum", vacuums)
	}

	// After the pause it looks again, quietly while nothing changed.
	v.idleUntil = time.Time{}
	v.runOnce(t.Context())
	if n := len(logs.at(slog.LevelWarn)); n != 1 {
		t.Fatalf("%d warnings after looking again, want still 1", n)
	}

	execTest(t, "ALTER TABLE "+quoteIdent(b.Schema())+".jobs OWNER TO "+role)
	v.idleUntil = time.Time{}
	v.runOnce(t.Context())
	if _, vacuums, _ := jobsTableStats(t, owner); vacuums != 1 {
		t.Fatalf("%d vacuums once the role owns the table, want 1", vacuums)
	}
	if infos := logs.at(slog.LevelInfo); len(infos) != 1 || !strings.Contains(infos[0].Msg, "may vacuum") {
		t.Fatalf("info lines %v, want one saying the role may vacuum again", infos)
	}
}

// TestVacuumerOneAtATime: while another process holds the schema's vacuum
// lock, a vacuumer skips its round without vacuuming; once the lock is
// free it vacuums, and gives the lock back afterwards.
func TestVacuumerOneAtATime(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	makeDead(t, b, 10)
	v := newVacuumer(b)
	v.minDead = 1

	// The other process: a session of its own holding the lock.
	other, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	lockName := vacuumLockPrefix + b.Schema()
	var ok bool
	if err := other.QueryRow(t.Context(), sqlVacuumLock, lockName).Scan(&ok); err != nil || !ok {
		t.Fatalf("take the vacuum lock: %v, %v", ok, err)
	}
	v.runOnce(t.Context())
	if _, vacuums, _ := jobsTableStats(t, b); vacuums != 0 {
		t.Fatalf("%d vacuums while another process held the vacuum lock, want 0", vacuums)
	}
	if err := other.QueryRow(t.Context(), sqlVacuumUnlock, lockName).Scan(&ok); err != nil || !ok {
		t.Fatalf("release the vacuum lock: %v, %v", ok, err)
	}

	v.runOnce(t.Context())
	if _, vacuums, _ := jobsTableStats(t, b); vacuums != 1 {
		t.Fatalf("%d vacuums once the lock was free, want 1", vacuums)
	}
	if err := other.QueryRow(t.Context(), sqlVacuumLock, lockName).Scan(&ok); err != nil || !ok {
		t.Fatalf("the vacuumer kept the vacuum lock after its round (taken: %v, %v)", ok, err)
	}
}
