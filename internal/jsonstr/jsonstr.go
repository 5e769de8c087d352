// Package jsonstr writes and reads the backends' metadata column (a JSON
// object of strings) without encoding/json's cost on the enqueue and
// claim paths, for SQLite, PostgreSQL and Redis alike.
package jsonstr

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
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

// DecodeObject reads a JSON object of strings as the backends store a
// job's metadata: nil for "" (a NULL column) or an empty object. It reads
// the text Object writes, and the text PostgreSQL's jsonb prints (one
// space after each colon and comma), by a direct path whose keys and
// values are substrings of text, since encoding/json's allocations were a
// large share of a claim's cost per traced job (BenchmarkDecodeObject).
// Anything else (escapes, other spacing) goes to encoding/json, which
// decodes it or refuses it.
func DecodeObject(text string) (map[string]string, error) {
	if text == "" {
		return nil, nil
	}
	m, ok := decodeFlat(text)
	if !ok {
		m = nil
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("not a JSON object of strings: %w", err)
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// decodeFlat decodes a JSON object of strings without escapes, written
// {"k":"v",...} or {"k": "v", ...}. ok is false for anything else
// (escapes, other spacing, invalid UTF-8, malformed text).
func decodeFlat(text string) (m map[string]string, ok bool) {
	if len(text) < 2 || text[0] != '{' || text[len(text)-1] != '}' {
		return nil, false
	}
	if len(text) == 2 {
		return nil, true
	}
	m = make(map[string]string, strings.Count(text, `":`))
	rest := text[1:]
	for {
		k, after, ok := cutString(rest)
		if !ok || after == "" || after[0] != ':' {
			return nil, false
		}
		v, after, ok := cutString(skipSpace(after[1:]))
		if !ok || after == "" {
			return nil, false
		}
		m[k] = v
		switch after[0] {
		case ',':
			rest = skipSpace(after[1:])
		case '}':
			return m, len(after) == 1
		default:
			return nil, false
		}
	}
}

// skipSpace drops the one space jsonb prints after a colon or a comma.
func skipSpace(s string) string {
	if s != "" && s[0] == ' ' {
		return s[1:]
	}
	return s
}

// cutString cuts a JSON string without escapes or control characters
// from the front of s, returning its contents and what follows.
func cutString(s string) (str, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			str = s[1:i]
			return str, s[i+1:], utf8.ValidString(str)
		case c == '\\' || c < 0x20:
			return "", "", false
		}
	}
	return "", "", false
}

// Direct reports whether DecodeObject reads text by its direct path, for
// the backends' tests that the text their store prints takes it.
func Direct(text string) bool {
	_, ok := decodeFlat(text)
	return ok
}
