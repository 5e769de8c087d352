package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/netguard"
)

// The built-in "http" job type lets any program, in any language, get
// delivery with retries by enqueueing a description of a request:
//
//	jobq enqueue http '{"url":"https://example.com/hook","method":"POST",
//	  "headers":{"Authorization":"Bearer x"},"body":{"event":"signup"},"timeout":"10s"}'
//
// method defaults to POST when there is a body, else GET; it must be one of
// httpMethods (any case) unless "extension_method" is true, so a typo such
// as "POTS" is refused at enqueue and fails the job for good in a worker
// instead of reaching a server. A body that is a JSON string is sent as
// that text; any other JSON value is sent as JSON (with Content-Type
// application/json unless headers set one). timeout bounds one attempt and
// defaults to 30s.
//
// The worker connects only through a netguard.Policy: loopback, private,
// link-local, cloud metadata and other internal addresses are refused
// (checked on each address dialled, redirects included) unless
// --http-allow opens them, since anyone who may enqueue could otherwise
// make the worker reach services only it can see. A refusal fails the job
// for good: a retry would dial the same address.

const (
	httpJobType        = "http"
	httpDefaultTimeout = 30 * time.Second
	// httpErrorBody is how much of a failed response's body is kept in the
	// error, so failed_jobs shows what the server said without storing a
	// whole page.
	httpErrorBody = 512
)

type httpPayload struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Timeout string            `json:"timeout"`
	// ExtensionMethod sends Method as given (case kept) even when it is not
	// one of httpMethods: WebDAV's PROPFIND, a vendor's PURGE.
	ExtensionMethod bool `json:"extension_method"`
}

const httpPayloadFields = "url, method, headers, body, timeout, extension_method"

// httpMethods are the request methods of RFC 9110 (and PATCH, RFC 5789)
// that name an action on the url. CONNECT is left out: it asks a proxy for
// a tunnel to a host, so the url's path would never reach a server.
var httpMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodTrace,
}

// httpAllowFlag is the flag that opens addresses the guard refuses.
const httpAllowFlag = "--http-allow"

// httpFlags are the options of the http job type, for every command that
// runs a worker (jobq worker, jobq serve --worker).
type httpFlags struct{ allow []string }

// add registers --http-allow on cmd.
func (f *httpFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.allow, httpAllowFlag[2:], nil,
		"let http jobs reach these otherwise refused addresses: CIDRs (10.0.0.0/8), addresses or host:port (internal.example:8443); comma-separated, repeatable")
}

// policy checks the flag's entries; a bad one is a usage error.
func (f *httpFlags) policy() (*netguard.Policy, error) {
	p, err := netguard.New(httpAllowFlag, f.allow...)
	if err != nil {
		return nil, usagef("%s: %v", httpAllowFlag, err)
	}
	return p, nil
}

// newHTTPClient returns the client http jobs send with, connecting only
// where policy allows, and a function that closes its idle connections.
func newHTTPClient(policy *netguard.Policy) (*http.Client, func()) {
	tr := policy.Transport(nil)
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// registerHTTP adds the http job type to reg, sending requests with client
// (from newHTTPClient, so the guard applies).
func registerHTTP(reg *jobq.Registry, client *http.Client) {
	reg.HandleFunc(httpJobType, func(ctx context.Context, job *jobq.Job) error {
		return deliver(ctx, client, job.Payload)
	})
}

// deliver runs one attempt: decode, send, classify the answer.
func deliver(ctx context.Context, client *http.Client, payload []byte) error {
	req, timeout, err := buildRequest(payload)
	if err != nil {
		return jobq.Permanent(fmt.Errorf("http job payload: %w", err))
	}
	attemptCtx, cancel := context.WithTimeoutCause(ctx, timeout, errHTTPTimeout{timeout})
	defer cancel()
	resp, err := client.Do(req.WithContext(attemptCtx))
	if err != nil {
		// Network errors and timeouts may pass: retry. The *url.Error's
		// own text repeats the URL unredacted, so keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		// net/http quotes a Location it cannot parse, twice, and a redirect
		// is where signed URLs come from. Its text is all there is to
		// recognise it by: the cause is formatted with %v, not wrapped.
		if strings.HasPrefix(err.Error(), "failed to parse Location header") {
			err = errors.New("the redirect's Location header is not a valid URL")
		}
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			// The OpError around it repeats the address: keep the guard's own text.
			return jobq.Permanent(fmt.Errorf("%s %s: %w", req.Method, origin(req.URL), refused))
		}
		switch {
		case ctx.Err() != nil:
			// The worker ended the attempt: say why (shutdown, lost lease).
			if cause := context.Cause(ctx); !errors.Is(err, cause) {
				err = fmt.Errorf("%w: %w", err, cause)
			}
		case attemptCtx.Err() != nil:
			err = context.Cause(attemptCtx) // the payload's timeout: name it
		}
		return fmt.Errorf("%s %s: %w", req.Method, origin(req.URL), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, httpErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	return classify(req, resp, trimPartialRune(snippet))
}

// origin is what an error may show of a job's URL: scheme and host. The
// user info, path and query are left out, since they often hold the
// secret (a password, a webhook's token path, an ?access_token=).
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// minHidden is the shortest part of a URL hideURLParts looks for on its
// own: shorter ones ("v1", "en", "2") match ordinary words of an answer
// too often to hide, and are too short to be a secret.
const minHidden = 6

// hideURLParts replaces in text (a server's answer) the user info, path
// and query of urls, whole and piece by piece (path segments, query
// values, escaped or not), with ***: servers often echo the request
// ("Cannot GET /hooks/T0K3N", "invalid signature for ?sig=..."), and the
// error would then show what origin leaves out.
func hideURLParts(text string, urls ...*url.URL) string {
	var parts []string
	add := func(raw string) {
		if len(raw) < minHidden {
			return
		}
		parts = append(parts, raw)
		if s, err := url.PathUnescape(raw); err == nil && s != raw {
			parts = append(parts, s)
		}
		if s, err := url.QueryUnescape(raw); err == nil && s != raw {
			parts = append(parts, s)
		}
	}
	for _, u := range urls {
		if u.User != nil {
			add(u.User.String())
			add(u.User.Username())
			if pw, ok := u.User.Password(); ok {
				add(pw)
			}
		}
		add(u.EscapedPath())
		for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
			add(seg)
		}
		add(u.RawQuery)
		for kv := range strings.SplitSeq(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				add(v)
			} else {
				add(kv) // a bare "?T0K3N"
			}
		}
	}
	if len(parts) == 0 {
		return text
	}
	// Longest first: at each place, the Replacer tries the parts in order,
	// so a whole path goes before the segments inside it.
	slices.SortStableFunc(parts, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(parts))
	for _, p := range parts {
		pairs = append(pairs, p, "***")
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// errHTTPTimeout is the cause of an attempt cut off by the payload's
// timeout; it matches context.DeadlineExceeded.
type errHTTPTimeout struct{ d time.Duration }

func (e errHTTPTimeout) Error() string {
	return fmt.Sprintf("no response within the job's %s timeout (the payload's \"timeout\", default %s)", e.d, httpDefaultTimeout)
}

func (e errHTTPTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// trimPartialRune drops a multi-byte UTF-8 character cut in two at the end
// of b, as a byte limit on a response body does, so the error text holds
// only whole characters.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if !utf8.RuneStart(b[len(b)-i]) {
			continue // a continuation byte: look further back for the start
		}
		if !utf8.FullRune(b[len(b)-i:]) {
			return b[:len(b)-i]
		}
		return b
	}
	return b
}

// classify turns a response into the job's outcome: 2xx done; 408, 429 and
// 5xx but 501 retried (after Retry-After when given); anything else, 501
// Not Implemented included (the server does not support the method, and
// will not later), permanent.
func classify(req *http.Request, resp *http.Response, snippet []byte) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	answer := resp.Status
	if body := strings.TrimSpace(string(snippet)); body != "" {
		answer += ": " + body
	}
	hidden := []*url.URL{req.URL}
	if resp.Request != nil && resp.Request.URL != nil {
		hidden = append(hidden, resp.Request.URL) // where the redirects ended
	}
	err := fmt.Errorf("%s %s: %s", req.Method, origin(req.URL), hideURLParts(answer, hidden...))
	retryable := code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
		code >= 500 && code != http.StatusNotImplemented
	if !retryable {
		return jobq.Permanent(err)
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		return jobq.RetryAfter(d, err)
	}
	return err
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		// Capped at a day so a huge value cannot overflow a Duration.
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// buildRequest checks the payload and makes the request it describes.
func buildRequest(payload []byte) (*http.Request, time.Duration, error) {
	var p httpPayload
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields() // a misspelt "heders" should fail, not be ignored
	if err := dec.Decode(&p); err != nil {
		return nil, 0, errors.New(describeJSONError(err, httpPayloadFields))
	}
	u, err := url.Parse(p.URL)
	switch {
	case p.URL == "":
		return nil, 0, errors.New(`"url" is required`)
	case err != nil:
		return nil, 0, fmt.Errorf("url: %w", urlCause(err))
	case u.Scheme != "http" && u.Scheme != "https" && (u.Scheme == "" || u.Opaque != ""):
		// Without "//" what url.Parse calls the scheme may be a user
		// name ("admin:pw@host"): do not name it.
		return nil, 0, errors.New("url: must begin with http:// or https://")
	case u.Scheme != "http" && u.Scheme != "https":
		// Scheme and host only, each cut short: both are unbounded.
		return nil, 0, fmt.Errorf("url %q: scheme must be http or https", shorten(u.Scheme, 16)+"://"+shorten(u.Host, 100))
	case u.Host == "":
		return nil, 0, fmt.Errorf("url: no host after %s://", u.Scheme)
	}
	timeout := httpDefaultTimeout
	if p.Timeout != "" {
		if timeout, err = time.ParseDuration(p.Timeout); err != nil || timeout <= 0 {
			return nil, 0, fmt.Errorf("timeout %q: use a positive duration such as \"10s\"", p.Timeout)
		}
	}
	body, isJSON, err := requestBody(p.Body)
	if err != nil {
		return nil, 0, err
	}
	method, err := requestMethod(p.Method, p.ExtensionMethod, body != nil)
	if err != nil {
		return nil, 0, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, p.URL, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("request: %w", urlCause(err))
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	if isJSON && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "jobq")
	}
	return req, timeout, nil
}

// urlCause is what an error may show of why a URL was refused: the
// *url.Error around the cause repeats the whole URL, and an escape error
// quotes the bad escape, which may stand in the user info, path or query.
// What else url.Parse says names at most the host, its port, or one
// character of the host.
func urlCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	if errors.As(err, &esc) {
		return errors.New("invalid URL escape: a % not followed by two hex digits")
	}
	return err
}

// requestMethod checks the payload's method: a standard one in any case,
// or with extension any token, sent as given.
func requestMethod(m string, extension, hasBody bool) (string, error) {
	switch {
	case m == "" && hasBody:
		return http.MethodPost, nil
	case m == "":
		return http.MethodGet, nil
	case extension:
		return m, nil // http.NewRequest checks it is a token
	case slices.Contains(httpMethods, strings.ToUpper(m)):
		return strings.ToUpper(m), nil
	case strings.EqualFold(m, http.MethodConnect):
		return "", errors.New(`method CONNECT asks a proxy for a tunnel and is not supported; use one of ` + strings.Join(httpMethods, ", "))
	}
	return "", fmt.Errorf(`method %q is not one of %s; for an extension method such as PROPFIND set "extension_method": true`, shorten(m, 32), strings.Join(httpMethods, ", "))
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut,
// so a huge argument is not echoed whole in an error.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimPartialRune([]byte(s[:n]))) + "…"
}

// requestBody returns the bytes to send: a JSON string's text, or any other
// JSON value as JSON (isJSON). An absent or null body sends nothing.
func requestBody(raw json.RawMessage) (body []byte, isJSON bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, fmt.Errorf("body: %w", err)
		}
		return []byte(s), false, nil
	}
	return raw, true, nil
}
