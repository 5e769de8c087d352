package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
)

// maskedValue replaces the value of a masked key.
const maskedValue = `"***"`

// maxMaskDepth bounds the nesting masked walks; deeper documents are not
// shown at all rather than shown unmasked.
const maxMaskDepth = 200

// tooDeep is shown instead of a document nested beyond maxMaskDepth.
var tooDeep = []byte(`"*** (nested too deeply to mask)"`)

// masked returns raw (a JSON payload or metadata object) with the values
// of masked keys (see maskKey) replaced by "***", at any depth, inside
// arrays too, and the credentials of URLs in string values masked (see
// maskedText), for the API and the dashboard. A document with nothing to mask comes back as it was
// written, byte for byte, so the dashboard shows what the sender sent; one
// with masked values is re-encoded (key order kept, whitespace not). Text
// that is not JSON is returned unchanged (stored payloads are always JSON,
// so that is someone else's text).
func (s *server) masked(raw []byte) []byte {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(raw))
	hit := false
	err := s.maskValue(dec, &out, 0, &hit)
	if err == nil {
		if _, err = dec.Token(); err != io.EOF {
			err = errors.New("trailing data")
		} else {
			err = nil
		}
	}
	switch {
	case errors.Is(err, errTooDeep):
		return tooDeep
	case err != nil, !hit:
		return raw
	}
	return out.Bytes()
}

var errTooDeep = errors.New("too deep")

// maskValue copies the next JSON value from dec to out, masking the
// values of masked keys; it sets *hit when it masked one.
func (s *server) maskValue(dec *json.Decoder, out *bytes.Buffer, depth int, hit *bool) error {
	if depth > maxMaskDepth {
		return errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			for first := true; dec.More(); first = false {
				if !first {
					out.WriteByte(',')
				}
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := kt.(string)
				if !ok {
					return errors.New("object key is not a string")
				}
				writeString(out, key)
				out.WriteByte(':')
				if s.maskKey(key) {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return err
					}
					out.WriteString(maskedValue)
					*hit = true
					continue
				}
				if err := s.maskValue(dec, out, depth+1, hit); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // '}'
				return err
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for first := true; dec.More(); first = false {
				if !first {
					out.WriteByte(',')
				}
				if err := s.maskValue(dec, out, depth+1, hit); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return err
			}
			out.WriteByte(']')
		default:
			return errors.New("unexpected delimiter")
		}
	case string:
		if m := s.maskedText(t); m != t {
			t, *hit = m, true
		}
		writeString(out, t)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	}
	return nil
}

// writeString writes s as a JSON string. <, > and & stay as they are: the
// dashboard shows a payload as its sender wrote it (html/template escapes
// it for the page), and the API's JSON answers escape them on the way out.
func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
}

// maskKey reports whether key's value is masked: when its name, with case,
// '-', '_', '.' and spaces ignored, contains one of Options.MaskKeys, so
// that "access_token", "X-Api-Key", "clientSecret" and "db.password" are
// masked by the defaults as "token", "api_key", "secret" and "password"
// are. A harmless key that happens to contain one ("max_tokens") is
// masked too: hiding a value costs less than showing a secret, and
// Options.MaskKeys can be narrowed.
func (s *server) maskKey(key string) bool {
	key = normKey(key)
	for _, k := range s.opts.MaskKeys {
		if nk := normKey(k); nk != "" && strings.Contains(key, nk) {
			return true
		}
	}
	return false
}

// normKey folds case and drops the separators names differ by, so "API-Key",
// "api_key" and "apiKey" are one name.
func normKey(k string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(k))
}

// urlPassword matches the user info of a URL that carries a password
// ("scheme://user:password@"), wherever the URL stands in a text: group 1
// is what stays. A password holding '@', '/' or '?' is percent-encoded in
// a URL, so the first '@' ends it.
var urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:)[^/?#@\s]+@`)

// urlParam matches a query parameter of a URL in a text: group 1 is what
// precedes its value, group 2 its name.
var urlParam = regexp.MustCompile(`([?&]([^=&#\s?]+)=)[^&#\s]*`)

// maskedText returns text (an error message, a string value) with the
// credentials of the URLs in it replaced by ***: the password of their
// user info, and the values of query parameters named like masked keys
// ("?token=", "&api_key="). Errors quote URLs (a failed webhook's, a
// database's), and payloads carry them.
func (s *server) maskedText(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	text = urlPassword.ReplaceAllString(text, "${1}***@")
	return urlParam.ReplaceAllStringFunc(text, func(p string) string {
		m := urlParam.FindStringSubmatch(p)
		if !s.maskKey(m[2]) {
			return p
		}
		return m[1] + "***"
	})
}

// maskedMeta returns metadata with the values of masked keys replaced, and
// URL credentials in the others.
func (s *server) maskedMeta(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s.maskKey(k) {
			v = "***"
		}
		out[k] = s.maskedText(v)
	}
	return out
}
