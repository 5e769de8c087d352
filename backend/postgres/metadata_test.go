package postgres

import (
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// TestMetadataInsertPaths: metadata is stored by each of the backend's
// insert statements (one job, a batch through unnest with and without
// unique keys, a COPY batch with and without metadata, a caller's
// transaction) as a jsonb object an operator can query, NULL for none or
// an empty map, and comes back unchanged from JobGet and JobClaim.
func TestMetadataInsertPaths(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	md := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "ünï <&> \"q\""}
	job := func(m map[string]string, key string) backend.InsertParams {
		p := testJob("q")
		p.Metadata, p.UniqueKey = m, key
		return p
	}
	copyBatch := func(withMetadata bool) []backend.InsertParams {
		ps := make([]backend.InsertParams, copyMinRows)
		for i := range ps {
			ps[i] = job(nil, "")
			if withMetadata && i%2 == 0 {
				ps[i].Metadata = md
			}
		}
		return ps
	}
	batches := map[string][]backend.InsertParams{
		"one":              {job(md, "")},
		"one without":      {job(nil, "")},
		"one empty":        {job(map[string]string{}, "")},
		"unnest":           {job(md, ""), job(nil, ""), job(md, "k1"), job(nil, "k2")},
		"copy":             copyBatch(true),
		"copy without any": copyBatch(false),
	}
	want := map[int64]map[string]string{}
	for name, ps := range batches {
		if name == "copy" || name == "copy without any" {
			if !copyable(ps) {
				t.Fatalf("%s: the batch would not go through COPY", name)
			}
		}
		res, err := b.JobInsertMany(t.Context(), ps)
		if err != nil {
			t.Fatalf("%s: JobInsertMany: %v", name, err)
		}
		for i, r := range res {
			want[r.ID] = ps[i].Metadata
		}
	}
	err := pgx.BeginFunc(t.Context(), b.Pool(), func(tx pgx.Tx) error {
		ps := []backend.InsertParams{job(md, ""), job(nil, "k3")}
		res, err := b.JobInsertManyTx(t.Context(), tx, ps)
		for i, r := range res {
			want[r.ID] = ps[i].Metadata
		}
		return err
	})
	if err != nil {
		t.Fatalf("JobInsertManyTx: %v", err)
	}

	var withMetadata int64
	for id, m := range want {
		if len(m) == 0 {
			want[id] = nil
			continue
		}
		withMetadata++
		row, err := b.JobGet(t.Context(), id)
		if err != nil || !maps.Equal(row.Metadata, m) {
			t.Fatalf("JobGet(%d).Metadata = %v, %v; want %v", id, row.Metadata, err, m)
		}
	}
	s := quoteIdent(b.Schema())
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".jobs WHERE metadata IS NOT NULL"); n != withMetadata {
		t.Errorf("%d rows with metadata, want %d (none or an empty map is NULL)", n, withMetadata)
	}
	if n := mustInt(t, b, "SELECT count(*) FROM "+s+".jobs WHERE metadata->>'tenant' = $1 AND jsonb_typeof(metadata) = 'object'", md["tenant"]); n != withMetadata {
		t.Errorf("%d rows whose metadata is an object with the tenant, want %d", n, withMetadata)
	}

	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: len(want) + 1, Lease: time.Minute})
	if err != nil || len(rows) != len(want) {
		t.Fatalf("JobClaim = %d rows, %v; want %d", len(rows), err, len(want))
	}
	for _, r := range rows {
		if m := want[r.ID]; !maps.Equal(r.Metadata, m) || (m == nil) != (r.Metadata == nil) {
			t.Fatalf("claimed job %d has metadata %#v, want %#v", r.ID, r.Metadata, m)
		}
	}
}
