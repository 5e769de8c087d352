package backend

import (
	"net/url"
	"slices"
	"strings"

	"github.com/jobq/jobq/internal/redact"
)

// redacted replaces a secret in what RedactURL and Redact return: the one
// mask jobq shows secrets as.
const redacted = redact.Mask

// RedactURL returns a backend URL fit for errors, logs and output: the
// password of its user information and the values of credential query
// parameters (redact.URLParam) are replaced by "***". Text that does not parse as a URL
// with credentials is returned unchanged ("sqlite:jobq.db", "memory:").
// Every place that shows a backend URL goes through it.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// An unparsable URL may still carry user:password@ (that is often
		// why it does not parse): cut the userinfo by hand.
		return redactUnparsed(raw)
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			if redact.URLParam(k) {
				for i := range vs {
					vs[i] = redacted
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	// The mask is shown as written, not %-escaped as a URL would carry it.
	return strings.ReplaceAll(u.String(), url.QueryEscape(redacted), redacted)
}

// Redact returns text with every secret of the backend URL raw (its
// password and credential query parameters, raw and %-encoded) replaced
// by "***", and any copy of raw itself replaced by RedactURL(raw). Use it
// on error texts that may quote the URL or a connection string built from
// it (drivers sometimes do).
func Redact(text, raw string) string {
	if raw == "" {
		return text
	}
	text = strings.ReplaceAll(text, raw, RedactURL(raw))
	for _, s := range Secrets(raw) {
		text = strings.ReplaceAll(text, s, redacted)
	}
	return text
}

// Secrets lists the credential values in a backend URL, each raw and
// %-decoded, longest first, so a caller can scrub them from any text.
func Secrets(raw string) []string {
	var out []string
	add := func(s string) {
		if len(s) < 3 {
			// Scrubbing one or two characters would mangle ordinary text;
			// such a secret is no secret.
			return
		}
		out = append(out, s)
		if dec, err := url.PathUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
		if enc := url.QueryEscape(s); enc != s {
			out = append(out, enc)
		}
	}
	if u, err := url.Parse(raw); err == nil {
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		for k, vs := range u.Query() {
			if redact.URLParam(k) {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	// The password as written in the URL, %-escapes and all.
	if pw := unparsedPassword(raw); pw != "" {
		add(pw)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// Longest first, so a secret containing another is replaced whole.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// unparsedPassword finds the password in scheme://user:password@host of a
// URL that url.Parse refused.
func unparsedPassword(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	// The password may hold '/', '?' or '#' (often why the URL does not
	// parse); the user name before it cannot, or this '@' was not the
	// userinfo's.
	user, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || strings.ContainsAny(user, "/?#") {
		return ""
	}
	return pw
}

func redactUnparsed(raw string) string {
	pw := unparsedPassword(raw)
	if pw == "" {
		return raw
	}
	return strings.Replace(raw, ":"+pw+"@", ":"+redacted+"@", 1)
}
