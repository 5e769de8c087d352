package admin

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The login throttle's bounds. A token of 16 random characters cannot be
// guessed at any rate, but a weak one chosen by hand can, and every guess
// costs the server a digest and a session lookup: after a few free
// mistakes (a mistyped paste), each further try waits twice as long.
const (
	freeFailures = 5               // failures before the first wait
	firstWait    = time.Second     // the wait after the last free failure
	maxWait      = 5 * time.Minute // no wait is longer
	forgetAfter  = 15 * time.Minute
	maxClients   = 10000 // clients remembered at once
)

// throttle counts failed sign-ins per client: a wrong token in the login
// form or in a bearer header. Only a right token of the server's highest
// scope clears the count (see succeeded).
type throttle struct {
	mu       sync.Mutex
	byClient map[string]*failures
	now      func() time.Time // tests set a clock of their own
}

type failures struct {
	n     int
	last  time.Time
	until time.Time // no token is checked before then
}

func newThrottle() *throttle {
	return &throttle{byClient: map[string]*failures{}, now: time.Now}
}

// client names who is guessing: the peer's address (never a forwarded
// header, which the guesser writes), an IPv6 peer by its /64, since one
// host holds a whole /64.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// wait returns how long the client must wait before its next token is
// checked; zero when it may try now.
func (t *throttle) wait(who string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byClient[who]
	if f == nil {
		return 0
	}
	return max(f.until.Sub(t.now()), 0)
}

// failed records a wrong token from the client.
func (t *throttle) failed(who string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byClient[who]
	if f == nil {
		if len(t.byClient) >= maxClients {
			t.prune(now)
		}
		f = &failures{}
		t.byClient[who] = f
	}
	if now.Sub(f.last) > forgetAfter {
		f.n = 0 // an old mistake does not count against today's
	}
	f.n++
	f.last = now
	if f.n >= freeFailures {
		shift := min(f.n-freeFailures, 30) // beyond 2^30 s every wait is maxWait anyway
		f.until = now.Add(min(time.Duration(math.Pow(2, float64(shift)))*firstWait, maxWait))
	}
}

// succeeded records a right token of scope proven from the client; top is
// the highest scope of any configured token. A wrong token does not say
// which scope it guessed at, and any of them may have aimed at top, so
// only a right token of top clears the count: its holder has nothing left
// to win by guessing. Were a read token to clear it, its holder could send
// it after every few guesses at the admin token and never be held back.
// Counting mistakes per scope above the highest proven would clear no
// more than this, so the count stays one number.
func (t *throttle) succeeded(who string, proven, top Scope) {
	if proven < top {
		return
	}
	t.mu.Lock()
	delete(t.byClient, who)
	t.mu.Unlock()
}

// prune forgets clients that have not failed for forgetAfter and, if the
// table is still full, an arbitrary one: memory stays bounded whatever
// the number of addresses a guesser has. Called with mu held.
func (t *throttle) prune(now time.Time) {
	for k, f := range t.byClient {
		if now.Sub(f.last) > forgetAfter { // past every wait: maxWait < forgetAfter
			delete(t.byClient, k)
		}
	}
	for k := range t.byClient {
		if len(t.byClient) < maxClients {
			break
		}
		delete(t.byClient, k)
	}
}

// refuseThrottled answers a client that must wait before trying a token
// again: 429 with Retry-After, a page for the login form and JSON for
// the API. The token it sent is not checked.
func (s *server) refuseThrottled(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	msg := fmt.Sprintf("too many wrong tokens from your address: try again in %d s", secs)
	if isAPI(r.URL.Path) {
		writeError(w, http.StatusTooManyRequests, "too_many_attempts", msg, "")
		return
	}
	s.dash.fail(w, r, http.StatusTooManyRequests, "Too many attempts", "Too many wrong tokens from your address: try again in "+strconv.Itoa(secs)+" s. Nothing was checked.")
}
