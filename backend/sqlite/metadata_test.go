package sqlite

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/jobq/jobq/backend"
)

// TestMetadataCodec: what encodeMetadata writes is JSON that encoding/json
// reads back as the same map, decodeMetadata reads it back (through its
// direct path or encoding/json's), and it reads what encoding/json writes.
func TestMetadataCodec(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]string{
		{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"},
		{"k": ""},
		{"quote\"d": `back\slash`, "nl": "a\nb\tc\rd", "ctl": "\x01\x1f\x7f", "html": "<a&b>"},
		{"ünï": "日本語 🎉", "sep": "\u2028\u2029"},
		{"a": "1", "b": "2", "c": "3"},
	} {
		if err := backend.ValidateMetadata(m); err != nil {
			t.Fatalf("test map %v: %v", m, err)
		}
		text, ok := encodeMetadata(m).(string)
		if !ok {
			t.Fatalf("encodeMetadata(%v) is not text", m)
		}
		var std map[string]string
		if err := json.Unmarshal([]byte(text), &std); err != nil || !maps.Equal(std, m) {
			t.Errorf("encoding/json reads %q as %v, %v; want %v", text, std, err, m)
		}
		stdText, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{text, string(stdText)} {
			if got, err := decodeMetadata(in, true); err != nil || !maps.Equal(got, m) {
				t.Errorf("decodeMetadata(%q) = %v, %v; want %v", in, got, err, m)
			}
		}
	}
	if encodeMetadata(nil) != nil || encodeMetadata(map[string]string{}) != nil {
		t.Error("empty metadata is not stored as NULL")
	}
	for _, in := range []struct {
		text  string
		valid bool
	}{{"", false}, {"{}", true}, {"{ }", true}} {
		if got, err := decodeMetadata(in.text, in.valid); got != nil || err != nil {
			t.Errorf("decodeMetadata(%q, %v) = %v, %v; want nil, nil", in.text, in.valid, got, err)
		}
	}
	for _, bad := range []string{`{"a":1}`, `{"a":"b",}`, `{"a":"b"}}`, `{"a":"b"`, `["a"]`, `{"a" "b"}`, `not json`} {
		if got, err := decodeMetadata(bad, true); err == nil {
			t.Errorf("decodeMetadata(%q) = %v, want an error", bad, got)
		}
	}
}

// FuzzDecodeMetadata: the direct path never accepts what encoding/json
// would read differently (or refuse).
func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"a":"b","c":"d"}`, `{"a":"b","a":"c"}`, `{"a":"\u00e9"}`, `{"a":"b"}}`, `{"":""}`, "{\"a\":\"\xff\"}"} {
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
