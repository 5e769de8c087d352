// Package jsonstr writes JSON strings without encoding/json, for the
// backends' metadata encoders on the enqueue path.
package jsonstr

import "strings"

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
