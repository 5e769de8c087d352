package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/jobqtest"
)

// withClock gives e's throttle a clock the test moves by hand, before any
// request reaches it, so a wait is waited out without sleeping.
func withClock(e *env) *jobqtest.Clock {
	c := jobqtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e.s.throttle.mu.Lock()
	e.s.throttle.now = c.Now
	e.s.throttle.mu.Unlock()
	return c
}

// An attempt's outcome as the client sees it, whichever way it sent the
// token.
const (
	accepted = "accepted" // served, or a session started
	refused  = "refused"  // checked and found wrong
	held     = "held"     // 429: not checked
)

// attempt sends one token, through a bearer header or the login form,
// and returns the outcome and the Retry-After header.
type attempt func(e *env, token string) (outcome, retryAfter string)

var attempts = map[string]attempt{
	"bearer": func(e *env, token string) (string, string) {
		r := e.do(req{path: "/api/v1/queues", token: tok(token)})
		switch r.status {
		case http.StatusOK:
			return accepted, ""
		case http.StatusUnauthorized:
			return refused, ""
		case http.StatusTooManyRequests:
			return held, r.header.Get("Retry-After")
		}
		e.t.Fatalf("bearer %q: unexpected %d %s", token, r.status, r.raw)
		return "", ""
	},
	"form": func(e *env, token string) (string, string) {
		res := e.postForm("/login", url.Values{"token": {token}})
		switch {
		case res.StatusCode == http.StatusSeeOther && len(res.Cookies()) == 1:
			return accepted, ""
		case res.StatusCode == http.StatusSeeOther && strings.Contains(res.Header.Get("Location"), "failed=1"):
			return refused, ""
		case res.StatusCode == http.StatusTooManyRequests:
			return held, res.Header.Get("Retry-After")
		}
		e.t.Fatalf("login form %q: unexpected %d Location %q", token, res.StatusCode, res.Header.Get("Location"))
		return "", ""
	},
}

const wrongToken = "wrong-wrong-wrong-wrong"

// TestThrottleLowerScopeKeepsCount: a client holding a read (or enqueue)
// token and guessing at the admin one, four wrong guesses then its right
// token, over and over, is held back once its free failures are used up,
// whether guesses and proofs come as bearer tokens or through the login
// form; its right token is held back with them, and each further mistake
// still doubles the wait.
func TestThrottleLowerScopeKeepsCount(t *testing.T) {
	for _, low := range []string{readToken, enqueueToken} {
		for guessBy, guess := range attempts {
			for proveBy, prove := range attempts {
				name := strings.Split(low, "-")[0] + "/guess-by-" + guessBy + "/prove-by-" + proveBy
				t.Run(name, func(t *testing.T) {
					e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
					withClock(e)
					checked, firstHeld := 0, -1
					const rounds, perRound = 40, 4
					for round := range rounds {
						for i := range perRound {
							n := round*perRound + i
							switch out, after := guess(e, wrongToken); out {
							case refused:
								checked++
							case held:
								if firstHeld < 0 {
									firstHeld = n
									if after != "1" {
										t.Errorf("first held guess: Retry-After %q, want 1", after)
									}
								}
							default:
								t.Fatalf("guess %d: %s", n, out)
							}
						}
						want := accepted
						if firstHeld >= 0 {
							want = held // the wait is never over: the clock stands still
						}
						if out, _ := prove(e, low); out != want {
							t.Fatalf("right token after guess %d: %s, want %s", round*perRound+perRound, out, want)
						}
					}
					if checked != freeFailures || firstHeld != freeFailures {
						t.Fatalf("%d of %d guesses checked, the first held back was #%d: want %d checked and #%d held back",
							checked, rounds*perRound, firstHeld, freeFailures, freeFailures)
					}
				})
			}
		}
	}
}

// TestThrottleWaitGrowsPastLowerScope: once the wait is over, a right
// read token is served but leaves the count, so the next mistake doubles
// the wait instead of starting the free ones again.
func TestThrottleWaitGrowsPastLowerScope(t *testing.T) {
	for by, try := range attempts {
		t.Run(by, func(t *testing.T) {
			e := newEnvOn(t, memoryBackend(t), Options{Tokens: testTokens})
			clock := withClock(e)
			for range freeFailures {
				try(e, wrongToken)
			}
			wait := time.Second
			for range 4 {
				if out, after := try(e, readToken); out != held || after != itoa(wait) {
					t.Fatalf("read token within a %v wait: %s Retry-After %q, want held, %s", wait, out, after, itoa(wait))
				}
				clock.Advance(wait)
				if out, _ := try(e, readToken); out != accepted {
					t.Fatalf("read token after the wait: %s, want accepted", out)
				}
				if out, _ := try(e, wrongToken); out != refused {
					t.Fatalf("wrong token after the wait: %s, want refused", out)
				}
				wait *= 2
			}
		})
	}
}

// TestThrottleTopScopeClears: a right token of the highest scope the
// server has clears the count, since no guess can win it more; with no
// admin token configured, that scope is enqueue.
func TestThrottleTopScopeClears(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens []Token
		top    string
	}{
		{"admin", testTokens, adminToken},
		{"enqueue without admin", []Token{{readToken, ScopeRead}, {enqueueToken, ScopeEnqueue}}, enqueueToken},
	} {
		for by, try := range attempts {
			t.Run(c.name+"/"+by, func(t *testing.T) {
				e := newEnvOn(t, memoryBackend(t), Options{Tokens: c.tokens})
				clock := withClock(e)
				for range 3 { // three rounds: the count starts over each time
					for i := range freeFailures {
						if out, _ := try(e, wrongToken); out != refused {
							t.Fatalf("free mistake %d: %s, want refused", i+1, out)
						}
					}
					if out, after := try(e, c.top); out != held || after != "1" {
						t.Fatalf("top token right after %d mistakes: %s Retry-After %q, want held, 1", freeFailures, out, after)
					}
					clock.Advance(time.Second)
					if out, _ := try(e, c.top); out != accepted {
						t.Fatalf("top token after the wait: %s, want accepted", out)
					}
				}
			})
		}
	}
}

// itoa spells a wait in whole seconds as Retry-After does.
func itoa(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
