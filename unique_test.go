package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// invoice names its unique fields: two enqueues for one customer and
// month are one job whatever their request IDs.
type invoice struct {
	Customer  string `json:"customer" jobq:"unique"`
	Month     string `json:"month" jobq:"unique"`
	RequestID string `json:"request_id"`
}

func (invoice) Kind() string { return "invoice" }

// liveJobs counts the live jobs of typ, pending or scheduled.
func liveJobs(t *testing.T, b backend.Backend, typ string) int {
	t.Helper()
	r, ok := backend.As[backend.Retainer](b)
	if !ok {
		t.Fatal("backend lists no jobs")
	}
	n := 0
	for _, st := range []backend.JobState{backend.StatePending, backend.StateScheduled} {
		rows, err := r.JobList(context.Background(), backend.JobListParams{State: st, Filter: backend.JobFilter{Type: typ}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n += len(rows)
	}
	return n
}

// storeClient opens the store at url for one test and a client on it.
func storeClient(t *testing.T, url string) (backend.Backend, *jobq.Client) {
	t.Helper()
	b, err := backend.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, mustClient(t, b, jobq.ClientConfig{})
}

// TestUniqueByParts, on memory and every durable backend: an identity
// built from the type, canonical args (or the tagged fields), the queue
// and a period bucket lets one job of it live at a time; the store
// enforces it (a duplicate answers the existing job's ID and
// ErrDuplicate, in a batch too), and jobs that differ in a part each get
// their own job.
func TestUniqueByParts(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, c := storeClient(t, st.URL(t))
			byArgs := jobq.Unique(jobq.UniqueBy{Args: true})

			first, err := c.Enqueue(ctx, "u.args", json.RawMessage(`{"a":1,"b":{"y":2,"x":3}}`), byArgs)
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.Enqueue(ctx, "u.args", json.RawMessage(`{ "b":{"x":3, "y":2}, "a":1 }`), byArgs)
			if !errors.Is(err, jobq.ErrDuplicate) || id != first {
				t.Fatalf("same args in another key order: id %d, err %v; want %d and ErrDuplicate", id, err, first)
			}
			if _, err := c.Enqueue(ctx, "u.args", json.RawMessage(`{"a":2,"b":{"y":2,"x":3}}`), byArgs); err != nil {
				t.Fatalf("other args: %v, want a new job", err)
			}
			if _, err := c.Enqueue(ctx, "u.args2", json.RawMessage(`{"a":1,"b":{"y":2,"x":3}}`), byArgs); err != nil {
				t.Fatalf("same args, other type: %v, want a new job", err)
			}
			if n := liveJobs(t, b, "u.args"); n != 2 {
				t.Fatalf("%d u.args jobs stored, want 2", n)
			}

			inv, err := c.EnqueueArgs(ctx, invoice{Customer: "c1", Month: "2026-11", RequestID: "r1"}, byArgs)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := c.EnqueueArgs(ctx, invoice{Customer: "c1", Month: "2026-11", RequestID: "r2"}, byArgs); !errors.Is(err, jobq.ErrDuplicate) || id != inv {
				t.Fatalf("tagged fields equal, untagged differ: id %d, err %v; want %d and ErrDuplicate", id, err, inv)
			}
			if _, err := c.EnqueueArgs(ctx, invoice{Customer: "c1", Month: "2026-12", RequestID: "r1"}, byArgs); err != nil {
				t.Fatalf("a tagged field differs: %v, want a new job", err)
			}

			byQueue := jobq.Unique(jobq.UniqueBy{Queue: true})
			q1, err := c.Enqueue(ctx, "u.queue", nil, byQueue, jobq.Queue("uq1"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Enqueue(ctx, "u.queue", nil, byQueue, jobq.Queue("uq2")); err != nil {
				t.Fatalf("same type, other queue, by queue: %v, want a new job", err)
			}
			if id, err := c.Enqueue(ctx, "u.queue", nil, byQueue, jobq.Queue("uq1")); !errors.Is(err, jobq.ErrDuplicate) || id != q1 {
				t.Fatalf("same type, same queue, by queue: id %d, err %v; want %d and ErrDuplicate", id, err, q1)
			}
			byType := jobq.Unique(jobq.UniqueBy{})
			t1, err := c.Enqueue(ctx, "u.type", nil, byType, jobq.Queue("uq1"))
			if err != nil {
				t.Fatal(err)
			}
			if id, err := c.Enqueue(ctx, "u.type", nil, byType, jobq.Queue("uq2")); !errors.Is(err, jobq.ErrDuplicate) || id != t1 {
				t.Fatalf("by type alone, in another queue: id %d, err %v; want %d and ErrDuplicate", id, err, t1)
			}

			hour := time.Now().Add(48 * time.Hour).Truncate(time.Hour)
			byHour := jobq.Unique(jobq.UniqueBy{Period: time.Hour})
			p1, err := c.Enqueue(ctx, "u.period", nil, byHour, jobq.RunAt(hour.Add(5*time.Minute)))
			if err != nil {
				t.Fatal(err)
			}
			if id, err := c.Enqueue(ctx, "u.period", nil, byHour, jobq.RunAt(hour.Add(55*time.Minute))); !errors.Is(err, jobq.ErrDuplicate) || id != p1 {
				t.Fatalf("due in the same hour: id %d, err %v; want %d and ErrDuplicate", id, err, p1)
			}
			if _, err := c.Enqueue(ctx, "u.period", nil, byHour, jobq.RunAt(hour.Add(65*time.Minute))); err != nil {
				t.Fatalf("due in the next hour: %v, want a new job", err)
			}

			res, err := c.EnqueueMany(ctx, []jobq.JobSpec{
				{Type: "u.batch", Payload: json.RawMessage(`{"n":1,"m":2}`), Options: []jobq.EnqueueOption{byArgs}},
				{Type: "u.batch", Payload: json.RawMessage(`{"m":2,"n":1}`), Options: []jobq.EnqueueOption{byArgs}},
				{Type: "u.batch", Payload: json.RawMessage(`{"n":2}`), Options: []jobq.EnqueueOption{byArgs}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID || res[2].Duplicate {
				t.Fatalf("batch results %+v: want the second a duplicate of the first", res)
			}
			if n := liveJobs(t, b, "u.batch"); n != 2 {
				t.Fatalf("%d u.batch jobs stored, want 2", n)
			}
		})
	}
}

// TestUniqueByRefusals: a period under a second is refused with a
// specific error and nothing is written.
func TestUniqueByRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	_, err := c.Enqueue(ctx, "u.bad", nil, jobq.Unique(jobq.UniqueBy{Period: 500 * time.Millisecond}))
	if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "unique period") {
		t.Fatalf("period 500ms: %v, want ErrInvalidInput naming the unique period", err)
	}
	if n := liveJobs(t, b, "u.bad"); n != 0 {
		t.Fatalf("%d jobs stored after a refused enqueue", n)
	}
}

// TestUniqueKeyIsAPart: UniqueKey given with Unique is one more part of
// the identity, so one key may have one job per period.
func TestUniqueKeyIsAPart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemory(t, nil)
	c := mustClient(t, b, jobq.ClientConfig{})
	day := time.Now().Add(72 * time.Hour).Truncate(24 * time.Hour)
	daily := jobq.Unique(jobq.UniqueBy{Period: 24 * time.Hour})
	a, err := c.Enqueue(ctx, "report", nil, daily, jobq.UniqueKey("acct-1"), jobq.RunAt(day.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := c.Enqueue(ctx, "report", nil, daily, jobq.UniqueKey("acct-1"), jobq.RunAt(day.Add(20*time.Hour))); !errors.Is(err, jobq.ErrDuplicate) || id != a {
		t.Fatalf("same key, same day: id %d, err %v; want %d and ErrDuplicate", id, err, a)
	}
	if _, err := c.Enqueue(ctx, "report", nil, daily, jobq.UniqueKey("acct-2"), jobq.RunAt(day.Add(time.Hour))); err != nil {
		t.Fatalf("other key, same day: %v, want a new job", err)
	}
	if _, err := c.Enqueue(ctx, "report", nil, daily, jobq.UniqueKey("acct-1"), jobq.RunAt(day.Add(25*time.Hour))); err != nil {
		t.Fatalf("same key, next day: %v, want a new job", err)
	}
	info, err := jobq.NewInspector(b).Job(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Live.UniqueKey, "jobq:unique:") {
		t.Fatalf("stored unique key %q: want the computed identity", info.Live.UniqueKey)
	}
}

// TestReplaceAndDebounce, on memory and every durable backend: Replace
// gives the waiting duplicate the new payload, Debounce inserts the job d
// from now and pushes it on each duplicate; both are refused without a
// unique key, and Debounce with a due time of its own.
func TestReplaceAndDebounce(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, c := storeClient(t, st.URL(t))
			byQueue := jobq.Unique(jobq.UniqueBy{Queue: true})
			first, err := c.Enqueue(ctx, "r.job", map[string]int{"v": 1}, byQueue, jobq.Delay(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.EnqueueMany(ctx, []jobq.JobSpec{{Type: "r.job", Payload: map[string]int{"v": 2}, Options: []jobq.EnqueueOption{byQueue, jobq.Replace()}}})
			if err != nil || !res[0].Duplicate || !res[0].Replaced || res[0].ID != first {
				t.Fatalf("replace: %+v, %v; want job %d replaced", res, err, first)
			}
			info, err := jobq.NewInspector(b).Job(ctx, first)
			if err != nil || string(info.Live.Payload) != `{"v":2}` || info.State != jobq.StatePending {
				t.Fatalf("replaced job: %+v, %v; want pending with {\"v\":2}", info.Live, err)
			}

			deb := []jobq.EnqueueOption{jobq.UniqueKey("d"), jobq.Debounce(time.Hour, 3*time.Hour)}
			d1, err := c.Enqueue(ctx, "d.job", map[string]int{"n": 1}, deb...)
			if err != nil {
				t.Fatal(err)
			}
			row, _ := b.JobGet(ctx, d1)
			if row == nil || row.AvailableAt.Sub(row.CreatedAt) != time.Hour {
				t.Fatalf("debounced job %+v: want due an hour after it was created", row)
			}
			id, err := c.Enqueue(ctx, "d.job", map[string]int{"n": 2}, deb...)
			if !errors.Is(err, jobq.ErrDuplicate) || id != d1 || !strings.Contains(err.Error(), "took this one's payload") {
				t.Fatalf("second debounced enqueue: %d, %v; want job %d replaced", id, err, d1)
			}
			if row, _ := b.JobGet(ctx, d1); row == nil || string(row.Payload) != `{"n":2}` || row.AvailableAt.Before(row.CreatedAt.Add(time.Hour)) {
				t.Fatalf("debounced job after a duplicate: %+v", row)
			}

			for _, bad := range [][]jobq.EnqueueOption{
				{jobq.Replace()},
				{jobq.UniqueKey("x"), jobq.Debounce(time.Minute, time.Hour), jobq.Delay(time.Second)},
				{jobq.UniqueKey("x"), jobq.Debounce(time.Hour, time.Minute)},
			} {
				if _, err := c.Enqueue(ctx, "bad.job", nil, bad...); !errors.Is(err, jobq.ErrInvalidInput) {
					t.Fatalf("bad conflict options: %v, want ErrInvalidInput", err)
				}
			}
			if n := liveJobs(t, b, "bad.job"); n != 0 {
				t.Fatalf("%d jobs stored by refused enqueues", n)
			}
		})
	}
}

// TestUniqueStatesOption: UniqueBy.States reaches the store. With
// UniqueWaiting a running job lets a new one of its identity in, a
// waiting one does not, on every store.
func TestUniqueStatesOption(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, c := storeClient(t, st.URL(t))
			opt := jobq.Unique(jobq.UniqueBy{Args: true, States: jobq.UniqueWaiting})
			first, err := c.Enqueue(ctx, "s.job", map[string]int{"v": 1}, opt)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := c.Enqueue(ctx, "s.job", map[string]int{"v": 1}, opt); !errors.Is(err, jobq.ErrDuplicate) || id != first {
				t.Fatalf("enqueue while one waits = %d, %v; want job %d, ErrDuplicate", id, err, first)
			}
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"default"}, Max: 1, Lease: time.Minute})
			if err != nil || len(rows) != 1 || rows[0].ID != first {
				t.Fatalf("claim = %v, %v; want job %d", rows, err, first)
			}
			next, err := c.Enqueue(ctx, "s.job", map[string]int{"v": 1}, opt)
			if err != nil || next == first {
				t.Fatalf("enqueue while one runs = %d, %v; want a new job", next, err)
			}
		})
	}
}

// TestUniqueCompletedRetained, on memory and every durable backend: with
// UniqueCompleted in its states, a job that a worker completed and kept
// (Retention.Completed) keeps its identity, so the next enqueue of it
// names the completed job; a type the retention deletes at once frees it.
func TestUniqueCompletedRetained(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, c := storeClient(t, st.URL(t))
			reg := jobq.NewRegistry()
			for _, typ := range []string{"once.job", "gone.job"} {
				reg.HandleFunc(typ, func(context.Context, *jobq.Job) error { return nil })
			}
			cfg := fastConfig()
			cfg.Retention = jobq.Retention{Completed: time.Hour, Types: map[string]jobq.TypeRetention{"gone.job": {DeleteAtOnce: true}}}
			startWorker(t, b, reg, cfg)
			opt := jobq.Unique(jobq.UniqueBy{Args: true, States: jobq.UniqueAllStates | jobq.UniqueCompleted})
			for _, typ := range []string{"once.job", "gone.job"} {
				first, err := c.Enqueue(ctx, typ, map[string]int{"v": 1}, opt)
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, settle)
				_, err = c.Wait(wctx, first)
				cancel()
				if typ == "gone.job" {
					if !errors.Is(err, jobq.ErrJobGone) {
						t.Fatalf("Wait(%s) = %v, want ErrJobGone: its type is deleted at once", typ, err)
					}
					eventually(t, settle, "the deleted job's identity to be free", func() bool {
						id, err := c.Enqueue(ctx, typ, map[string]int{"v": 1}, opt)
						return err == nil && id != first
					})
					continue
				}
				if err != nil {
					t.Fatalf("Wait(%s) = %v", typ, err)
				}
				if id, err := c.Enqueue(ctx, typ, map[string]int{"v": 1}, opt); !errors.Is(err, jobq.ErrDuplicate) || id != first {
					t.Fatalf("enqueue after the kept job completed = %d, %v; want job %d, ErrDuplicate", id, err, first)
				}
			}
		})
	}
}

// TestUniqueByStatesJSON: the states of UniqueBy travel as names in the
// admin API's and the command line's JSON, and an unknown name is
// refused, never read as every state.
func TestUniqueByStatesJSON(t *testing.T) {
	by := jobq.UniqueBy{Args: true, States: jobq.UniqueWaiting}
	b, err := json.Marshal(by)
	if err != nil || string(b) != `{"args":true,"states":["pending","scheduled"]}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var back jobq.UniqueBy
	if err := json.Unmarshal(b, &back); err != nil || back != by {
		t.Fatalf("unmarshal = %+v, %v; want %+v", back, err, by)
	}
	done := jobq.UniqueBy{States: jobq.UniqueAllStates | jobq.UniqueCompleted}
	if b, err := json.Marshal(done); err != nil || string(b) != `{"states":["pending","scheduled","running","retrying","completed"]}` {
		t.Fatalf("marshal with completed = %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"states":["finished"]}`), &back); err != nil || back.States != jobq.UniqueCompleted {
		t.Fatalf(`unmarshal ["finished"] = %+v, %v; want completed`, back, err)
	}
	if err := json.Unmarshal([]byte(`{"states":["waiting"]}`), &back); !errors.Is(err, jobq.ErrInvalidInput) {
		t.Fatalf("unknown state: %v, want ErrInvalidInput", err)
	}
}
