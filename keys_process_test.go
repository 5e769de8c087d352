package jobq_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// enqueueKeyed adds perKey jobs of sleep on each of keys keys, interleaved
// (k0, k1, ..., k0, ...), and returns each job's key by ID.
func (r *ctlRun) enqueueKeyed(keys, perKey int, sleep time.Duration) map[int64]string {
	r.t.Helper()
	payload, _ := json.Marshal(ctlPayload{SleepMS: int(sleep / time.Millisecond)})
	var batch []backend.InsertParams
	for i := range perKey * keys {
		batch = append(batch, backend.InsertParams{Queue: r.queue, Type: "ctl", Payload: payload, MaxAttempts: 3, Key: fmt.Sprintf("k%d", i%keys)})
	}
	res, err := r.b.JobInsertMany(r.t.Context(), batch)
	if err != nil {
		r.t.Fatalf("enqueue: %v", err)
	}
	out := make(map[int64]string, len(res))
	for i, x := range res {
		out[x.ID] = batch[i].Key
	}
	return out
}

// peakPerKey returns the most handlers of one key that ran at once, by
// the ledgers' start and end times (one machine's clock), and the records
// of each key in start order.
func peakPerKey(recs []ctlRecord, keyOf map[int64]string) (int, map[string][]ctlRecord) {
	byKey := map[string][]ctlRecord{}
	for _, rec := range recs {
		byKey[keyOf[rec.id]] = append(byKey[keyOf[rec.id]], rec)
	}
	peak := 0
	for _, rs := range byKey {
		for i, a := range rs {
			n := 0
			for _, b := range rs[:i+1] {
				if b.end.After(a.start) {
					n++
				}
			}
			peak = max(peak, n)
		}
	}
	return peak, byKey
}

// TestProcessKeyLimit: 8 keys of 15 jobs under a limit of 2 per key,
// worked by 3 processes of 10 slots: no key ever has more than 2 handlers
// running, every job runs once on its first attempt, and the limit is
// reached (the processes do share the work of one key).
func TestProcessKeyLimit(t *testing.T) {
	for _, st := range ctlStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const keys, perKey, limit = 8, 15, 2
			r := newCtlRun(t, st.url, "keyed")
			if err := r.b.(backend.KeyController).QueueSetKeys(t.Context(), r.queue, backend.KeyRules{Limit: limit}); err != nil {
				t.Fatal(err)
			}
			keyOf := r.enqueueKeyed(keys, perKey, 30*time.Millisecond)
			r.start(3)
			r.waitEmpty(60 * time.Second)
			r.stop()
			recs := r.records()
			r.exactlyOnce(recs, keys*perKey)
			peak, _ := peakPerKey(recs, keyOf)
			t.Logf("%s: %d keys × %d jobs of 30ms, limit %d per key, 3 processes × %d slots: peak per key %d, peak overall %d",
				st.name, keys, perKey, limit, ctlSlots, peak, r.peak())
			if peak != limit {
				t.Fatalf("peak running of one key = %d, want %d", peak, limit)
			}
		})
	}
}

// TestProcessKeyOrdered: 4 ordered keys of 25 jobs worked by 3 processes
// of 10 slots: each key's handlers never overlap and start in enqueue
// order, while the keys run beside each other.
func TestProcessKeyOrdered(t *testing.T) {
	for _, st := range ctlStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const keys, perKey = 4, 25
			r := newCtlRun(t, st.url, "ordered")
			if err := r.b.(backend.KeyController).QueueSetKeys(t.Context(), r.queue, backend.KeyRules{Ordered: true}); err != nil {
				t.Fatal(err)
			}
			keyOf := r.enqueueKeyed(keys, perKey, 5*time.Millisecond)
			r.start(3)
			r.waitEmpty(60 * time.Second)
			r.stop()
			recs := r.records()
			r.exactlyOnce(recs, keys*perKey)
			peak, byKey := peakPerKey(recs, keyOf)
			if peak != 1 {
				t.Fatalf("peak running of one ordered key = %d, want 1", peak)
			}
			for k, rs := range byKey {
				if !slices.IsSortedFunc(rs, func(a, b ctlRecord) int { return cmp.Compare(a.id, b.id) }) {
					t.Fatalf("key %s ran out of enqueue order", k)
				}
			}
			if r.peak() < 2 {
				t.Fatalf("at most %d handlers ran at once over all keys, want the keys to run beside each other", r.peak())
			}
		})
	}
}
