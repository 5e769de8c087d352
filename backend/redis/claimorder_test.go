package redis

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestMigrateLayout4: a prefix of layout 4 keeps its ready jobs in p
// (readyOld), scored -priority with the bare ID as member. Migrate moves
// them into q (ready), the ready set in claim order, and raises the
// marker; afterwards the jobs are claimed by priority, then due time, then
// ID. A layout-4 process still running may put jobs in p after that: a
// cancel finds them there, stats and lists count them, and the next lease
// sweep takes them over (claims never read p, so that they pay nothing
// for an upgrade long done).
func TestMigrateLayout4(t *testing.T) {
	b := openTest(t, Options{})
	ctx := t.Context()
	q := b.keys.queue("q")
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	insert := func(prio int, runAt time.Time) int64 {
		t.Helper()
		p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 3, Priority: prio, RunAt: runAt}
		res, err := b.JobInsertMany(ctx, []backend.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].ID
	}
	// toLayout4 moves the jobs ids from q into p as layout 4 wrote them.
	toLayout4 := func(ids ...int64) {
		t.Helper()
		got, err := b.c.rdb.Do(ctx, b.c.rdb.B().Zrange().Key(q.ready).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range got {
			if len(z.Member) != 27 {
				t.Fatalf("member %q of q: want 14 hex digits of due time and 13 of ID", z.Member)
			}
			if !slices.ContainsFunc(ids, func(id int64) bool { return tsHex(id) == z.Member[14:] }) {
				continue
			}
			mustOK(t, b.c.rdb.Do(ctx, b.c.rdb.B().Zrem().Key(q.ready).Member(z.Member).Build()).Error())
			mustOK(t, b.c.rdb.Do(ctx, b.c.rdb.B().Zadd().Key(q.readyOld).ScoreMember().ScoreMember(z.Score, z.Member[14:]).Build()).Error())
		}
	}
	card := func(key string) int64 {
		t.Helper()
		n, err := b.c.rdb.Do(ctx, b.c.rdb.B().Zcard().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	j1 := insert(0, base)
	j2 := insert(0, base.Add(-time.Hour))
	j3 := insert(0, time.Time{}) // plain: in l, as in layout 4
	j4 := insert(2, base)
	toLayout4(j1, j2, j4)
	if card(q.readyOld) != 3 || card(q.ready) != 0 {
		t.Fatalf("layout-4 state: p %d, q %d; want 3, 0", card(q.readyOld), card(q.ready))
	}
	mustOK(t, b.c.set(ctx, b.keys.schema, "4"))
	if _, err := Open(ctx, testURL(t), Options{KeyPrefix: b.KeyPrefix(), Existing: true, Logger: quiet}); !errors.Is(err, backend.ErrNoSchema) {
		t.Fatalf("Existing open of layout 4: %v; want ErrNoSchema", err)
	}
	if v, err := b.Migrate(ctx); err != nil || v != LayoutVersion {
		t.Fatalf("Migrate = %d, %v; want %d", v, err, LayoutVersion)
	}
	if card(q.readyOld) != 0 || card(q.ready) != 3 {
		t.Fatalf("after Migrate: p %d, q %d; want 0, 3", card(q.readyOld), card(q.ready))
	}

	// What a layout-4 process still running readies now goes to p: j6,
	// due before every other, and j7, cancelled while there.
	j6 := insert(0, base.Add(-3*time.Hour))
	j7 := insert(0, base.Add(-3*time.Hour))
	toLayout4(j6, j7)
	if res, err := b.JobCancel(ctx, []int64{j7}); err != nil || len(res) != 1 || res[0].Outcome != backend.CancelCancelled {
		t.Fatalf("JobCancel of a job in p = %+v, %v; want cancelled", res, err)
	}
	if card(q.readyOld) != 1 {
		t.Fatalf("after the cancel, p holds %d jobs; want 1 (j6)", card(q.readyOld))
	}
	st, err := b.QueueStats(ctx)
	if err != nil || len(st) != 1 || st[0].Pending != 5 {
		t.Fatalf("QueueStats = %+v, %v; want 5 pending", st, err)
	}
	list, err := b.JobList(ctx, backend.JobListParams{State: backend.StatePending})
	if err != nil || len(list) != 5 {
		t.Fatalf("JobList pending = %d jobs, %v; want 5", len(list), err)
	}
	if _, err := b.LeaseSweep(ctx, backend.SweepParams{}); err != nil {
		t.Fatal(err)
	}
	if card(q.readyOld) != 0 || card(q.ready) != 4 {
		t.Fatalf("after a sweep: p %d, q %d; want 0, 4", card(q.readyOld), card(q.ready))
	}

	// By ID (layout 4's order) this would be j4 j1 j2 j3 j6.
	for i, want := range []int64{j4, j6, j2, j1, j3} {
		rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
		if err != nil || len(rows) != 1 || rows[0].ID != want {
			t.Fatalf("claim %d = %v, %v; want job %d", i, rows, err, want)
		}
	}
	if card(q.readyOld) != 0 || card(q.ready) != 0 {
		t.Fatalf("after the claims: p %d, q %d; want both empty", card(q.readyOld), card(q.ready))
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
