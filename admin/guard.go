package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// contentSecurityPolicy allows nothing inline and nothing from elsewhere:
// an injected <script> or onclick= does not run even if a template ever
// failed to escape it.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// setSecurityHeaders sets the headers every answer carries, whatever it
// is: a page, JSON, a redirect, a refusal or a 404.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// SecurityHeaders wraps h so that every answer carries the headers the
// admin handler's own answers carry (Content-Security-Policy, nosniff,
// frame and referrer policies). A program that serves the handler under a
// prefix wraps its whole mux with it, so that its 404s outside the prefix
// and its redirect to the prefix carry them too; 'jobq serve' does.
func SecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		h.ServeHTTP(w, r)
	})
}

// hostRule decides which Host headers the handler answers. A browser
// tricked by DNS rebinding sends the attacker's name as Host to our
// address, and as Origin too, so cross-origin protection lets it through:
// the Host is the only thing that tells such a request from the
// operator's own.
type hostRule struct {
	any   bool            // every host is answered
	names map[string]bool // lower case, no port, no trailing dot
}

// newHostRule builds the rule of Options.AllowedHosts: loopback names
// always; with tokens and no list, any host, since a rebound browser
// holds no token; "*" alone turns the check off.
func newHostRule(allowed []string, tokens bool) (hostRule, error) {
	rule := hostRule{names: map[string]bool{}}
	for i, h := range allowed {
		if h == "*" {
			if len(allowed) > 1 {
				return hostRule{}, fmt.Errorf("admin: Options.AllowedHosts: \"*\" allows every host and cannot be combined with names")
			}
			rule.any = true
			continue
		}
		name, ok := hostName(h)
		if !ok || strings.ContainsAny(h, "/?#@ ") {
			return hostRule{}, fmt.Errorf("admin: Options.AllowedHosts[%d] %q: give a host name or address, such as jobq.example.com or 10.0.0.5, without scheme or path", i, h)
		}
		rule.names[name] = true
	}
	if tokens && len(allowed) == 0 {
		rule.any = true
	}
	return rule, nil
}

// allows reports whether a request naming host (r.Host) may be answered.
func (h hostRule) allows(host string) bool {
	if h.any {
		return true
	}
	name, ok := hostName(host)
	return ok && (isLoopbackName(name) || h.names[name])
}

// hostName returns host (as in a Host header: a name or address, maybe
// with a port, an IPv6 address in brackets) lower case, without its port
// or trailing dot.
func hostName(host string) (string, bool) {
	if host == "" {
		return "", false
	}
	if h, port, err := net.SplitHostPort(host); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil && port != "" {
			return "", false
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host, host != "" && !strings.ContainsAny(host, "[]")
}

// isLoopbackName reports whether name can only mean this machine:
// localhost, or an address in 127.0.0.0/8 or ::1. An attacker's DNS can
// point its own names at 127.0.0.1 but cannot make a browser send one of
// these as Host.
func isLoopbackName(name string) bool {
	if name == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Unmap().IsLoopback()
}

// refuseHost answers a request whose Host the rule does not allow.
func (s *server) refuseHost(w http.ResponseWriter, r *http.Request) {
	const why = "this server answers only requests addressed to its loopback names (localhost, 127.0.0.1, [::1]) or to its allowed hosts; a page on another site that renamed itself to this address (DNS rebinding) is refused"
	hint := "If this is your own name for the server, add it to the allowed hosts ('jobq serve --allowed-hosts')."
	if isAPI(r.URL.Path) {
		writeError(w, http.StatusForbidden, "host_not_allowed", fmt.Sprintf("Host %q is not allowed: %s. %s", shorten(r.Host, 64), why, hint), "")
		return
	}
	s.dash.fail(w, r, http.StatusForbidden, "Host not allowed", fmt.Sprintf("Host %q is not allowed: %s. %s Nothing was read or changed.", shorten(r.Host, 64), why, hint))
}

// shorten cuts s to at most n bytes for echoing it in an answer.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
