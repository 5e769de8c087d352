package backendtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
)

// UniqueStatesAsMemory runs random batches of inserts of a few unique keys
// with state sets, conflict modes and KeepLast, between claims, retries,
// releases and completions (kept or not), on a backend open gives and on the memory
// backend (the reference), and fails t unless they answer alike: the
// same jobs made, the same duplicates and replacements, the same jobs
// claimed. Batches of 700 span several insert statements and repeat each
// key many times, which the suite's areas do not reach; name is the
// backend's, for the failure.
func UniqueStatesAsMemory(t *testing.T, name string, open func(t *testing.T) backend.Backend) {
	t.Helper()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			mem := memory.New(memory.Options{})
			defer mem.Close()
			want := uniqueScenario(t, mem, seed)
			got := uniqueScenario(t, open(t), seed)
			for i := range max(len(got), len(want)) {
				if i >= len(got) || i >= len(want) || got[i] != want[i] {
					for j := max(0, i-40); j < i; j++ {
						t.Log(want[j])
					}
					t.Fatalf("step %d: %s %q, memory %q", i, name, logAt(got, i), logAt(want, i))
				}
			}
		})
	}
}

// logAt is line i of log, or "(nothing)" past its end.
func logAt(log []string, i int) string {
	if i < len(log) {
		return log[i]
	}
	return "(nothing)"
}

// uniqueScenario runs the seed's steps on b and returns what it answered,
// with job IDs named by the order the jobs were made in.
func uniqueScenario(t *testing.T, b backend.Backend, seed uint64) []string {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	names := map[int64]int{}
	name := func(id int64) int {
		if n, ok := names[id]; ok {
			return n
		}
		names[id] = len(names) + 1
		return names[id]
	}
	sets := []backend.UniqueStates{0, backend.UniqueWaiting, backend.UniqueRunning, backend.UniquePending,
		backend.UniqueScheduled, backend.UniqueRetrying | backend.UniqueRunning, backend.UniquePending | backend.UniqueRunning,
		backend.UniqueAllStates | backend.UniqueCompleted, backend.UniqueWaiting | backend.UniqueCompleted}
	var held []*backend.JobRow
	var log []string
	for step := range 40 {
		switch r := rng.IntN(10); {
		case r < 5:
			n := []int{1, 2, 5, 60, 700}[rng.IntN(5)]
			ps := make([]backend.InsertParams, n)
			for i := range ps {
				// A priority of its own orders the claims of a batch's
				// jobs (due at once) without their IDs, which need not
				// follow the batch's order (on PostgreSQL a job taking a
				// key over may come from a later statement).
				p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte(fmt.Sprintf(`{"s":%d,"i":%d}`, step, i)), MaxAttempts: 5, Priority: backend.MaxPriority - i}
				if rng.IntN(10) > 0 {
					p.UniqueKey = fmt.Sprintf("k%d", rng.IntN(6))
					p.UniqueStates = sets[rng.IntN(len(sets))]
					switch rng.IntN(6) {
					case 0, 1:
						p.OnConflict, p.KeepLast = backend.ConflictReplace, rng.IntN(2) == 0
					case 2:
						p.OnConflict, p.Debounce, p.DebounceMax = backend.ConflictDebounce, time.Hour, 2*time.Hour
					}
				}
				if rng.IntN(3) == 0 {
					p.Delay = time.Hour
				}
				ps[i] = p
			}
			res, err := b.JobInsertMany(ctx, ps)
			if err != nil {
				t.Fatalf("step %d: insert: %v", step, err)
			}
			for i, r := range res {
				p := ps[i]
				log = append(log, fmt.Sprintf("%d insert %d/%d %s %s %s last %t delay %s: job %d duplicate %t replaced %t",
					step, i, n, p.UniqueKey, p.UniqueStates, p.OnConflict, p.KeepLast, p.Delay, name(r.ID), r.Duplicate, r.Replaced))
			}
		case r < 7:
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1 + rng.IntN(3), Lease: time.Hour})
			if err != nil {
				t.Fatalf("step %d: claim: %v", step, err)
			}
			var got []int
			for _, row := range rows {
				got = append(got, name(row.ID))
				held = append(held, row)
			}
			slices.Sort(got)
			log = append(log, fmt.Sprintf("%d claimed %v", step, got))
		default:
			if len(held) == 0 {
				continue
			}
			k := rng.IntN(len(held))
			row := held[k]
			held = slices.Delete(held, k, k+1)
			var err error
			switch rng.IntN(4) {
			case 0:
				_, err = b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeRetry, RetryDelay: time.Hour, Error: "again"}}})
			case 1:
				_, err = b.JobRelease(ctx, []backend.JobRef{row.Ref()})
			case 2:
				_, err = b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeDone}}})
			default:
				// Kept, a job of a set with UniqueCompleted holds its key on.
				_, err = b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{{Ref: row.Ref(), Kind: backend.OutcomeDone, Keep: true}}})
			}
			if err != nil {
				t.Fatalf("step %d: end job %d: %v", step, name(row.ID), err)
			}
		}
	}
	stats, err := b.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		log = append(log, fmt.Sprintf("stats %s: %d pending, %d scheduled, %d reserved", s.Queue, s.Pending, s.Scheduled, s.Reserved))
	}
	return log
}
