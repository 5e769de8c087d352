// Package redact masks secrets in what jobq shows of jobs (the admin API
// and dashboard, the command line, the worker's logs): the values of
// payload and metadata keys named like secrets, and the credentials of
// URLs in any text, so that a password in a payload or in a failed
// webhook's error is shown as *** while the stored job keeps it.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
)

// DefaultKeys are the key names masked unless a caller names its own: a
// key (of a payload, of metadata, a URL's query parameter) is masked when
// its name contains one of them (see Masker.Key).
var DefaultKeys = []string{"password", "passwd", "secret", "token", "authorization", "api_key", "cookie", "credential", "private_key"}

// URLParams are query parameters that carry credentials in connection
// URLs under names too short to match by containment: "key" or "pass"
// inside a name would mask key_prefix, passfile and a payload's
// "monkey". They are matched whole (case aside), in URLs only, beside
// DefaultKeys. This is the one reason for a second list.
var URLParams = []string{"pass", "pwd", "key", "apikey"}

// Mask is what every masked secret is shown as: a payload value, a
// metadata value, a URL's password or credential parameter.
const Mask = "***"

// URLParam reports whether a URL query parameter named name carries a
// credential: its name contains one of DefaultKeys (as Key reads names)
// or is one of URLParams.
func URLParam(name string) bool { return Default.Key(name) || exactURLParam(name) }

// exactURLParam reports whether name is one of URLParams, case aside.
func exactURLParam(name string) bool {
	for _, p := range URLParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// Masker masks the values of keys named like its keys (see Key) and URL
// credentials (see Text). It is safe for concurrent use.
type Masker struct {
	keys []string // normalised (normKey), none empty
}

// New returns a Masker of keys (DefaultKeys when nil).
func New(keys []string) *Masker {
	if keys == nil {
		keys = DefaultKeys
	}
	m := &Masker{}
	for _, k := range keys {
		if nk := normKey(k); nk != "" {
			m.keys = append(m.keys, nk)
		}
	}
	return m
}

// Default masks DefaultKeys.
var Default = New(nil)

// maskedValue replaces the value of a masked key.
const maskedValue = `"` + Mask + `"`

// maxMaskDepth bounds the nesting masked walks; deeper documents are not
// shown at all rather than shown unmasked.
const maxMaskDepth = 200

// tooDeep is shown instead of a document nested beyond maxMaskDepth.
var tooDeep = []byte(`"*** (nested too deeply to mask)"`)

// JSON returns raw (a JSON payload or metadata object) with the values of
// masked keys (see Key) replaced by "***", at any depth, inside arrays
// too, and the credentials of URLs in string values masked (see Text). A
// document with nothing to mask comes back as it was written, byte for
// byte, so a reader sees what the sender sent; one with masked values is
// re-encoded (key order kept, whitespace not). Text that is not JSON is
// returned unchanged (stored payloads are always JSON, so that is someone
// else's text).
func (m *Masker) JSON(raw []byte) []byte {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(raw))
	hit := false
	err := m.maskValue(dec, &out, 0, &hit)
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
func (m *Masker) maskValue(dec *json.Decoder, out *bytes.Buffer, depth int, hit *bool) error {
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
				if m.Key(key) {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return err
					}
					out.WriteString(maskedValue)
					*hit = true
					continue
				}
				if err := m.maskValue(dec, out, depth+1, hit); err != nil {
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
				if err := m.maskValue(dec, out, depth+1, hit); err != nil {
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
		if masked := m.Text(t); masked != t {
			t, *hit = masked, true
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

// Key reports whether key's value is masked: when its name, with case,
// '-', '_', '.' and spaces ignored, contains one of the Masker's keys, so
// that "access_token", "X-Api-Key", "clientSecret" and "db.password" are
// masked by the defaults as "token", "api_key", "secret" and "password"
// are. A harmless key that happens to contain one ("max_tokens") is
// masked too: hiding a value costs less than showing a secret, and the
// keys can be narrowed.
func (m *Masker) Key(key string) bool {
	key = normKey(key)
	for _, k := range m.keys {
		if strings.Contains(key, k) {
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
// precedes its value, group 2 its name. Name and value end at a character
// a URL cannot hold unencoded ('"', '\', '<', '>', '`', whitespace): that
// is where a quoted URL ends ("url %q", JSON text, <…>), and what comes
// after it must stay. A separator may be JSON's escaped & ("\u0026", as
// encoding/json writes one), since errors quote JSON too.
var urlParam = regexp.MustCompile(`((?:[?&]|\\u0026)([^=&#?` + urlEnd + `]+)=)[^&#` + urlEnd + `]*`)

// urlEnd are the characters, as a regexp class's body, that cannot stand
// unencoded in a URL (RFC 3986), so a URL in a text ends before them.
const urlEnd = `\s"\\<>` + "`"

// Text returns text (an error message, a string value) with the
// credentials of the URLs in it replaced by Mask: the password of their
// user info, and the values of query parameters named like masked keys
// ("?token=", "&api_key=") or one of URLParams ("&key="). Errors quote URLs (a failed webhook's, a
// database's), and payloads carry them.
func (m *Masker) Text(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	text = urlPassword.ReplaceAllString(text, "${1}"+Mask+"@")
	// One match pass: the indexes give each parameter's name and value.
	var b strings.Builder
	last := 0
	for _, g := range urlParam.FindAllStringSubmatchIndex(text, -1) {
		if name := text[g[4]:g[5]]; !m.Key(name) && !exactURLParam(name) {
			continue
		}
		b.WriteString(text[last:g[3]]) // up to the value
		b.WriteString(Mask)
		last = g[1]
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// Map returns md (a job's metadata) with the values of masked keys
// replaced by "***" and URL credentials masked in the others; md itself is
// left as it is.
func (m *Masker) Map(md map[string]string) map[string]string {
	if md == nil {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		if m.Key(k) {
			v = Mask
		}
		out[k] = m.Text(v)
	}
	return out
}
