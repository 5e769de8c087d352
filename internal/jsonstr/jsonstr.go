// Package jsonstr writes JSON strings without encoding/json, for the
// backends' metadata encoders on the enqueue path.
package jsonstr

import (
	"slices"
	"strings"
)

// Write writes s to sb as a JSON string. s must be valid UTF-8 (metadata
// is, see backend.ValidateMetadata), so only quotes, backslashes and
// control characters need escaping; encoding/json would also escape HTML
// characters and check UTF-8, which the metadata needs neither of.
func Write(sb *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	sb.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		sb.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case '\n':
			sb.WriteString(`\n`)
		case '\t':
			sb.WriteString(`\t`)
		case '\r':
			sb.WriteString(`\r`)
		default:
			sb.WriteString(`\u00`)
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	sb.WriteString(s[start:])
	sb.WriteByte('"')
}

// Object returns m as a JSON object of strings with its keys sorted, so
// the same map always gives the same text. m must be non-empty metadata
// (valid UTF-8); the backends store an empty map as NULL before calling.
func Object(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 2
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.Sort(keys)
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		Write(&sb, k)
		sb.WriteByte(':')
		Write(&sb, m[k])
	}
	sb.WriteByte('}')
	return sb.String()
}
