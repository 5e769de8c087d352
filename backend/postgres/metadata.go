package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/internal/jsonstr"
)

// Jobs with metadata (a tracer's traceparent on every traced job) are
// encoded at every insert and decoded at every claim. encoding/json took
// 4 allocations to encode a traceparent and 9 to decode it, per job, and
// 2 to 5 times as long as the direct paths here (BenchmarkMetadata), which
// decode into substrings of the text; decoding falls back to
// encoding/json for anything they do not expect.

// encodeMetadata turns a job's metadata into the JSON object text the
// statements store in the jsonb column: NULL for none, an empty map
// included (backend.InsertParams stores it as none).
func encodeMetadata(m map[string]string) pgtype.Text {
	if len(m) == 0 {
		return pgtype.Text{}
	}
	return pgtype.Text{String: jsonstr.Object(m), Valid: true}
}

// decodeMetadata reads the metadata column: nil for NULL or an empty
// object.
func decodeMetadata(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	m, ok := decodeFlatObject(string(raw))
	if !ok {
		m = nil
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("metadata is not a JSON object of strings: %w", err)
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// decodeFlatObject decodes a JSON object of strings without escapes, as
// jsonb prints it ({"k": "v", "k2": "v2"}: one space after each colon and
// comma) or as encodeMetadata writes it (no spaces). ok is false for
// anything else (escapes, other spacing, invalid UTF-8, malformed text),
// which encoding/json then decodes or refuses.
func decodeFlatObject(text string) (m map[string]string, ok bool) {
	if len(text) < 2 || text[0] != '{' || text[len(text)-1] != '}' {
		return nil, false
	}
	if len(text) == 2 {
		return nil, true
	}
	m = make(map[string]string, strings.Count(text, `":`))
	rest := text[1:]
	for {
		k, after, ok := cutJSONString(rest)
		if !ok || after == "" || after[0] != ':' {
			return nil, false
		}
		v, after, ok := cutJSONString(skipSpace(after[1:]))
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

// cutJSONString cuts a JSON string without escapes or control characters
// from the front of s, returning its contents and what follows.
func cutJSONString(s string) (str, rest string, ok bool) {
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
