package metrics_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/metrics"
)

// TestKeyGauges: held keys are counted per queue, never labelled by key,
// with when the longest-held head failed; a backend without keys exports
// neither gauge.
func TestKeyGauges(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	in := jobq.NewInspector(mem)
	for _, q := range []string{"charges", "ledger"} {
		if err := in.SetQueueKeys(t.Context(), q, jobq.KeyRules{Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	var ps []backend.InsertParams
	for _, k := range []struct{ queue, key string }{{"charges", "a"}, {"charges", "b"}, {"charges", "c"}, {"ledger", "x"}} {
		ps = append(ps, backend.InsertParams{Queue: k.queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, Key: k.key})
	}
	if _, err := mem.JobInsertMany(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	// Fail the heads of a and b (charges); c runs on; x (ledger) is done.
	rows, err := mem.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"charges", "ledger"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 4 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	var outs []backend.Outcome
	for _, r := range rows {
		switch r.Key {
		case "a", "b":
			outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeFail, Error: "declined"})
		case "x":
			outs = append(outs, backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone})
		}
	}
	if _, err := mem.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(t, metrics.Options{StatsCache: -1})
	if err := m.ObserveQueues(in); err != nil {
		t.Fatal(err)
	}
	s := scrapeOf(t, m)
	s.check(t, want{
		"jobq_keys_held{queue=charges}": 2,
		"jobq_keys_held{queue=ledger}":  absent,
	})
	t.Run("promtool", func(t *testing.T) { checkMetrics(t, s.text) })
	oldest, ok := s.value("jobq_keys_held_oldest_timestamp_seconds", map[string]string{"queue": "charges"})
	if at := time.Unix(0, int64(oldest*1e9)); !ok || at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("oldest held head failed at %v, want between %v and now", at, before)
	}

	// Purging both heads frees the keys: the gauges go.
	if _, err := mem.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: "charges"}}); err != nil {
		t.Fatal(err)
	}
	scrapeOf(t, m).check(t, want{"jobq_keys_held{queue=charges}": absent})

	none := newMetrics(t, metrics.Options{StatsCache: -1})
	if err := none.ObserveQueues(jobq.NewInspector(struct{ backend.Backend }{mem})); err != nil {
		t.Fatal(err)
	}
	scrapeOf(t, none).check(t, want{"jobq_keys_held{queue=charges}": absent, "jobq_queue_stats_up": 1})
}
