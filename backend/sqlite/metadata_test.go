package sqlite

import (
	"maps"
	"testing"
)

// TestMetadataCodec: the column's value for a map, for none, and read
// back (jsonstr's tests cover the text itself).
func TestMetadataCodec(t *testing.T) {
	t.Parallel()
	m := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "quote\"d": "a\nb"}
	text, ok := encodeMetadata(m).(string)
	if !ok {
		t.Fatalf("encodeMetadata(%v) is not text", m)
	}
	if got, err := decodeMetadata(text, true); err != nil || !maps.Equal(got, m) {
		t.Errorf("decodeMetadata(%q) = %v, %v; want %v", text, got, err, m)
	}
	if encodeMetadata(nil) != nil || encodeMetadata(map[string]string{}) != nil {
		t.Error("empty metadata is not stored as NULL")
	}
	if got, err := decodeMetadata("", false); got != nil || err != nil {
		t.Errorf("decodeMetadata(NULL) = %v, %v; want nil, nil", got, err)
	}
	if got, err := decodeMetadata(`{"a":1}`, true); err == nil {
		t.Errorf("decodeMetadata of a number's object = %v, want an error", got)
	}
}
