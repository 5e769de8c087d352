package jsonstr

import (
	"encoding/json"
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
