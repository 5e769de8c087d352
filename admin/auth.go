package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// String names the scope as tokens and answers spell it.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeEnqueue:
		return "enqueue"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// ParseScope reads "read", "enqueue" or "admin".
func ParseScope(name string) (Scope, error) {
	switch name {
	case "read":
		return ScopeRead, nil
	case "enqueue":
		return ScopeEnqueue, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return 0, fmt.Errorf("unknown scope %q: use read, enqueue or admin", name)
}

// MinSecretLen is the shortest secret ParseToken accepts: a token guarded
// only by its length must not be guessable.
const MinSecretLen = 16

// ParseToken reads a token written "scope:secret", such as
// "admin:4f9c…". A bare secret is refused rather than given a scope: a
// mistyped scope ("admn:…") must not silently become an admin token.
// The error never contains the secret.
func ParseToken(s string) (Token, error) {
	name, secret, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Token{}, fmt.Errorf("a token is written scope:secret (read, enqueue or admin), e.g. admin:$(openssl rand -hex 16)")
	}
	scope, err := ParseScope(name)
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	if len(secret) < MinSecretLen {
		return Token{}, fmt.Errorf("the secret of this %s token has %d characters: use at least %d (e.g. openssl rand -hex 16)", name, len(secret), MinSecretLen)
	}
	return Token{Secret: secret, Scope: scope}, nil
}

// tokenDigest is a configured token as the server keeps it.
type tokenDigest struct {
	sum   [sha256.Size]byte
	scope Scope
}

// digestTokens checks the configured tokens and keeps their digests.
func digestTokens(tokens []Token) ([]tokenDigest, error) {
	out := make([]tokenDigest, len(tokens))
	for i, t := range tokens {
		if t.Secret == "" {
			return nil, fmt.Errorf("admin: Options.Tokens[%d] has an empty secret", i)
		}
		if t.Scope < ScopeRead || t.Scope > ScopeAdmin {
			return nil, fmt.Errorf("admin: Options.Tokens[%d] has an unknown scope %d", i, int(t.Scope))
		}
		out[i] = tokenDigest{sum: sha256.Sum256([]byte(t.Secret)), scope: t.Scope}
	}
	return out, nil
}

// lookup returns the scope of secret, 0 when no token matches. Digests of
// equal length are compared, every one of them, so neither the secret's
// length nor which token matched shows in the time taken.
func (s *server) lookup(secret string) Scope {
	sum := sha256.Sum256([]byte(secret))
	var found Scope
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = max(found, t.scope)
		}
	}
	return found
}

// topScope is the highest scope of the configured tokens: only a right
// token of it clears the login throttle's count.
func (s *server) topScope() Scope {
	var top Scope
	for _, t := range s.tokens {
		top = max(top, t.scope)
	}
	return top
}

// sessionCookie names the browser login cookie. It holds a random session
// ID, never the token.
const sessionCookie = "jobq_session"

// sessionTTL is how long a browser login lasts.
const sessionTTL = 12 * time.Hour

// sessions are browser logins kept in memory: a restart logs everyone out,
// and logout really ends the session (a copied cookie stops working).
type sessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]session // keyed by the ID's digest
}

type session struct {
	scope   Scope
	expires time.Time
}

func newSessions() *sessions {
	return &sessions{byID: map[[sha256.Size]byte]session{}}
}

// start records a session of scope and returns its ID.
func (ss *sessions) start(scope Scope, now time.Time) string {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, v := range ss.byID { // drop expired ones, so the map stays small
		if now.After(v.expires) {
			delete(ss.byID, k)
		}
	}
	ss.byID[sha256.Sum256([]byte(id))] = session{scope: scope, expires: now.Add(sessionTTL)}
	return id
}

// scope returns the scope of a live session, 0 for an unknown or expired
// one. The map is keyed by digest, so the lookup's timing says nothing
// about how much of an ID an attacker guessed.
func (ss *sessions) scope(id string, now time.Time) Scope {
	key := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v, ok := ss.byID[key]
	if !ok || now.After(v.expires) {
		return 0
	}
	return v.scope
}

// end forgets a session.
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	delete(ss.byID, sha256.Sum256([]byte(id)))
	ss.mu.Unlock()
}

// authenticated returns the scope the request carries: ScopeAdmin when
// no tokens are configured, else its bearer token's or its session's, 0
// for none. bearer says a bearer token was checked, right or wrong.
func (s *server) authenticated(r *http.Request) (scope Scope, bearer bool) {
	if len(s.tokens) == 0 {
		return ScopeAdmin, false
	}
	// Another scheme (Basic from a proxy in front) is not ours: the
	// session cookie still counts.
	if kind, secret, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(kind, "Bearer") {
		return s.lookup(strings.TrimSpace(secret)), true
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return s.sessions.scope(c.Value, time.Now()), false
	}
	return 0, false
}

// hasBearer reports whether r carries a bearer token.
func hasBearer(r *http.Request) bool {
	kind, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(kind, "Bearer")
}

// authorize wraps h with the scope check. Unauthenticated API requests get
// 401, dashboard pages a redirect to the login form; a token of too small a
// scope gets 403. A wrong bearer token counts as a failed sign-in for the
// throttle, and a client it holds back gets 429 before its token is
// checked, a right one of any scope included: checking it would tell a
// guesser which guess was right while the wait is meant to tell nothing.
func (s *server) authorize(need Scope, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who := client(r)
		if len(s.tokens) > 0 && hasBearer(r) {
			if wait := s.throttle.wait(who); wait > 0 {
				s.refuseThrottled(w, r, wait)
				return
			}
		}
		got, bearer := s.authenticated(r)
		if bearer {
			if got == 0 {
				s.throttle.failed(who)
			} else {
				s.throttle.succeeded(who, got, s.topScope())
			}
		}
		switch {
		case got >= need:
			h(w, r)
		case got == 0 && isAPI(r.URL.Path):
			w.Header().Set("WWW-Authenticate", `Bearer realm="jobq"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "this needs a token: send Authorization: Bearer <token>", "")
		case got == 0:
			next := s.opts.Prefix + r.URL.RequestURI()
			http.Redirect(w, r, s.opts.Prefix+"/login?next="+url.QueryEscape(next), http.StatusSeeOther)
		case !isAPI(r.URL.Path):
			s.dash.fail(w, r, http.StatusForbidden, "Not allowed", fmt.Sprintf("This needs a token of scope %s; you signed in with %s. Nothing was changed.", need, got))
		default:
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("this needs a token of scope %s; yours is %s", need, got), "")
		}
	}
}

// registerAuth registers the browser login and logout. GET /login, the
// form, is the dashboard's page.
func (s *server) registerAuth() {
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
}

// login checks the form's token and starts a session: a cookie holding a
// random session ID, then a 303 to next. A wrong token goes back to the
// form with failed=1, after the same work as a right one, and counts
// against the client in the throttle, which answers 429 without checking
// the token while it holds the client back; a right token clears the
// count only if it is of the highest scope, as a bearer token does.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, err)
		return
	}
	next := s.localNext(r.PostForm.Get("next"))
	if len(s.tokens) == 0 {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	who := client(r)
	if wait := s.throttle.wait(who); wait > 0 {
		s.refuseThrottled(w, r, wait)
		return
	}
	scope := s.lookup(r.PostForm.Get("token"))
	if scope == 0 {
		s.throttle.failed(who)
		http.Redirect(w, r, s.opts.Prefix+"/login?failed=1&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	s.throttle.succeeded(who, scope, s.topScope())
	http.SetCookie(w, s.cookie(r, s.sessions.start(scope, time.Now()), int(sessionTTL/time.Second)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session and clears the cookie.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, s.cookie(r, "", -1))
	http.Redirect(w, r, s.opts.Prefix+"/login", http.StatusSeeOther)
}

// cookie is the session cookie: not readable by scripts, not sent on
// cross-site requests, only over TLS when the login came over TLS or
// Options.SecureCookies says TLS ends at a proxy in front.
func (s *server) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	path := s.opts.Prefix
	if path == "" {
		path = "/"
	}
	return &http.Cookie{
		Name: sessionCookie, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.opts.SecureCookies,
	}
}

// localNext returns next when it is a path on this handler (under the
// prefix, no scheme, no host, not "//evil" nor "/\evil"), else the
// dashboard's home: a login link must not send anyone elsewhere.
func (s *server) localNext(next string) string {
	home := s.opts.Prefix + "/"
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return home
	}
	if s.opts.Prefix != "" && next != s.opts.Prefix && !strings.HasPrefix(next, home) {
		return home
	}
	return next
}
