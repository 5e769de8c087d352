package sqlite

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestKeysMaxTurn: qKeysMaxTurn, the one statement an insert reads its
// keys' turns with, gives each key the turn of its newest live job, as a
// plain reading of the jobs table does, across priorities, after some
// jobs ended, and nothing for keys without live jobs.
func TestKeysMaxTurn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "turns.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(7, 36))
	for range 300 {
		p := backend.InsertParams{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1,
			Key: fmt.Sprintf("k%d", rng.IntN(12)), Priority: rng.IntN(3)}
		if _, err := b.JobInsertMany(ctx, []backend.InsertParams{p}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 2, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			outs := make([]backend.Outcome, len(rows))
			for i, r := range rows {
				outs[i] = backend.Outcome{Ref: r.Ref(), Kind: backend.OutcomeDone}
			}
			if _, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: outs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := keyTurns(t, b, `SELECT key, turn FROM jobs j WHERE queue = 'q' AND key IS NOT NULL
		AND id = (SELECT MAX(id) FROM jobs WHERE queue = 'q' AND key = j.key)`)
	keys := []string{"none", "k0"}
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	list, _ := json.Marshal(keys)
	got := keyTurns(t, b, qKeysMaxTurn, "q", string(list))
	if len(want) < 5 || !maps.Equal(got, want) {
		t.Fatalf("qKeysMaxTurn = %v\nwant %v", got, want)
	}
}

// keyTurns runs a query of (key, turn) rows on b's read connections.
func keyTurns(t *testing.T, b *Backend, query string, args ...any) map[string]int64 {
	t.Helper()
	rows, err := b.r.QueryContext(t.Context(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var turn int64
		if err := rows.Scan(&k, &turn); err != nil {
			t.Fatal(err)
		}
		out[k] = turn
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
