package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRebinding replays the attack on a token-less 'jobq serve': a
// browser after DNS rebinding sends the attacker's name as Host and Origin
// and calls itself same-origin. Reads and enqueues are refused; loopback
// names and --allowed-hosts are answered.
func TestServeRebinding(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	s := startServe(t, "--db", db, "serve", "--worker", "--allowed-hosts", "jobq.test")
	evil := []string{"Host", "rebind.evil.example:8080", "Origin", "http://rebind.evil.example:8080", "Sec-Fetch-Site", "same-origin"}
	if code, body := call(t, "POST", s.url+"/api/v1/jobs", "", `{"type":"http","payload":{"url":"http://example.invalid/"}}`, evil...); code != http.StatusForbidden || errCode(body) != "host_not_allowed" {
		t.Fatalf("enqueue with a rebound Host: %d %v, want 403 host_not_allowed", code, body)
	}
	if code, body := call(t, "GET", s.url+"/api/v1/queues", "", "", evil...); code != http.StatusForbidden || errCode(body) != "host_not_allowed" {
		t.Fatalf("read with a rebound Host: %d %v, want 403 host_not_allowed", code, body)
	}
	for _, host := range []string{"", "localhost:1", "jobq.test"} { // "": the URL's 127.0.0.1
		code, body := call(t, "GET", s.url+"/api/v1/queues", "", "", "Host", host)
		if code != http.StatusOK {
			t.Fatalf("read with Host %q: %d %v, want 200", host, code, body)
		}
		if qs, _ := body["queues"].([]any); len(qs) != 0 {
			t.Fatalf("after the refused enqueue the store holds queues %v, want none", qs)
		}
	}
}

// errCode reads an API error's code.
func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestServeHeadersEveryAnswer: under --prefix, the answers outside the
// prefix (404s) and the redirect to it carry the security headers too,
// as do the handler's own.
func TestServeHeadersEveryAnswer(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--db", tempDB(t), "serve", "--worker", "--prefix", "/admin")
	root := strings.TrimSuffix(s.url, "/admin")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/", 404}, {"/elsewhere", 404}, {"/api/v1/queues", 404}, {"/admin", 301},
		{"/admin/", 200}, {"/admin/api/v1/queues", 200}, {"/admin/api/v1/nope", 404}, {"/admin/nope", 404},
	} {
		res, err := noFollow.Get(root + c.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("GET %s: %d, want %d", c.path, res.StatusCode, c.status)
		}
		for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
			if res.Header.Get(h) == "" {
				t.Errorf("GET %s (%d): no %s", c.path, res.StatusCode, h)
			}
		}
	}
}

// TestServeSlowBody: a body sent a byte at a time is cut off at
// --read-timeout, on the one route that needs no token (/login), rather
// than holding the connection for as long as the client likes.
func TestServeSlowBody(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--db", tempDB(t), "serve", "--worker", "--token", serveAdmin, "--read-timeout", "2s")
	u, _ := url.Parse(s.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /login HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	// The cut at the 2 s read timeout is the point, so the lower bound
	// below is kept; the upper one only has to tell the cut from a body
	// read to its end. The body is made slow enough (a byte a second:
	// 100 s) that the upper bound can be generous, 60 s, for a loaded
	// machine where the server process may be scheduled late (it was
	// 12 s with a 20 s body).
	go func() {
		for range 100 {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	_, err = io.Copy(io.Discard, conn) // until the server closes it
	took := time.Since(start)
	// A close with our unread bytes in the server's buffer arrives as a
	// reset: cut off all the same. Only the read deadline means still open.
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if err != nil || took > 60*time.Second {
		t.Fatalf("slow body: connection still open after %s (%v), want it closed at the 2 s read timeout", took.Round(time.Millisecond), err)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("slow body: cut off after %s, before the 2 s read timeout", took.Round(time.Millisecond))
	}
}

// TestServeHeaderCap: a request whose header is over 64 KiB gets 431.
func TestServeHeaderCap(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--db", tempDB(t), "serve", "--worker")
	u, _ := url.Parse(s.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	go func() {
		_, _ = io.WriteString(conn, "GET /api/v1/queues HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Big: "+strings.Repeat("a", 200<<10)+"\r\n\r\n")
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 200 KiB header: %d, want 431", res.StatusCode)
	}
}
