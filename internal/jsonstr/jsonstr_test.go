package jsonstr

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// TestWriteDecodes: what Write produces decodes back to the input through
// encoding/json, for quotes, backslashes, every control character and
// multi-byte text.
func TestWriteDecodes(t *testing.T) {
	var ctl strings.Builder
	for c := byte(1); c < 0x20; c++ {
		ctl.WriteByte(c)
	}
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "line\nfeed\ttab\rcr", ctl.String(), "héllo ✓ 00-abc"} {
		var sb strings.Builder
		Write(&sb, s)
		var got string
		if err := json.Unmarshal([]byte(sb.String()), &got); err != nil {
			t.Fatalf("Write(%q) = %s: %v", s, sb.String(), err)
		}
		if got != s {
			t.Fatalf("Write(%q) decodes to %q", s, got)
		}
	}
}

// TestObjectDecodes: what Object writes is JSON that encoding/json reads
// back as the same map, and DecodeObject reads back what Object writes,
// what encoding/json writes and what jsonb prints (through its direct
// path or encoding/json's).
func TestObjectDecodes(t *testing.T) {
	for _, m := range []map[string]string{
		{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"},
		{"k": ""},
		{"quote\"d": `back\slash`, "nl": "a\nb\tc\rd", "ctl": "\x01\x1f\x7f", "html": "<a&b>"},
		{"ünï": "日本語 🎉", "sep": "\u2028\u2029", "sp": " a , b : c "},
		{"a": "1", "b": "2", "c": "3"},
	} {
		text := Object(m)
		var std map[string]string
		if err := json.Unmarshal([]byte(text), &std); err != nil || !maps.Equal(std, m) {
			t.Errorf("encoding/json reads %q as %v, %v; want %v", text, std, err, m)
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
		for _, in := range []string{text, string(stdText), spaced} {
			if got, err := DecodeObject(in); err != nil || !maps.Equal(got, m) {
				t.Errorf("DecodeObject(%q) = %v, %v; want %v", in, got, err, m)
			}
		}
	}
	for _, in := range []string{"", "{}", "{ }"} {
		if got, err := DecodeObject(in); got != nil || err != nil {
			t.Errorf("DecodeObject(%q) = %v, %v; want nil, nil", in, got, err)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a": "b",}`, `{"a":"b"}}`, `{"a":"b"`, `["a"]`, `{"a" "b"}`, `not json`} {
		if got, err := DecodeObject(bad); err == nil {
			t.Errorf("DecodeObject(%q) = %v, want an error", bad, got)
		}
	}
}

// FuzzDecodeFlat: the direct path never accepts what encoding/json would
// read differently (or refuse).
func FuzzDecodeFlat(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"a": "b", "c": "d"}`, `{"a":"b","c":"d"}`, `{"a":"b","a":"c"}`, `{"a":"\u00e9"}`, `{"a":"b"}}`, `{"":""}`, "{\"a\":\"\xff\"}", `{"a":  "b"}`, `{ "a": "b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fast, ok := decodeFlat(text)
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

// BenchmarkDecodeObject is a traced job's metadata as jsonb prints it,
// read at every claim; decode-encoding-json is what it costs through
// encoding/json alone.
func BenchmarkDecodeObject(b *testing.B) {
	jsonb := `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeObject(jsonb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out map[string]string
			if err := json.Unmarshal([]byte(jsonb), &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
