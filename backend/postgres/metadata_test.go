package postgres

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jsonstr"
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

// TestMetadataCodec: the column's value for a map, for none, and read
// back (jsonstr's tests cover the text itself).
func TestMetadataCodec(t *testing.T) {
	t.Parallel()
	m := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "quote\"d": "a\nb"}
	text := encodeMetadata(m)
	if !text.Valid {
		t.Fatalf("encodeMetadata(%v) is NULL", m)
	}
	if got, err := decodeMetadata([]byte(text.String)); err != nil || !maps.Equal(got, m) {
		t.Errorf("decodeMetadata(%q) = %v, %v; want %v", text.String, got, err, m)
	}
	if encodeMetadata(nil).Valid || encodeMetadata(map[string]string{}).Valid {
		t.Error("empty metadata is not stored as NULL")
	}
	if got, err := decodeMetadata(nil); got != nil || err != nil {
		t.Errorf("decodeMetadata(NULL) = %v, %v; want nil, nil", got, err)
	}
	if got, err := decodeMetadata([]byte(`{"a":1}`)); err == nil {
		t.Errorf("decodeMetadata of a number's object = %v, want an error", got)
	}
}

// TestMetadataDirectPath: the server prints a traceparent's metadata in
// the form the direct path reads, so a traced job's claim never takes
// encoding/json's.
func TestMetadataDirectPath(t *testing.T) {
	t.Parallel()
	b := openTest(t, Options{NoVacuum: true})
	p := testJob("q")
	p.Metadata = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "a=1,b=2", "tenant": "acme"}
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	var raw []byte
	if err := b.Pool().QueryRow(t.Context(), "SELECT metadata FROM "+quoteIdent(b.Schema())+".jobs WHERE id = $1", res[0].ID).Scan(&raw); err != nil {
		t.Fatalf("read metadata: %v", err)
	}
	if got, err := decodeMetadata(raw); err != nil || !maps.Equal(got, p.Metadata) || !jsonstr.Direct(string(raw)) {
		t.Fatalf("reads the server's %q as %v, %v (direct path %v); want %v through the direct path", raw, got, err, jsonstr.Direct(string(raw)), p.Metadata)
	}
}

// BenchmarkMetadata is a traced job's metadata as the column carries it:
// encoded at the insert, decoded (from jsonb's text) at the claim; the
// encoding-json cases are what both cost through encoding/json alone.
func BenchmarkMetadata(b *testing.B) {
	m := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	jsonb := []byte(`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeMetadata(m)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMetadata(jsonb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out map[string]string
			if err := json.Unmarshal(jsonb, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
