package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// skewedProc is a process whose clock is off by skew, using PostgreSQL
// through a Backend of its own (a pool, as a process has) on a shared
// schema. Like redis's skewed wrapper it stands for a clock this process
// cannot really shift (Go reads CLOCK_REALTIME through the vDSO), but it
// needs less: the PostgreSQL backend sends no time of the process's clock
// in a claim or a sweep (both read now() on the server), so what the skew
// reaches is only what the process computes itself from its clock and
// sends: here a deadline.
type skewedProc struct {
	*Backend
	skew time.Duration
}

// now is the process's clock.
func (p skewedProc) now() time.Time { return time.Now().Add(p.skew) }

// passed reports whether deadline d has passed by the process's clock.
func (p skewedProc) passed(d time.Time) bool { return backend.Expired(d, p.now()) }

// serverNow reads the server's clock, the one that decides deadlines.
func serverNow(t *testing.T, url string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to read the server's clock: %v", err)
	}
	defer conn.Close(context.Background())
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatalf("read the server's clock: %v", err)
	}
	return now
}

// TestSkewDeadlineServerClockDecides: a deadline is the server's to
// enforce, whatever the clocks of the processes that set it and claim
// the job say.
//
// A process whose clock is 3s ahead enqueues two jobs, each with a
// deadline 300ms ahead by its own clock: by the server's clock they are
// 3.3s ahead. Then:
//
//   - once the deadline has passed by that process's clock but not by
//     the server's, its claim returns job b: the server's clock says the
//     job may still start;
//   - once the deadline has passed by the server's clock, a process whose
//     clock is 10 minutes behind (so that by its clock the deadline is
//     still about 10 minutes away) claims nothing, and its LeaseSweep
//     expires job a into failed jobs with backend.DeadlineError of the
//     deadline as sent, its attempts unchanged, while job b, claimed in
//     time, stays reserved (a deadline is about starting).
func TestSkewDeadlineServerClockDecides(t *testing.T) {
	t.Parallel()
	url, schema := testURL(t), testSchema(t)
	ahead := skewedProc{openSchema(t, url, Options{Schema: schema}), 3 * time.Second}
	behind := skewedProc{openSchema(t, url, Options{Schema: schema}), -10 * time.Minute}
	ctx := t.Context()

	deadline := ahead.now().Add(300 * time.Millisecond).Truncate(time.Microsecond)
	insert := func(queue string) int64 {
		t.Helper()
		p := testJob(queue)
		p.Deadline = deadline
		res, err := ahead.JobInsertMany(ctx, []backend.InsertParams{p})
		if err != nil {
			t.Fatalf("insert into %s with a deadline: %v", queue, err)
		}
		return res[0].ID
	}
	jobA, jobB := insert("a"), insert("b")

	// The deadline passes by the ahead process's clock, 3s before the
	// server's: in between, that process's claim gets job b.
	waitFor(t, time.Minute, "the deadline to pass by the ahead clock", func() bool { return ahead.passed(deadline) })
	if now := serverNow(t, url); !now.Before(deadline.Add(-time.Second)) {
		t.Skipf("the machine is too slow for this test: the server's clock %s is within a second of the deadline %s already", now, deadline)
	}
	rows, err := ahead.JobClaim(ctx, backend.ClaimParams{Queues: []string{"b"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 1 || rows[0].ID != jobB {
		t.Fatalf("claim before the server's deadline by a process whose clock says it passed: %v, %v; want job %d", rows, err, jobB)
	}
	if rows[0].ReservedAt.After(deadline) || !ahead.passed(deadline) {
		t.Errorf("job b reserved at %s by the server's clock, deadline %s; the claimer's clock %s", rows[0].ReservedAt, deadline, ahead.now())
	}
	tokenB := rows[0].Token

	// The deadline passes by the server's clock; by the behind process's
	// it is ten minutes away.
	waitFor(t, time.Minute, "the deadline to pass by the server's clock", func() bool { return serverNow(t, url).After(deadline) })
	if behind.passed(deadline) {
		t.Fatalf("by the behind clock %s the deadline %s has passed: the skew is too small to show anything", behind.now(), deadline)
	}
	rows, err = behind.JobClaim(ctx, backend.ClaimParams{Queues: []string{"a"}, Max: 1, Lease: time.Hour})
	if err != nil || len(rows) != 0 {
		t.Fatalf("claim after the server's deadline by a process whose clock says the deadline is ahead: %v, %v; want nothing", rows, err)
	}
	sw, err := behind.LeaseSweep(ctx, backend.SweepParams{})
	if err != nil {
		t.Fatalf("LeaseSweep: %v", err)
	}
	if sw.Expired != 1 || len(sw.Jobs) != 1 || sw.Jobs[0].Ref.ID != jobA || !sw.Jobs[0].Expired || !sw.Jobs[0].Failed || sw.Jobs[0].Ref.Attempt != 0 {
		t.Fatalf("LeaseSweep = %+v; want job %d expired, never claimed", sw, jobA)
	}
	f, err := behind.FailedGet(ctx, jobA)
	if err != nil {
		t.Fatalf("FailedGet(%d): %v", jobA, err)
	}
	if want := backend.DeadlineError(deadline); f.Error != want || f.Attempts != 0 || !f.FailedAt.After(deadline) {
		t.Errorf("failed job %d: error %q, attempts %d, failed at %s; want %q, 0, after %s", jobA, f.Error, f.Attempts, f.FailedAt, want, deadline)
	}
	row, err := behind.JobGet(ctx, jobB)
	if err != nil || row.Status != backend.StateReserved || row.Token != tokenB {
		t.Errorf("job b after the sweep: %+v, %v; want still reserved by its claim", row, err)
	}
}
