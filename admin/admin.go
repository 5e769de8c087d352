// Package admin is jobq's HTTP admin surface: a JSON API under /api/v1
// that any language can enqueue through, and a server-rendered dashboard,
// both thin layers over jobq.Client and jobq.Inspector. New returns an
// http.Handler a Go application mounts under a prefix (with
// http.StripPrefix) and may wrap with its own authentication; `jobq serve`
// runs it on its own.
//
// It is secure by default: every route needs a token with the right scope
// when tokens are configured, state-changing browser requests are checked
// with http.CrossOriginProtection, every response carries a
// Content-Security-Policy without inline script, and payloads, errors and
// metadata are rendered as text with configured keys masked.
package admin

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/jobq/jobq"
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
	// MaskKeys are payload and metadata keys (matched case-insensitively,
	// at any depth) whose values are shown as "***" in the API and the
	// dashboard. Nil means DefaultMaskKeys.
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
}

// DefaultMaskKeys are masked when Options.MaskKeys is nil.
var DefaultMaskKeys = []string{"password", "passwd", "secret", "token", "authorization", "api_key", "apikey", "cookie"}

// server is the handler New returns; api*.go and dashboard*.go register
// their routes on its mux through handle.
type server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
}

// New returns the admin handler: the API under /api/v1/ and the dashboard
// under /.
func New(opts Options) (http.Handler, error) {
	if opts.Inspector == nil {
		return nil, errors.New("admin: Options.Inspector is required")
	}
	if opts.MaskKeys == nil {
		opts.MaskKeys = DefaultMaskKeys
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &server{opts: opts, mux: http.NewServeMux(), log: opts.Logger}
	s.registerAPI()
	s.registerDashboard()
	return s, nil
}

// ServeHTTP applies what every response needs, then routes.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// handle registers h for pattern (a net/http pattern with method, such as
// "GET /api/v1/queues") behind a check that the request carries a token of
// at least scope need.
func (s *server) handle(pattern string, need Scope, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, h)
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
