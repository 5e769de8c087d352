package postgres

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
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

// TestMetadataCodec: what encodeMetadata writes is JSON that encoding/json
// reads back as the same map, and decodeMetadata reads back what it writes,
// what encoding/json writes and what jsonb prints (through its direct path
// or encoding/json's).
func TestMetadataCodec(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]string{
		{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"},
		{"k": ""},
		{"quote\"d": `back\slash`, "nl": "a\nb\tc\rd", "ctl": "\x01\x1f\x7f", "html": "<a&b>"},
		{"ünï": "日本語 🎉", "sep": "\u2028\u2029", "sp": " a , b : c "},
		{"a": "1", "b": "2", "c": "3"},
	} {
		if err := backend.ValidateMetadata(m); err != nil {
			t.Fatalf("test map %v: %v", m, err)
		}
		text := encodeMetadata(m)
		if !text.Valid {
			t.Fatalf("encodeMetadata(%v) is NULL", m)
		}
		var std map[string]string
		if err := json.Unmarshal([]byte(text.String), &std); err != nil || !maps.Equal(std, m) {
			t.Errorf("encoding/json reads %q as %v, %v; want %v", text.String, std, err, m)
		}
		stdText, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var indented bytes.Buffer // jsonb's spacing: a space after colons and commas
		if err := json.Indent(&indented, stdText, "", ""); err != nil {
			t.Fatal(err)
		}
		spaced := strings.NewReplacer("\n", "", `":"`, `": "`, `","`, `", "`).Replace(indented.String())
		for _, in := range []string{text.String, string(stdText), spaced} {
			if got, err := decodeMetadata([]byte(in)); err != nil || !maps.Equal(got, m) {
				t.Errorf("decodeMetadata(%q) = %v, %v; want %v", in, got, err, m)
			}
		}
	}
	if encodeMetadata(nil).Valid || encodeMetadata(map[string]string{}).Valid {
		t.Error("empty metadata is not stored as NULL")
	}
	for _, in := range []string{"", "{}", "{ }"} {
		if got, err := decodeMetadata([]byte(in)); got != nil || err != nil {
			t.Errorf("decodeMetadata(%q) = %v, %v; want nil, nil", in, got, err)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a": "b",}`, `{"a":"b"}}`, `{"a":"b"`, `["a"]`, `{"a" "b"}`, `not json`} {
		if got, err := decodeMetadata([]byte(bad)); err == nil {
			t.Errorf("decodeMetadata(%q) = %v, want an error", bad, got)
		}
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
	if got, ok := decodeFlatObject(string(raw)); !ok || !maps.Equal(got, p.Metadata) {
		t.Fatalf("direct path reads the server's %q as %v, %v; want %v, true", raw, got, ok, p.Metadata)
	}
}

// FuzzDecodeMetadata: the direct path never accepts what encoding/json
// would read differently (or refuse).
func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"a": "b", "c": "d"}`, `{"a":"b","a":"c"}`, `{"a":"\u00e9"}`, `{"a":"b"}}`, `{"":""}`, "{\"a\":\"\xff\"}", `{"a":  "b"}`, `{ "a": "b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fast, ok := decodeFlatObject(text)
		if !ok {
			return
		}
		var std map[string]string
		if err := json.Unmarshal([]byte(text), &std); err != nil {
			t.Fatalf("direct path read %q as %v; encoding/json refuses it: %v", text, fast, err)
		}
		if len(std) == 0 && len(fast) == 0 {
			return
		}
		if !maps.Equal(fast, std) {
			t.Fatalf("direct path read %q as %v, encoding/json as %v", text, fast, std)
		}
	})
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
