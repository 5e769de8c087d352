// Package admin is jobq's HTTP admin surface: a JSON API under /api/v1
// that any language can enqueue through, and a server-rendered dashboard,
// both thin layers over jobq.Client and jobq.Inspector. New returns an
// http.Handler a Go application mounts under a prefix (with
// http.StripPrefix) and may wrap with its own authentication; `jobq serve`
// runs it on its own.
//
// It is secure by default: every route needs a token with the right scope
// when tokens are configured, and without tokens only requests addressed
// to a loopback name are answered (see Options.AllowedHosts); wrong tokens
// are throttled per client; state-changing browser requests are checked
// with http.CrossOriginProtection, every response carries a
// Content-Security-Policy without inline script, and payloads, errors and
// metadata are rendered as text with configured keys masked.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/redact"
)

// Scope is what a token may do. Scopes are ordered: admin includes enqueue
// and read, enqueue includes read.
type Scope int

// The scopes, weakest first.
const (
	ScopeRead    Scope = iota + 1 // see queues, jobs, failed jobs, schedules
	ScopeEnqueue                  // also enqueue jobs
	ScopeAdmin                    // also replay, purge, cancel, pause, resume
)

// Token is one accepted bearer token and the scope it grants.
type Token struct {
	Secret string
	Scope  Scope
}

// Options configures the handler.
type Options struct {
	// Client enqueues the API's jobs; nil refuses enqueue routes with 501.
	Client *jobq.Client
	// Inspector answers every read and repair; required.
	Inspector *jobq.Inspector
	// Tokens accepted; none means no authentication: the caller must only
	// listen on loopback or put its own authentication in front (jobq serve
	// refuses a non-loopback address without tokens).
	Tokens []Token
	// AllowedHosts are the names (or addresses) a request may carry in its
	// Host header besides the loopback ones (localhost, 127.0.0.0/8, ::1),
	// which are always answered; a port, if given, is ignored. Without
	// Tokens only those are answered whatever the list, so that a web page
	// whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot
	// drive the handler through its visitor's browser. With Tokens and no
	// list, any host is answered. ["*"] answers any host: for a handler
	// behind authentication of the program's own.
	AllowedHosts []string
	// SecureCookies marks the login cookie Secure, sent only over HTTPS,
	// even when the request reached the handler without TLS: set it
	// behind a proxy that terminates TLS. Without it the cookie is Secure
	// when the login came over TLS.
	SecureCookies bool
	// MaskKeys name the payload and metadata keys whose values are shown
	// as "***" in the API and the dashboard: every key, at any depth,
	// whose name contains one of them, with case, '-', '_', '.' and spaces
	// ignored. Nil means DefaultMaskKeys. URL passwords, and URL query
	// parameters named like these keys, are masked in payloads, metadata
	// and error messages whatever the keys.
	MaskKeys []string
	// MaxBody bounds a request body in bytes; larger ones get 413.
	// Zero means 1 MiB.
	MaxBody int64
	// Prefix is the path the handler is mounted under (with
	// http.StripPrefix), such as "/admin"; links, redirects and the login
	// cookie's path start with it. Empty when mounted at the root.
	Prefix string
	// Logger receives request errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Sample, when set, keeps the dashboard's last-hour chart filled for
	// as long as it lasts: one sample of the counts every 10 seconds,
	// whether or not anyone has the dashboard open. Without it the chart
	// covers only the minutes someone did. jobq serve passes its own
	// lifetime.
	Sample context.Context
}

// DefaultMaskKeys are masked when Options.MaskKeys is nil.
var DefaultMaskKeys = slices.Clone(redact.DefaultKeys)

// server is the handler New returns; api*.go and dashboard*.go register
// their routes on its mux through handle.
type server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
	// root is the mux behind the cross-origin check and the body limit.
	root http.Handler
	// tokens holds each configured token's SHA-256 digest, compared in
	// constant time (auth.go).
	tokens []tokenDigest
	// sessions are the browser logins (auth.go).
	sessions *sessions
	// mask masks payloads, metadata and errors (mask.go): Options.MaskKeys.
	mask *redact.Masker
	// patterns lists every pattern registered through handle, in order,
	// so a test can hold them against the OpenAPI document.
	patterns []string
	// dash renders the dashboard's pages, its refusals among them.
	dash *dashboard
	// hosts decides which Host headers are answered (guard.go).
	hosts hostRule
	// throttle slows down a client guessing tokens (throttle.go).
	throttle *throttle
}

// New returns the admin handler: the API under /api/v1/ and the dashboard
// under /. It fails on a token with an empty secret or an unknown scope,
// and on an allowed host that is not a host name or address.
func New(opts Options) (http.Handler, error) {
	if opts.Inspector == nil {
		return nil, errors.New("admin: Options.Inspector is required")
	}
	if opts.MaskKeys == nil {
		opts.MaskKeys = DefaultMaskKeys
	}
	if opts.MaxBody < 0 {
		return nil, fmt.Errorf("admin: Options.MaxBody %d is negative", opts.MaxBody)
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Prefix = strings.TrimRight(opts.Prefix, "/")
	if opts.Prefix != "" && !strings.HasPrefix(opts.Prefix, "/") {
		return nil, fmt.Errorf("admin: Options.Prefix %q must start with /", opts.Prefix)
	}
	tokens, err := digestTokens(opts.Tokens)
	if err != nil {
		return nil, err
	}
	hosts, err := newHostRule(opts.AllowedHosts, len(tokens) > 0)
	if err != nil {
		return nil, err
	}
	s := &server{
		opts: opts, mux: http.NewServeMux(), log: opts.Logger, tokens: tokens, sessions: newSessions(),
		mask: redact.New(opts.MaskKeys), hosts: hosts, throttle: newThrottle(),
	}
	s.registerAuth()
	s.registerAPI()
	s.registerDashboard()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAPI(r.URL.Path) {
			// A browser's form: a page, not JSON.
			s.dash.fail(w, r, http.StatusForbidden, "Cross-origin request refused", "This form was submitted from another site; nothing was changed.")
			return
		}
		writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request refused: state-changing requests must come from this site", "")
	}))
	s.root = cop.Handler(http.HandlerFunc(s.route))
	return s, nil
}

// ServeHTTP sets the headers every response needs, refuses a Host it
// does not answer, then checks the request's origin (unsafe methods only)
// and routes it.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if !s.hosts.allows(r.Host) {
		s.refuseHost(w, r)
		return
	}
	s.root.ServeHTTP(w, r)
}

// route bounds the body and dispatches. An API path that no API route
// matches gets a JSON 404, or 405 with Allow when other methods would
// match, rather than the mux's plain text or the dashboard's catch-all.
func (s *server) route(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	}
	if !isAPI(r.URL.Path) {
		s.mux.ServeHTTP(w, r)
		return
	}
	if _, pattern := s.mux.Handler(r); isAPIPattern(pattern) {
		s.mux.ServeHTTP(w, r) // not the handler Handler returned: this sets the path values
		return
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); isAPIPattern(pattern) {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, "not_found", "no such API route: "+r.URL.Path, "")
		return
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", "), "")
}

// isAPI reports whether path belongs to the JSON API, whose errors are
// JSON and whose unauthenticated requests get 401 rather than a redirect.
func isAPI(path string) bool { return path == "/api" || strings.HasPrefix(path, "/api/") }

// isAPIPattern reports whether a mux pattern ("GET /api/v1/jobs") is an
// API route.
func isAPIPattern(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	return isAPI(path)
}

// handle registers h for pattern (a net/http pattern with method, such as
// "GET /api/v1/queues") behind a check that the request carries a token of
// at least scope need (see authorize).
func (s *server) handle(pattern string, need Scope, h http.HandlerFunc) {
	s.mux.Handle(pattern, s.authorize(need, h))
	s.patterns = append(s.patterns, pattern)
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is the body of every error answer: a stable code for programs,
// a message for people, and the offending field for bad input.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// writeError answers status with an apiError.
func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{apiError{Code: code, Message: msg, Field: field}})
}
